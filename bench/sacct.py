"""What an observation of a busy user's sacct costs: 125,000 to 1,000,000 rows.

    python bench/sacct.py [--rows 125000,250000,500000,1000000] [--recon-jobs 10000] [--versus DIR]
    python bench/sacct.py --tasks 25000,50000,100000 [--versus DIR]
    python bench/sacct.py --columns [--repeat 7]

The text is generated: --recon-jobs jobs of recon's (a job row with its tag, a batch and
an extern step each; one in ten still running, so its sacct rows carry no comment and
squeue speaks for it) among other jobs of the same user's with their steps, up to the
row count. Each figure is the real Slurm adapter's ``observe`` (squeue and sacct text
through its runner seam, parsed and combined) in a fresh process: wall time of the call
and the process's peak RSS (the text itself included), beside a bare
``line.split('|')`` of every line for scale; wall and CPU time both (on a shared
machine the CPU time is the steadier figure; growth is computed from it). Target:
1,000,000 rows within 3 s and 600 MiB. It is a benchmark, not a test.

--tasks N,...: a sweep's arrays instead (issue 30: 100,000 array tasks and their steps
observed within 3 s). N tasks of recon's in arrays of 1,000 (MaxArraySize 1,001), each
task a row with its batch and extern steps; one task in a hundred still running (squeue
lists it, sacct has no comment for it yet). sacct's two calls answer as Slurm does:
``--allocations`` the tasks' own rows, ``--jobs=<the arrays>`` every row. --versus DIR
measures the checkout at DIR too (say, /work/main), in turn with this one, on the same
rows in the columns it asks for (``fitted``): the parsing cost of columns one asks for
and the other does not is the difference.

--columns: what the columns recon asks for since right-sizing (MaxRSS, TotalCPU) cost
sacct itself, on the cluster this runs on: the same two calls a pass makes (the jobs'
own rows, then every row, steps included) over this user's last day, with and without
them, --repeat times in turn; the median wall time and the bytes printed of each.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PROJECT = "benchsacct"
HASH = "0123456789abcdef"
DEPLOYMENT = "0123456789ab"
TIMES = "2026-12-01T10:00:00|2026-12-01T10:01:00|2026-12-01T10:02:00"
# ElapsedRaw, TimelimitRaw and AllocTRES, after Partition (recon reads them since its
# journal schema 6), then MaxRSS and TotalCPU (since schema 8: right-sizing); left out
# for a checkout that does not ask for them (``fitted``). A step's MaxRSS differs job to
# job, as real ones do (``used``); a job's own row has none.
USAGE = "60|10|billing=1,cpu=1,mem=100M,node=1"
USAGE_AT = 10  # the index of ElapsedRaw among the columns
USED_AT = 13  # the index of MaxRSS
ARRAY = 1000  # tasks to an array: MaxArraySize 1,001

CHILD = """\
import os, resource, subprocess, sys, time
from datetime import UTC, datetime, timedelta
squeue_text = open(sys.argv[2]).read()
sacct_text = open(sys.argv[3]).read()
if sys.argv[1] == "tasks":  # the first sacct call lists the tasks' own rows only
    firsts = "\\n".join(line for line in sacct_text.splitlines() if "." not in line.split("|")[0])
if sys.argv[1] == "split":
    start, cpu = time.perf_counter(), time.process_time()
    rows = [line.split("|") for line in sacct_text.splitlines()]
    seconds, cpu, jobs = time.perf_counter() - start, time.process_time() - cpu, len(rows)
