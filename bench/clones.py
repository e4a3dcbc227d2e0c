"""Two clones of one project applied at the same moment, then one after the other: jobs
per (deployment, run) on the dev cluster.

Each round makes a fresh repo of RUNS sleeping runs and a `git clone` of it (one project,
two folders), runs `recon apply` in both at once, counts the project's jobs by the
deployment in their tags, applies both again one after the other (nothing new may be
submitted or adopted), and cancels everything. Prints the counts and exits 1 if any
(deployment, run) has other than one job, or a clone adopted the other's.

    python bench/clones.py [--rounds 5] [--runs 20]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import uuid
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from reconciler.scheduler.tag import Tag

ENV = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@example.invalid",
       "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@example.invalid"}  # fmt: skip


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, env=ENV | _path())


def _path() -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": "/nonexistent"}


def make_clones(base: Path, name: str, runs: int) -> tuple[Path, Path]:
    origin = base / "a"
    (origin / "specs").mkdir(parents=True)
    (origin / "recon.yaml").write_text(
        f"project: {name}\nprune: true\ndefaults:\n  partition: cpu\n  time: 10\n"
    )
    for index in range(runs):
        (origin / "specs" / f"r{index}.yaml").write_text(
            f"kind: Run\nname: r{index}\ncommand: sleep 60\nresources: {{cpus: 1, memory: 50MiB}}\n"
        )
    git(origin, "init", "-q", "-b", "main")
    git(origin, "add", "-A")
    git(origin, "commit", "-q", "-m", "runs")
    git(base, "clone", "-q", str(origin), str(base / "b"))
    return origin, base / "b"


def apply(root: Path) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "reconciler", "apply", ".", "--auto-approve"],
        cwd=root, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    if result.returncode != 0:
        raise SystemExit(f"apply in {root} failed:\n{result.stdout}{result.stderr}")
    return result.stdout


def jobs_of(name: str) -> Counter[tuple[str, str]]:
    """(deployment, run) -> number of this project's queued or running jobs."""
    listing = subprocess.run(
        ["squeue", "--me", "-h", "-o", "%k"], capture_output=True, text=True, check=True
    ).stdout
    tags = [Tag.parse(line) for line in listing.splitlines()]
    return Counter((tag.deployment, tag.name) for tag in tags if tag and tag.project == name)


def cancel(name: str) -> None:
    listing = subprocess.run(
        ["squeue", "--me", "-h", "-o", "%i|%k"], capture_output=True, text=True, check=True
    ).stdout
    ids = [line.split("|")[0] for line in listing.splitlines() if f":{name}:" in line]
    if ids:
        subprocess.run(["scancel", *ids], check=False)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    bad = 0
    for round_ in range(1, args.rounds + 1):
        name = f"bc{uuid.uuid4().hex[:10]}"
        with tempfile.TemporaryDirectory() as base:
            try:
                clones = make_clones(Path(base), name, args.runs)
                with ThreadPoolExecutor(2) as pool:
                    list(pool.map(apply, clones))
                at_once = jobs_of(name)
                later = [apply(root) for root in clones]
                after = jobs_of(name)
            finally:
                cancel(name)
        deployments = {deployment for deployment, _ in at_once}
        per_key = Counter(at_once.values())
        adopted = sum(out.count("adopted job") for out in later)
        submitted = sum(out.count("submitted ") for out in later)
        ok = (
            len(deployments) == 2
            and len(at_once) == 2 * args.runs
            and set(per_key) == {1}
            and after == at_once
            and adopted == submitted == 0
        )
        bad += not ok
        print(
            f"round {round_}: {len(deployments)} deployments, {sum(at_once.values())} jobs for "
            f"{args.runs} runs x 2 clones, jobs per (deployment, run): {dict(per_key)}; "
            f"second applies: {submitted} submitted, {adopted} adopted "
            f"-> {'ok' if ok else 'WRONG'}"
        )
    print(f"{args.rounds - bad} of {args.rounds} rounds right")
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
