"""`recon cost` over N runs with their jobs in the journal (target: 10,000 in a second or two).

    python bench/cost.py [--sizes 2500,5000,10000] [--repeat 3]

For each size: a project of N runs (a tenth of them members of sweeps of ten, every
hundredth run inside an allocation), committed in a repository of its own, and a journal
holding three settled jobs per run as recon would have recorded them, each with its
usage (a superseded success at an older spec, a failed attempt, the current success),
plus one job per allocation with idle time; every allocation job released by
idle_release. Then `recon cost` (text) and `recon cost --format json` as a user runs
them, each a whole command in a fresh process (interpreter start-up, loading the specs
from a warm parse cache, reading the journal, the ledger, the report): wall time and CPU
time, the median of --repeat runs; then the growth per doubling of runs between sizes
((t2/t1) ** (1 / log2(n2/n1)): 2.00x is linear). Nothing is submitted; no cluster is
asked. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from reconciler.desired.loader import load_desired, open_source  # noqa: E402
from reconciler.engine.plan.causes import Cause  # noqa: E402
from reconciler.scheduler.usage import JobUsage  # noqa: E402
from reconciler.state.journal import Journal  # noqa: E402
from reconciler.state.paths import journal_path  # noqa: E402

RUN = "kind: Run\nname: r{i}\ncommand: 'true'\nresources:\n  cpus: 2\n  gpus: 1\n  time: 2h\n"
STEP = "kind: Run\nname: r{i}\nallocation: a{a}\ncommand: 'true'\nresources:\n  cpus: 1\n"
SWEEP = (
    "kind: Run\nname: s{i}\nmatrix:\n  seed: [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]\ncommand: 'true'\n"
    "resources:\n  cpus: 1\n  gpus: 1\n  time: 1h\n"
)
ALLOCATION = (
    "kind: Allocation\nname: a{a}\nresources:\n  partition: gpu\n  cpus: 4\n  gpus: 1\n"
    "time_limit: 4h\nidle_release: 30m\n"
)
T0 = datetime(2026, 11, 1, tzinfo=UTC)


def git(root: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_project(root: Path, runs: int) -> None:
    specs = root / "specs"
    specs.mkdir(parents=True)
    (root / "recon.yaml").write_text(f"project: benchcost{runs}\nscheduler: local\n")
    sweeps = runs // 10 // 10  # a tenth of the runs are sweep members, ten a sweep
    allocations = max(runs // 100, 1)
    for s in range(sweeps):
        (specs / f"s{s:05d}.yaml").write_text(SWEEP.format(i=s))
    for a in range(allocations):
        (specs / f"a{a:05d}.yaml").write_text(ALLOCATION.format(a=a))
    for i in range(runs - sweeps * 10):
        text = STEP.format(i=i, a=i // 100) if i % 100 == 0 else RUN.format(i=i)
        (specs / f"r{i:05d}.yaml").write_text(text)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "runs")


def fill_journal(root: Path) -> int:
    """Three jobs per run, one per allocation, written in one transaction (recon writes
    them one by one as they end; the bench times reading them)."""
    desired = load_desired(open_source(root, None, False))
    path = journal_path(desired)
    path.parent.mkdir(parents=True, exist_ok=True)
    Journal(path).close()  # made and migrated by recon itself
    rows: list[tuple[object, ...]] = []
    cancels: list[tuple[object, ...]] = []
    project, commit = desired.project.project, desired.commit
    job = 1000

    def add(kind: str, name: str, spec: str, health: str, usage: JobUsage, at: datetime) -> str:
        nonlocal job
        job += 1
        inside = kind == "run" and desired.runs[name].allocation is not None
        job_id = f"{job}.0" if inside else str(job)  # a run inside an allocation: a step
        stamp = at.isoformat(timespec="microseconds")
        rows.append(
            (project, kind, name, spec, commit, job_id, "submitted", health,
             json.dumps(usage.to_json()), stamp, stamp)
        )  # fmt: skip
        return job_id

    for number, (name, run) in enumerate(desired.runs.items()):
        at = T0 + timedelta(seconds=number)
        hours = 0.5 + (number % 7) / 7
        held = JobUsage(elapsed_s=hours * 3600, gpus=1, cpus=2, gpu_s=hours * 3600,
                        cpu_s=2 * hours * 3600, wait_s=120)  # fmt: skip
        add("run", name, "old" + run.spec_hash[3:], "succeeded", held, at)
        add("run", name, run.spec_hash, "failed", held, at + timedelta(hours=1))
        add("run", name, run.spec_hash, "succeeded", held, at + timedelta(hours=2))
    for name, allocation in desired.allocations.items():
        idle = JobUsage(elapsed_s=7200, gpus=1, cpus=4, gpu_s=7200, cpu_s=28800, idle_s=3600,
                        idle_gpu_s=3600, idle_cpu_s=14400, time_limit_s=14400)  # fmt: skip
        job_id = add("alloc", name, allocation.spec_hash, "cancelled", idle, T0)
        stamp = T0.isoformat(timespec="microseconds")
        cancels.append((project, name, job_id, "idle", stamp, stamp, Cause.IDLE.value))
    with sqlite3.connect(path) as db:
        db.executemany(
            "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, job_id,"
            " status, final_health, usage, created_at, updated_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
        db.executemany(
            "INSERT INTO cancels (project, name, job_id, reason, created_at, done_at, cause)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)",
            cancels,
        )
    return len(rows)


def timed(root: Path, *args: str) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the child) of one `recon cost` command."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "cost", str(root), *args],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(f"recon cost failed: {done.stderr[-2000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def growth(sizes: list[int], figures: list[float]) -> str:
    steps = [
        f"{(b / a) ** (1 / math.log2(m / n)):.2f}x"
        for (n, a), (m, b) in pairwise(zip(sizes, figures, strict=True))
        if a > 0 and m > n
    ]
    return ", ".join(steps) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="2500,5000,10000")
    parser.add_argument("--repeat", type=int, default=3)
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    text_walls: list[float] = []
    text_cpus: list[float] = []
    json_walls: list[float] = []
    with tempfile.TemporaryDirectory(prefix="benchcost") as work:
        for runs in sizes:
            root = Path(work) / f"p{runs}"
            make_project(root, runs)
            jobs = fill_journal(root)
            timed(root)  # warms the parse cache, as any earlier command would have
            text = [timed(root) for _ in range(options.repeat)]
            as_json = [timed(root, "--format", "json") for _ in range(options.repeat)]
            text_walls.append(statistics.median(wall for wall, _ in text))
            text_cpus.append(statistics.median(cpu for _, cpu in text))
            json_walls.append(statistics.median(wall for wall, _ in as_json))
            print(
                f"{runs:>6} runs, {jobs:>6} jobs: recon cost {text_walls[-1]:.2f} s wall "
                f"({text_cpus[-1]:.2f} s cpu), --format json {json_walls[-1]:.2f} s wall"
            )
    print(f"growth per doubling of runs (wall, text): {growth(sizes, text_walls)}")
    print(f"growth per doubling of runs (cpu, text):  {growth(sizes, text_cpus)}")
    print(f"growth per doubling of runs (wall, json): {growth(sizes, json_walls)}")


if __name__ == "__main__":
    main()