else:
    from reconciler.scheduler.slurm.adapter import SlurmScheduler

    calls = []

    def runner(argv, stdin=None):
        calls.append(argv[0] + (" --allocations" if "--allocations" in argv else ""))
        text = sacct_text if argv[0] == "sacct" else squeue_text
        if argv[0] == "sacct" and "--allocations" in argv and sys.argv[1] == "tasks":
            text = firsts + "\\n"
        return subprocess.CompletedProcess(list(argv), 0, text, "")

    scheduler = SlurmScheduler(runner, tz=UTC)
    start, cpu = time.perf_counter(), time.process_time()
    observation = scheduler.observe(datetime.now(UTC) - timedelta(days=2))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    jobs = len(observation.jobs)
    if sys.argv[1] == "tasks":
        jobs = sum(len(job.tasks()) or 1 for job in observation.jobs)
        assert calls == ["squeue", "sacct --allocations", "sacct"], calls
    assert observation.complete, observation.problems
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(seconds, cpu, peak, jobs)
"""


def used(job: int, step: bool) -> str:
    """MaxRSS and TotalCPU of a job's row (no MaxRSS: it is on its steps) or a step's."""
    return f"{100000 + job % 90000}K|00:{job % 60:02}.{job % 1000:03}" if step else "|01:02.500"


def generate(rows: int, recon_jobs: int) -> tuple[str, str]:
    """(squeue text, sacct text): recon's jobs spread evenly among the others'."""
    squeue, sacct = [], []
    every = max(1, rows // (recon_jobs * 3))
    job, written, recon = 100000, 0, 0
    while written < rows:
        job += 1
        if recon < recon_jobs and job % every == 0:
            recon += 1
            name = f"sweep-{recon}"
            tag = f"recon2:{PROJECT}:{DEPLOYMENT}:run:{name}:{HASH}"
            if recon % 10 == 0:  # running: sacct has no comment yet, squeue has
                squeue.append(
                    f"{job}|{job}|RUNNING|None|cpu1|cpu|2026-12-01T10:00:00|"
                    f"2026-12-01T10:01:00|10:00||{PROJECT}.{name}|{tag}"
                )
                state, tag_cell, end = "RUNNING", "", "Unknown"
            else:
                state, tag_cell, end = "COMPLETED", tag, "2026-12-01T10:02:00"
            times = TIMES.rsplit("|", 1)[0] + f"|{end}"
            own = f"{USAGE}|{used(job, False)}"
            sacct.append(
                f"{job}|{job}|{state}|0:0||{times}|cpu1|cpu|{own}||{PROJECT}.{name}|{tag_cell}"
            )
        else:
            own = f"{USAGE}|{used(job, False)}"
            sacct.append(f"{job}|{job}|COMPLETED|0:0||{TIMES}|cpu2|cpu|{own}||analysis-{job}|")
        steps = f"{USAGE}|{used(job, True)}"
        sacct.append(f"{job}.batch|{job}.batch|COMPLETED|0:0||{TIMES}|cpu1||{steps}||batch|")
        sacct.append(f"{job}.extern|{job}.extern|COMPLETED|0:0||{TIMES}|cpu1||{steps}||extern|")
        written += 3
    return "\n".join(squeue) + "\n", "\n".join(sacct) + "\n"


def generate_tasks(tasks: int) -> tuple[str, str]:
    """(squeue text, sacct text): ``tasks`` array tasks of recon's, 1,000 to an array."""
    squeue, sacct = [], []
    for number, first in enumerate(range(0, tasks, ARRAY)):
        array = 500000 + number * 2 * ARRAY  # raw ids of its tasks follow it
        name = f"{PROJECT}.sweep-{number}"
        tag = f"recon2:{PROJECT}:{DEPLOYMENT}:run:sweep-{number}:{HASH}"
        for index in range(min(ARRAY, tasks - first)):
            job, raw = f"{array}_{index}", f"{array + index}"
            own = f"{USAGE}|{used(array + index, False)}"
            steps = f"{USAGE}|{used(array + index, True)}"
            if index % 100 == 99:  # running: squeue speaks for it, with its comment
                squeue.append(
                    f"{job}|{raw}|RUNNING|None|cpu1|cpu|2026-12-01T10:00:00|"
                    f"2026-12-01T10:01:00|10:00||{name}|{tag}"
                )
                head = (
                    f"{job}|{raw}|RUNNING|0:0||{TIMES.rsplit('|', 1)[0]}|Unknown|cpu1|cpu|{own}||"
                )
                sacct.append(f"{head}{name}|")
                sacct.append(f"{job}.batch|{raw}.batch|RUNNING|0:0||{TIMES}|cpu1||{steps}||batch|")
            else:
                sacct.append(f"{job}|{raw}|COMPLETED|0:0||{TIMES}|cpu1|cpu|{own}||{name}|{tag}")
                sacct.append(
                    f"{job}.batch|{raw}.batch|COMPLETED|0:0||{TIMES}|cpu1||{steps}||batch|"
                )
            sacct.append(f"{job}.extern|{raw}.extern|COMPLETED|0:0||{TIMES}|cpu1||{steps}||extern|")
    return "\n".join(squeue) + "\n", "\n".join(sacct) + "\n"


