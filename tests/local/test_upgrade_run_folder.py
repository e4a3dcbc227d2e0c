"""An upgrade from the release whose runs kept recon's bookkeeping in ``.recon/`` (the
name of the state directory's default too), run from its own source, to this one, which
writes it in ``.recon-run/`` (``scheduler/runfolder.py``), on the local backend:

- a job array that release submitted, its map in ``.recon/arrays/``, is adopted member
  by member after a crash between sbatch and the journal: never submitted again;
- runs it ran and settled stay current (an output that is the run's folder itself
  holds its ``.recon/``, which is no part of the version its downstream read), their
  manifests in ``.recon/`` are still read, and a job it submitted that ends after the
  upgrade is settled with the environment record its script wrote in ``.recon/``.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.local.test_code_and_healing import ok, old_release, recon
from tests.local.test_engine import cancel_all, local_jobs
from tests.local.test_sweeps import WRITES, submitted, sweep
from tests.projects import new_project_name

# A commit of the releases whose runs kept their bookkeeping in `.recon/` (the engine split
# into rooms, issue #26): what it writes, this release must still read.
DOT_RECON_RELEASE = "71aac28"

# Two runs every upgrade test starts from: one done before the upgrade, one whose job is
# still running across it.
DONE = """\
kind: Run
name: done
resources: {cpus: 1}
command: echo done > {outputs.out.path}
outputs:
  out: done.txt
"""
LIVE = """\
kind: Run
name: live
resources: {cpus: 1}
command: sleep 4; echo live > {outputs.out.path}
outputs:
  out: live.txt
"""

WHOLE = """\
kind: Run
name: whole
resources: {cpus: 1}
command: echo made > "$RECON_RUN_DIR/part.txt"
outputs:
  all: .
"""

READER = """\
kind: Run
name: reader
resources: {cpus: 1}
inputs:
  whole: whole.all
command: ls {inputs.whole.path} > {outputs.out.path}
outputs:
  out: listed.txt
"""

LATE = """\
kind: Run
name: late
resources: {cpus: 1}
command: sleep 2; echo late > {outputs.out.path}
outputs:
  out: late.txt
"""


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"recon.yaml": f"project: {new_project_name('up')}\nscheduler: local\n"})
    return repo


def test_a_live_array_the_earlier_release_submitted_is_adopted_member_by_member(
    project: GitRepo, tmp_path: Path
) -> None:
    old = old_release(tmp_path, DOT_RECON_RELEASE)
    project.commit({"specs/train.yaml": sweep(WRITES + "; sleep 30", seeds="[0, 1]")})
    try:
        crashed = recon(
            project, "apply", "--auto-approve", source=old,
            env={"RECON_FAULT_INJECT": "after-sbatch"},
        )  # fmt: skip
        assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
        runs = project.root / "runs"
        assert len(list(runs.glob("**/.recon/arrays/*.json"))) == 1  # where it wrote the map
        assert not list(runs.glob("**/.recon-run"))

        healed = ok(recon(project, "apply", "--auto-approve"))
        assert healed.count("adopted job") == 4 and not submitted(healed), healed
        assert recon(project, "plan", "--detailed-exitcode").returncode == 0
        assert len(local_jobs(project)) == 1  # one array: never submitted again
    finally:
        cancel_all(project)


def test_what_the_earlier_release_ran_stays_current_and_its_records_are_read(
    project: GitRepo, tmp_path: Path
) -> None:
    old = old_release(tmp_path, DOT_RECON_RELEASE)
    specs = {"specs/train.yaml": sweep(WRITES, seeds="[0]"), "specs/whole.yaml": WHOLE}
    project.commit({**specs, "specs/reader.yaml": READER})
    ok(recon(project, "apply", "--auto-approve", "--wait", source=old))
    whole = project.root / "runs" / "whole"
    assert (whole / ".recon" / "manifest.json").exists()  # inside the output `all: .`
    project.commit({"specs/late.yaml": LATE})
    assert "submitted late" in ok(recon(project, "apply", "--auto-approve", source=old))
    ended(project)

    # This release: the late job is settled, nothing is submitted, everything is current.
    done = ok(recon(project, "apply", "--auto-approve"))
    assert not submitted(done), done
    planned = recon(project, "plan", "--detailed-exitcode")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    late = project.root / "runs" / "late"
    manifest = json.loads((late / ".recon-run" / "manifest.json").read_text())
    had = manifest["environment"]["had"]  # the late job's script wrote it in .recon/
    assert had is not None and had["python"].startswith("Python 3"), manifest["environment"]
    assert not (late / ".recon" / "manifest.json").exists()
    # The manifests the earlier release wrote are read where it wrote them.
    crate = ok(recon(project, "export", "ro-crate", ".", "--out", str(tmp_path / "crate")))
    assert ": 5 runs" in crate and "without a manifest" not in crate, crate


def ended(repo: GitRepo) -> None:
    """Wait until every job of the project has ended."""
    deadline = time.monotonic() + 60
    while any(job["health"] in ("pending", "running") for job in local_jobs(repo)):
        assert time.monotonic() < deadline, local_jobs(repo)
        time.sleep(0.5)
