"""apply --wait's report of what failed points at logs that exist: a run blocked behind a
failed upstream, whose job never started, gets no log path (issue 28, point 3)."""

from __future__ import annotations

import re
from pathlib import Path

from tests.gitrepo import GitRepo
from tests.local.serving import recon
from tests.projects import new_project_name

SPECS = """\
kind: Run
name: a
command: exit 1
outputs:
  o: o.txt
---
kind: Run
name: b
command: cat {inputs.i.path}
inputs:
  i: a.o
"""


def test_a_blocked_run_that_never_started_gets_no_log_path(tmp_path: Path) -> None:
    root = tmp_path / "blocked"
    project = f"project: {new_project_name('blocked')}\nscheduler: local\n"
    GitRepo(root).commit(
        {"recon.yaml": project + "defaults:\n  environment: {}\n", "specs/s.yaml": SPECS}
    )
    done = recon(root, "apply", ".", "--auto-approve", "--wait")
    assert done.returncode == 1, done.stdout + done.stderr
    failed = re.search(r"^submitted a: job (\d+)$", done.stdout, re.MULTILINE)
    assert failed is not None, done.stdout
    log = root / "runs" / "a" / "logs" / f"slurm-{failed.group(1)}.err"
    assert log.exists()
    assert done.stderr == (
        f"failed a: failed: job {failed.group(1)} failed (exit 1); no retries left (retries: "
        "0). Change its spec or code and commit, or `recon apply --replace a`\n"
        f"  log: {log}\n"
        "blocked b: upstream a failed\n"
    )
