"""What observing one large job array costs: 1,250 to 10,000 tasks with their steps.

    python bench/arrays.py [--tasks 1250,2500,5000,10000] [--repeat 3]

The text is generated in the shape Slurm 22.05 prints (docs/operations.md, "Job arrays"):
one array of N tasks, nine in ten of them ended (sacct: the task's row with its tag, its
``batch`` and ``extern`` steps), 50 running (squeue's rows; sacct's without a comment yet,
with a running ``batch`` step), the rest waiting, as one compressed range row in squeue
(``A_[k-N%50]``) and a stale, wider one in sacct. Each figure is the best of --repeat
runs, in CPU seconds, of
- ``observe``: the real Slurm adapter's pass (both texts through its runner seam,
  parsed and combined) into one ObservedJob, and
- ``tasks()``: that job's per-task views, pending ones expanded;
with growth per doubling of tasks (2.00x is linear in the task count, 4.00x quadratic).
Target: 10,000 tasks observed and split into tasks within 1 s, linear. It is a
benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta

from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.slurm.adapter import SlurmScheduler

TAG = "recon2:bencharr:0123456789ab:run:sweep:0123456789abcdef"
ARRAY = 500000
RUNNING = 50
DAY = "2026-12-01T10:0"


def generate(tasks: int) -> tuple[str, str]:
    """(squeue text, sacct text) of one array of ``tasks`` tasks."""
    ended = tasks * 9 // 10
    running = range(ended, min(ended + RUNNING, tasks))
    squeue, sacct = [], []
    for index in range(ended):
        raw = ARRAY + 1 + index
        head = f"{ARRAY}_{index}"
        times = f"{DAY}0:00|{DAY}1:00|{DAY}2:00|cpu1"
        sacct.append(f"{head}|{raw}|COMPLETED|0:0|None|{times}|cpu|/w|bencharr.sweep|{TAG}")
        sacct.append(f"{head}.batch|{raw}.batch|COMPLETED|0:0||{times}||/w|batch|")
        sacct.append(f"{head}.extern|{raw}.extern|COMPLETED|0:0||{times}||/w|extern|")
    for index in running:
        raw = ARRAY + 1 + index
        head = f"{ARRAY}_{index}"
        squeue.append(
            f"{head}|{raw}|RUNNING|None|cpu1|cpu|{DAY}0:00|{DAY}1:00|10:00|/w|bencharr.sweep|{TAG}"
        )
        times = f"{DAY}0:00|{DAY}1:00|Unknown|cpu1"
        sacct.append(f"{head}|{raw}|RUNNING|0:0|None|{times}|cpu|/w|bencharr.sweep|")
        sacct.append(f"{head}.batch|{raw}.batch|RUNNING|0:0||{times}||/w|batch|")
    if running.stop < tasks:
        waiting = f"{ARRAY}_[{running.stop}-{tasks - 1}%{RUNNING}]"
        squeue.append(
            f"{waiting}|{ARRAY}|PENDING|JobArrayTaskLimit||cpu|{DAY}0:00|N/A|10:00|/w|"
            f"bencharr.sweep|{TAG}"
        )
        stale = f"{ARRAY}_[{running.start}-{tasks - 1}%{RUNNING}]"
        sacct.append(
            f"{stale}|{ARRAY}|PENDING|0:0|JobArrayTaskLimit|{DAY}0:00|Unknown|Unknown|"
            f"None assigned|cpu|/w|bencharr.sweep|"
        )
    return "\n".join(squeue) + "\n", "\n".join(sacct) + "\n"


def best(repeat: int, work: Callable[[], object]) -> float:
    """The least CPU time of ``repeat`` runs of ``work`` (a shared machine adds, never takes)."""
    spent = []
    for _ in range(repeat):
        start = time.process_time()
        work()
        spent.append(time.process_time() - start)
    return min(spent)


def measure(tasks: int, repeat: int) -> tuple[float, float, int]:
    squeue, sacct = generate(tasks)

    def runner(
        argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        text = sacct if argv[0] == "sacct" else squeue
        return subprocess.CompletedProcess(list(argv), 0, text, "")

    scheduler = SlurmScheduler(runner, tz=UTC, user="bench")
    since = datetime.now(UTC) - timedelta(days=2)
    jobs: list[ObservedJob] = []

    def observe() -> None:
        observation = scheduler.observe(since)
        assert observation.complete, observation.problems
        jobs[:] = observation.jobs

    observing = best(repeat, observe)
    (job,) = jobs
    found: dict[int, ObservedJob] = {}

    def split() -> None:  # on a fresh copy: a job works its views out once, then keeps them
        fresh = ObservedJob(job_id=job.job_id, tag=job.tag, rows=job.rows)
        found.update(fresh.tasks())

    splitting = best(repeat, split)
    assert sorted(found) == list(range(tasks)), "a task went missing"
    return observing, splitting, len(sacct.splitlines())


def growth(sizes: list[int], figures: list[float]) -> str:
    steps = [
        f"{(figures[i] / figures[i - 1]) ** (1 / math.log2(sizes[i] / sizes[i - 1])):.2f}x"
        for i in range(1, len(sizes))
    ]
    return ", ".join(steps) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default="1250,2500,5000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    sizes = [int(size) for size in options.tasks.split(",")]
    observing, splitting = [], []
    for tasks in sizes:
        observe, split, rows = measure(tasks, options.repeat)
        observing.append(observe)
        splitting.append(split)
        print(
            f"{tasks:6} tasks ({rows} sacct rows): observe {observe:5.3f} s cpu, "
            f"tasks() {split:5.3f} s cpu, together {observe + split:5.3f} s",
            flush=True,
        )
    print(f"growth per doubling of tasks (cpu): observe {growth(sizes, observing)}")
    print(f"growth per doubling of tasks (cpu): tasks() {growth(sizes, splitting)}")


if __name__ == "__main__":
    main()
