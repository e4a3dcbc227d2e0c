"""Loader speed at sweep scale: 10,000 small run documents, cold and after one file changed.

    python bench/loader.py [--runs 10000] [--per-file 1] [--scripts] [--keep DIR]

With --scripts, each run's command names a committed script of its own
(`python3 scripts/point-N.py ...`): its code, found from the commit's listing.

Targets (on a 2-core machine): cold validation within 4 s; re-validation after one file
changed within 0.5 s. Each load runs in a fresh process, as `recon validate` would; the
whole command's wall time is printed too. Prints the figures; it is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DOC = """\
kind: Run
name: sweep-{i}
description: one point of a learning-rate sweep
command: python train.py --lr {lr} --seed {i} --out {{outputs.model.path}}
resources:
  cpus: 4+
  memory: 16GB
  gpus: A100:1
  time: "01:00:00"
  partition: gpu
inputs:
  data: prepare.dataset
outputs:
  model:
    path: model.pt
env:
  SEED: "{i}"
"""

PREPARE = "kind: Run\nname: prepare\ncommand: x\noutputs:\n  dataset: d.csv\n"


def git(root: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_repo(root: Path, runs: int, per_file: int, scripts: bool = False) -> None:
    (root / "specs").mkdir(parents=True)
    if scripts:
        (root / "scripts").mkdir()
        for i in range(runs):
            (root / "scripts" / f"point-{i}.py").write_text(f"print({i})\n")
    (root / "recon.yaml").write_text("project: sweep\n")
    (root / "specs" / "prepare.yaml").write_text(PREPARE)
    for start in range(0, runs, per_file):
        docs = [
            DOC.format(i=i, lr=0.001 * (i + 1)) for i in range(start, min(runs, start + per_file))
        ]
        if scripts:
            docs = [
                doc.replace("python train.py", f"python3 scripts/point-{i}.py")
                for i, doc in zip(range(start, runs), docs, strict=False)
            ]
        (root / "specs" / f"sweep-{start:05d}.yaml").write_text("---\n".join(docs))
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "sweep")


def timed(root: Path) -> tuple[float, int]:
    """In a fresh process, as `recon validate` runs: the load alone, without start-up."""
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from reconciler.desired.loader import load_desired, open_source\n"
        "start = time.perf_counter()\n"
        "desired = load_desired(open_source(Path(sys.argv[1])))\n"
        "print(time.perf_counter() - start, len(desired.runs))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code, str(root)], capture_output=True, text=True, check=True
    )
    seconds, runs = result.stdout.split()
    return float(seconds), int(runs)


def cli_seconds(root: Path) -> float:
    """Wall time of the whole `recon validate` command, interpreter start-up included."""
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(root)], capture_output=True, check=True
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--per-file", type=int, default=1)
    parser.add_argument("--keep", type=Path, default=None)
    parser.add_argument("--scripts", action="store_true", help="each run names a script")
    args = parser.parse_args()

    base = args.keep or Path(tempfile.mkdtemp(prefix="recon-bench-"))
    root = base / "repo"
    if root.exists():
        shutil.rmtree(root)
    make_repo(root, args.runs, args.per_file, args.scripts)
    files = len(list((root / "specs").iterdir()))
    print(f"repo: {args.runs} runs in {files} files ({args.per_file} per file)")

    cold, count = timed(root)
    print(f"cold (no cache):            {cold:6.2f} s  for {count} runs   target <= 4.0 s")
    shutil.rmtree(root / ".recon")
    print(f"  `recon validate`, cold:   {cli_seconds(root):6.2f} s  (with interpreter start-up)")

    warm, _ = timed(root)
    print(f"warm (nothing changed):     {warm:6.2f} s")

    changed = root / "specs" / "sweep-00000.yaml"
    changed.write_text(changed.read_text().replace("0.001", "0.002", 1))
    git(root, "commit", "-q", "-am", "one point changed")
    one, _ = timed(root)
    print(f"one file changed (cached):  {one:6.2f} s                    target <= 0.5 s")
    print(f"  `recon validate`, cached: {cli_seconds(root):6.2f} s  (with interpreter start-up)")

    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(f"peak memory of a load:      {peak:6.0f} MiB")
    if args.keep is None:
        shutil.rmtree(base)


if __name__ == "__main__":
    main()
