"""The example project, run end to end on the local backend through `recon apply`: the
pipeline's DAG and the het actor-learner run (srun --het-group, SLURM_JOB_NODELIST_HET_GROUP_n)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.local.serving import example_project

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"
TIMEOUT = 60.0


def recon(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # The machine's own CPU count (no RECON_LOCAL_CPUS): the example fits two cores.
    env = {"PATH": "/usr/bin:/bin", "HOME": str(root)}
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # a worktree runs its own code
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture
def example(tmp_path: Path) -> Path:
    return example_project(tmp_path)


def test_the_example_project_runs_end_to_end_locally(example: Path) -> None:
    first = recon(example, "apply", ".", "--auto-approve")
    assert first.returncode == 0, first.stdout + first.stderr
    assert "scheduler: local" in first.stdout and "Apply complete: 11 submitted" in first.stdout

    deadline = time.monotonic() + TIMEOUT
    while True:
        status = recon(example, "status", ".", "--format", "json")
        assert status.returncode == 0, status.stdout + status.stderr
        healths = {row["name"]: row["health"] for row in json.loads(status.stdout)}
        if set(healths.values()) <= {"succeeded", "failed", "cancelled"}:
            break
        assert time.monotonic() < deadline, healths
        time.sleep(0.5)
    members = [f"seeds[lr={lr},seed={seed}]" for lr in (0.1, 0.5) for seed in range(3)]
    runs = ["actor-learner", "prepare", "train", "evaluate", *members, "compare"]
    assert healths == dict.fromkeys(runs, "succeeded")

    runs_dir = example / "runs"
    assert json.loads((runs_dir / "evaluate" / "metrics.json").read_text())
    # The sweep's six policies, compared in one table, best first.
    table = (runs_dir / "compare" / "table.csv").read_text().splitlines()
    assert table[0] == "accuracy,policy" and len(table) == 7
    assert all("/runs/seeds/lr=" in line for line in table[1:])
    (log,) = (runs_dir / "actor-learner" / "logs").glob("slurm-*.out")
    assert log.read_text().startswith("environments on: ")
    again = recon(example, "plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
