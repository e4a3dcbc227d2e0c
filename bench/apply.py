"""`recon apply` of N independent runs against a bare loop of N `sbatch` calls, same cluster.

    python bench/apply.py [--sizes 500,2000]

Needs the Slurm dev cluster (`recon dev-cluster up`). For each size: a fresh repo of N
runs (`true`, one CPU, one minute), `recon apply --auto-approve` timed as a whole command
in a fresh process, then a loop of N `sbatch --parsable --wrap=true` calls timed the same
way (each a subprocess, as a shell loop would make them), and the ratio (target: at most
1.3 at 2,000). Everything both submit is named after this benchmark (`benchapply...`) and
cancelled at the end, also when a step fails. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
PROJECT = "benchapply"
RUN = 'kind: Run\nname: r{i}\ncommand: "true"\nresources:\n  cpus: 1\n  time: "00:01:00"\n'


def git(root: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_repo(root: Path, runs: int) -> None:
    """A project of its own per size, so no apply reads another's jobs in sacct."""
    (root / "specs").mkdir(parents=True)
    project = f"{PROJECT}-{os.getpid()}-{runs}"
    (root / "recon.yaml").write_text(f"project: {project}\nscheduler: slurm\n")
    for i in range(runs):
        (root / "specs" / f"r{i:05d}.yaml").write_text(RUN.format(i=i))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "runs")


def recon_apply(root: Path) -> float:
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    command = [sys.executable, "-m", "reconciler", "apply", str(root), "--auto-approve"]
    start = time.perf_counter()
    result = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - start
    if result.returncode != 0:
        raise RuntimeError(f"recon apply failed: {result.stderr[-2000:]}")
    return seconds


def sbatch_loop(runs: int, work: Path) -> float:
    start = time.perf_counter()
    for _ in range(runs):
        subprocess.run(
            ["sbatch", "--parsable", f"--job-name={PROJECT}.bare", "--wrap=true"],
            cwd=work,
            capture_output=True,
            check=True,
        )
    return time.perf_counter() - start


def cancel_all() -> int:
    """Cancel every job of this benchmark's project still known to slurmctld."""
    listed = subprocess.run(
        ["squeue", "--me", "--noheader", "--format=%i|%j"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.splitlines()
    ids = [line.split("|")[0] for line in listed if line.partition("|")[2].startswith(PROJECT)]
    for start in range(0, len(ids), 500):
        subprocess.run(["scancel", *ids[start : start + 500]], capture_output=True, check=False)
    return len(ids)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="500,2000")
    options = parser.parse_args()
    if shutil.which("sbatch") is None:
        sys.exit("needs the Slurm dev cluster: `recon dev-cluster up`")
    sizes = [int(size) for size in options.sizes.split(",")]
    applies = []
    work = Path(tempfile.mkdtemp(prefix="recon-bench-apply-"))
    try:
        for runs in sizes:
            root = work / f"repo-{runs}"
            make_repo(root, runs)
            applied = recon_apply(root)
            cancel_all()
            bare = sbatch_loop(runs, work)
            cancel_all()
            applies.append(applied)
            print(
                f"{runs:5} runs: recon apply {applied:6.2f} s ({1000 * applied / runs:5.1f} ms"
                f" a run), sbatch loop {bare:6.2f} s ({1000 * bare / runs:5.1f} ms a job),"
                f" ratio {applied / bare:.2f}",
                flush=True,
            )
        steps = [
            f"{(applies[i] / applies[i - 1]) ** (1 / math.log2(sizes[i] / sizes[i - 1])):.2f}x"
            for i in range(1, len(sizes))
        ]
        print(f"recon apply growth per doubling: {', '.join(steps) or '-'}")
    finally:
        left = cancel_all()
        if left:
            print(f"cancelled {left} jobs of {PROJECT} left queued")
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
