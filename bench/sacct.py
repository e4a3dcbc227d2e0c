"""What an observation of a busy user's sacct costs: 125,000 to 1,000,000 rows.

    python bench/sacct.py [--rows 125000,250000,500000,1000000] [--recon-jobs 10000]

The text is generated: --recon-jobs jobs of recon's (a job row with its tag, a batch and
an extern step each; one in ten still running, so its sacct rows carry no comment and
squeue speaks for it) among other jobs of the same user's with their steps, up to the
row count. Each figure is the real Slurm adapter's ``observe`` (squeue and sacct text
through its runner seam, parsed and combined) in a fresh process: wall time of the call
and the process's peak RSS (the text itself included), beside a bare
``line.split('|')`` of every line for scale; wall and CPU time both (on a shared
machine the CPU time is the steadier figure; growth is computed from it). Target:
1,000,000 rows within 3 s and 600 MiB. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PROJECT = "benchsacct"
HASH = "0123456789abcdef"
DEPLOYMENT = "0123456789ab"
TIMES = "2026-12-01T10:00:00|2026-12-01T10:01:00|2026-12-01T10:02:00"

CHILD = """\
import os, resource, subprocess, sys, time
from datetime import UTC, datetime, timedelta
squeue_text = open(sys.argv[2]).read()
sacct_text = open(sys.argv[3]).read()
if sys.argv[1] == "split":
    start, cpu = time.perf_counter(), time.process_time()
    rows = [line.split("|") for line in sacct_text.splitlines()]
    seconds, cpu, jobs = time.perf_counter() - start, time.process_time() - cpu, len(rows)
else:
    from reconciler.scheduler.slurm.adapter import SlurmScheduler

    def runner(argv, stdin=None):
        text = sacct_text if argv[0] == "sacct" else squeue_text
        return subprocess.CompletedProcess(list(argv), 0, text, "")

    scheduler = SlurmScheduler(runner, tz=UTC)
    start, cpu = time.perf_counter(), time.process_time()
    observation = scheduler.observe(datetime.now(UTC) - timedelta(days=2))
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    jobs = len(observation.jobs)
    assert observation.complete, observation.problems
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(seconds, cpu, peak, jobs)
"""


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
            sacct.append(f"{job}|{job}|{state}|0:0||{times}|cpu1|cpu||{PROJECT}.{name}|{tag_cell}")
        else:
            sacct.append(f"{job}|{job}|COMPLETED|0:0||{TIMES}|cpu2|cpu||analysis-{job}|")
        sacct.append(f"{job}.batch|{job}.batch|COMPLETED|0:0||{TIMES}|cpu1|||batch|")
        sacct.append(f"{job}.extern|{job}.extern|COMPLETED|0:0||{TIMES}|cpu1|||extern|")
        written += 3
    return "\n".join(squeue) + "\n", "\n".join(sacct) + "\n"


def timed(mode: str, squeue: Path, sacct: Path) -> tuple[float, float, float, int]:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    result = subprocess.run(
        [sys.executable, "-c", CHILD, mode, str(squeue), str(sacct)],
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
    options = parser.parse_args()
    sizes = [int(size) for size in options.rows.split(",")]
    times = []
    with tempfile.TemporaryDirectory(prefix="recon-bench-sacct-") as work:
        for rows in sizes:
            squeue_text, sacct_text = generate(rows, min(options.recon_jobs, rows // 3))
            squeue, sacct = Path(work, "squeue"), Path(work, "sacct")
            squeue.write_text(squeue_text)
            sacct.write_text(sacct_text)
            split_seconds, split_cpu, split_peak, _ = timed("split", squeue, sacct)
            seconds, cpu, peak, jobs = timed("observe", squeue, sacct)
            times.append(cpu)
            print(
                f"{rows:8} rows ({jobs} of recon's jobs): observe {seconds:6.2f} s "
                f"(cpu {cpu:5.2f} s), peak {peak:5.0f} MiB; bare split {split_seconds:5.2f} s "
                f"(cpu {split_cpu:5.2f} s), peak {split_peak:5.0f} MiB",
                flush=True,
            )
    steps = [
        f"{(times[i] / times[i - 1]) ** (1 / math.log2(sizes[i] / sizes[i - 1])):.2f}x"
        for i in range(1, len(sizes))
    ]
    print(f"growth per doubling of rows (cpu): {', '.join(steps) or '-'}")


if __name__ == "__main__":
    main()