def fitted(sacct_text: str, code: Path) -> str:
    """The sacct text in the columns the checkout at ``code`` asks for: without MaxRSS and
    TotalCPU for one that predates them, and without the usage columns too for one that
    predates those."""
    asked = "from reconciler.scheduler.slurm.parse import SACCT_FIELDS; print(len(SACCT_FIELDS))"
    env = {**os.environ, "PYTHONPATH": str(code)}
    told = subprocess.run(
        [sys.executable, "-c", asked], cwd=code, env=env, capture_output=True, text=True, check=True
    )
    fields = int(told.stdout)
    written = sacct_text.split("\n", 1)[0].count("|") + 1
    # the columns a checkout of each width lacks: (first, how many)
    lacks = {written: (0, 0), written - 2: (USED_AT, 2), written - 5: (USAGE_AT, 5)}
    if fields not in lacks:
        sys.exit(f"{code} asks sacct for {fields} columns: this benchmark writes them otherwise")
    at, extra = lacks[fields]
    if not extra:
        return sacct_text
    lines = (line.split("|") for line in sacct_text.splitlines())
    return "".join("|".join(cells[:at] + cells[at + extra :]) + "\n" for cells in lines)


def timed(
    mode: str, squeue: Path, sacct: Path, code: Path = HERE
) -> tuple[float, float, float, int]:
    env = {**os.environ, "PYTHONPATH": str(code)}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(squeue), str(sacct)],
        cwd=code,  # `python -c` puts the cwd first on sys.path
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(result.stderr[-2000:])
    seconds, cpu, peak, jobs = result.stdout.split()
    return float(seconds), float(cpu), float(peak), int(jobs)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", default="125000,250000,500000,1000000")
    parser.add_argument("--recon-jobs", type=int, default=10000)
    parser.add_argument("--tasks", help="array tasks of recon's, e.g. 25000,50000,100000")
    parser.add_argument("--versus", type=Path, help="another checkout too, in turn")
    parser.add_argument("--columns", action="store_true", help="time the real sacct's columns")
    parser.add_argument("--repeat", type=int, default=7, help="with --columns: calls of each")
    options = parser.parse_args()
    if options.columns:
        return columns_main(options.repeat)
    codes = {"this": HERE, **({"versus": options.versus.resolve()} if options.versus else {})}
    if options.tasks:
        return tasks_main([int(size) for size in options.tasks.split(",")], codes)
    sizes = [int(size) for size in options.rows.split(",")]
    times: dict[str, list[float]] = {label: [] for label in codes}
    with tempfile.TemporaryDirectory(prefix="recon-bench-sacct-") as work:
        for rows in sizes:
            squeue_text, sacct_text = generate(rows, min(options.recon_jobs, rows // 3))
            squeue, sacct = Path(work, "squeue"), Path(work, "sacct")
            squeue.write_text(squeue_text)
            sacct.write_text(sacct_text)
            split_seconds, split_cpu, split_peak, _ = timed("split", squeue, sacct)
            print(
                f"{rows:8} rows: bare split {split_seconds:5.2f} s (cpu {split_cpu:5.2f} s), "
                f"peak {split_peak:5.0f} MiB",
                flush=True,
            )
            for label, code in codes.items():  # in turn, in the same minutes
                sacct.write_text(fitted(sacct_text, code))
                seconds, cpu, peak, jobs = timed("observe", squeue, sacct, code)
                times[label].append(cpu)
                print(
                    f"{label:6} {rows:8} rows ({jobs} of recon's jobs): observe {seconds:6.2f} s "
                    f"(cpu {cpu:5.2f} s), peak {peak:5.0f} MiB",
                    flush=True,
                )
    for label in codes:
        print(f"{label:6} growth per doubling of rows (cpu): {growth(sizes, times[label])}")


def columns_main(repeat: int) -> None:
    """The real sacct's two calls of a pass over this user's last day, with recon's columns
    and without MaxRSS and TotalCPU, in turn: median wall time and bytes of each."""
    import statistics

    sys.path.insert(0, str(HERE))
    from reconciler.scheduler.slurm.parse import SACCT_FIELDS

    without = [field for field in SACCT_FIELDS if field not in ("MaxRSS", "TotalCPU")]
    forms = {"with MaxRSS,TotalCPU": list(SACCT_FIELDS), "without them": without}
    base = ["sacct", "--parsable2", "--noheader", "--starttime=now-1days", "--endtime=now"]
    base.append(f"--user={os.environ.get('USER') or 'root'}")
    walls: dict[tuple[str, str], list[float]] = {}
    sizes: dict[tuple[str, str], tuple[int, int]] = {}  # bytes, rows
    for _ in range(repeat):
        for call, extra in (("jobs' own rows", ["--allocations"]), ("every row", [])):
            for form, fields in forms.items():  # in turn: the cluster's load drifts
                argv = [*base, *extra, f"--format={','.join(fields)}"]
                start = time.perf_counter()
                done = subprocess.run(argv, capture_output=True, text=True, check=True)
                walls.setdefault((call, form), []).append(time.perf_counter() - start)
                sizes[call, form] = (len(done.stdout), done.stdout.count("\n"))
    for (call, form), seconds in walls.items():
        printed = sizes[call, form]
        print(
            f"sacct {call:14} {form:21}: median {statistics.median(seconds) * 1000:7.1f} ms "
            f"over {repeat} calls, {printed[1]:7} rows, {printed[0]:9} bytes",
            flush=True,
        )
    for call in ("jobs' own rows", "every row"):
        asked = statistics.median(walls[call, "with MaxRSS,TotalCPU"])
        plain = statistics.median(walls[call, "without them"])
        print(f"sacct {call}: the two columns cost {(asked / plain - 1) * 100:+.1f}% wall time")


def growth(sizes: list[int], times: list[float]) -> str:
    steps = [
        f"{(times[i] / times[i - 1]) ** (1 / math.log2(sizes[i] / sizes[i - 1])):.2f}x"
        for i in range(1, len(sizes))
    ]
    return ", ".join(steps) or "-"


def tasks_main(sizes: list[int], codes: dict[str, Path]) -> None:
    times: dict[str, list[float]] = {label: [] for label in codes}
    with tempfile.TemporaryDirectory(prefix="recon-bench-sacct-") as work:
        for tasks in sizes:
            squeue_text, sacct_text = generate_tasks(tasks)
            squeue, sacct = Path(work, "squeue"), Path(work, "sacct")
            squeue.write_text(squeue_text)
            sacct.write_text(sacct_text)
            rows = sacct_text.count("\n")
            for label, code in codes.items():  # in turn, in the same minutes
                sacct.write_text(fitted(sacct_text, code))
                seconds, cpu, peak, seen = timed("tasks", squeue, sacct, code)
                times[label].append(cpu)
                print(
                    f"{label:6} {tasks:7} array tasks ({rows} sacct rows, {seen} tasks seen): "
                    f"observe {seconds:6.2f} s (cpu {cpu:5.2f} s), peak {peak:5.0f} MiB"
                    "   target <= 3 s",
                    flush=True,
                )
    for label in codes:
        print(f"{label:6} growth per doubling of tasks (cpu): {growth(sizes, times[label])}")


if __name__ == "__main__":
    main()
