"""A run renamed with `renamed_from`, on the local backend: moved with no job, its
outputs, manifest and live job carried over (the dev cluster's half is
tests/integration/test_rename.py)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tests.docs import Watched
from tests.gitrepo import GitRepo
from tests.local.test_engine import cancel_all, local_jobs, recon
from tests.projects import new_project_name

PIPELINE = """\
kind: Run
name: {name}
{renamed}command: echo made > {{outputs.data.path}}
outputs:
  data: data.txt
---
kind: Run
name: train
command: cat {{inputs.d.path}} > {{outputs.model.path}}
inputs:
  d: {name}.data
outputs:
  model: model.txt
"""


def pipeline(name: str, renamed_from: str | None = None) -> str:
    renamed = f"renamed_from: {renamed_from}\n" if renamed_from else ""
    return PIPELINE.format(name=name, renamed=renamed)


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.write({"recon.yaml": f"project: {new_project_name('mv')}\nscheduler: local\n"})
    return repo


def applied(project: GitRepo, *args: str) -> str:
    done = recon(project, "apply", ".", "--auto-approve", *args)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_a_renamed_run_moves_with_its_outputs_and_manifest_and_reruns_nothing(
    project: GitRepo,
) -> None:
    project.commit({"specs/a.yaml": pipeline("prep")})
    applied(project, "--wait")
    before = {job["id"] for job in local_jobs(project)}
    made = (project.root / "runs/prep/data.txt").stat()
    project.commit({"specs/a.yaml": pipeline("prepare", renamed_from="prep")})

    planned = recon(project, "plan", ".", "--detailed-exitcode")
    assert planned.returncode == 2, planned.stdout + planned.stderr
    assert " -> moved     prepare        prep -> prepare: records, outputs and manifest" in (
        planned.stdout
    )
    assert "folder runs/prep -> runs/prepare" in planned.stdout
    assert "Plan: 0 to submit, 0 to replace, 0 to cancel, 1 to move." in planned.stdout
    shown = recon(project, "status", ".").stdout  # before the move: one row, current
    assert shown.count("prepare  current  succeeded") == 1 and "prep " not in shown, shown

    out = applied(project)
    assert "moved prep -> prepare" in out and "\nsubmitted " not in out, out
    assert "Apply complete: 0 submitted, 0 cancelled, 0 adopted, 1 moved, 0 not done." in out
    assert {job["id"] for job in local_jobs(project)} == before  # no job
    assert not os.path.lexists(project.root / "runs/prep")
    moved = (project.root / "runs/prepare/data.txt").stat()
    assert (moved.st_ino, moved.st_mtime_ns) == (made.st_ino, made.st_mtime_ns)  # renamed
    manifest = json.loads((project.root / "runs/prepare/.recon-run/manifest.json").read_text())
    assert manifest["run"] == "prepare"
    assert manifest["run_dir"] == str(project.root.resolve() / "runs/prepare")
    assert manifest["outputs"]["data"]["path"].endswith("/runs/prepare/data.txt")

    status = recon(project, "status", ".")
    assert "prepare  current  succeeded" in status.stdout, status.stdout
    assert "train    current  succeeded" in status.stdout, status.stdout
    # once moved, nothing to do, with renamed_from or without
    assert recon(project, "plan", ".", "--detailed-exitcode").returncode == 0
    project.commit({"specs/a.yaml": pipeline("prepare")})
    again = recon(project, "plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout


def test_a_live_job_of_the_old_name_is_adopted_and_ends_current(project: GitRepo) -> None:
    slow = "kind: Run\nname: {name}\n{renamed}command: sleep 4; echo made > {{outputs.data.path}}\n"
    slow += "outputs:\n  data: data.txt\n"
    project.commit({"specs/a.yaml": slow.format(name="prep", renamed="")})
    try:
        applied(project)
        (job,) = local_jobs(project)
        renamed = slow.format(name="prepare", renamed="renamed_from: prep\n")
        project.commit({"specs/a.yaml": renamed})
        out = applied(project)
        assert "moved prep -> prepare" in out and "\ncancelled " not in out, out
        assert "\nsubmitted " not in out, out
        # the job writes under the old path: left as a link to the new folder
        assert (project.root / "runs/prep").is_symlink()
        waited = applied(project, "--wait")
        assert "\nsubmitted " not in waited, waited
        assert [j["id"] for j in local_jobs(project)] == [job["id"]]
        assert (project.root / "runs/prepare/data.txt").read_text() == "made\n"
        status = recon(project, "status", ".")
        assert f"prepare  current  succeeded  {job['id']}" in status.stdout, status.stdout
    finally:
        cancel_all(project)


def test_a_new_folder_in_the_way_is_refused_and_nothing_is_done(project: GitRepo) -> None:
    project.commit({"specs/a.yaml": pipeline("prep")})
    applied(project, "--wait")
    (project.root / "runs/prepare").mkdir()
    project.commit({"specs/a.yaml": pipeline("prepare", renamed_from="prep")})
    refused = recon(project, "apply", ".", "--auto-approve")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert (
        "error: cannot move runs/prep to runs/prepare (renamed_from): runs/prepare exists "
        "already. Move or remove what is in runs/prepare"
    ) in refused.stderr
    assert "\nsubmitted " not in refused.stdout
    assert (project.root / "runs/prep/data.txt").exists()
    (project.root / "runs/prepare").rmdir()
    assert "moved prep -> prepare" in applied(project)


def test_a_renamed_sweep_moves_member_by_member(project: GitRepo) -> None:
    sweep = (
        "kind: Run\nname: {name}\n{renamed}matrix:\n  seed: [0, 1]\n"
        "command: echo {{matrix.seed}} > {{outputs.m.path}}\noutputs:\n  m: m.txt\n---\n"
        # a run gathering every member: what it read names them, carried to the new names
        "kind: Run\nname: gather\ncommand: cat {{inputs.ms.paths}} > {{outputs.o.path}}\n"
        "inputs:\n  ms: {name}.m\noutputs:\n  o: o.txt\n"
    )
    project.commit({"specs/a.yaml": sweep.format(name="seeds", renamed="")})
    applied(project, "--wait")
    before = {job["id"] for job in local_jobs(project)}
    project.commit({"specs/a.yaml": sweep.format(name="trials", renamed="renamed_from: seeds\n")})
    planned = recon(project, "plan", ".")
    assert " -> moved     trials         2 of 2 members: seeds -> trials: records" in planned.stdout
    out = applied(project)
    assert "moved seeds[seed=0] -> trials[seed=0]" in out and "\nsubmitted " not in out, out
    assert (project.root / "runs/trials/seed=1/m.txt").read_text() == "1\n"
    assert not os.path.lexists(project.root / "runs/seeds")
    member = project.root / "runs/trials/seed=1"
    manifest = json.loads((member / ".recon-run/manifest.json").read_text())
    assert manifest["run"] == "trials[seed=1]"
    plan = recon(project, "plan", ".", "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout  # the old array's map is read where it moved
    assert {job["id"] for job in local_jobs(project)} == before


def test_a_watch_moves_a_renamed_run_once(project: GitRepo) -> None:
    project.commit({"specs/a.yaml": pipeline("prep")})
    applied(project, "--wait")
    with Watched(project.root, ".", "--interval", "1s") as watch:
        watch.until(lambda line: " pass " in line)
        project.commit({"specs/a.yaml": pipeline("prepare", renamed_from="prep")})
        watch.until(lambda line: " moved " in line and "run=prepare" in line)
        time.sleep(3)  # a few passes more
        assert watch.stop() == 0, watch.lines
    log = "".join(watch.lines)
    assert log.count(" moved ") == 1, log
    assert " submitted " not in log, log
    assert (project.root / "runs/prepare/data.txt").exists()


def test_a_pass_killed_after_the_folder_moved_is_finished_by_the_next(project: GitRepo) -> None:
    """Killed once the folder is renamed and before the journal records the move: the next
    pass finds the outputs in the new folder, records the move, and runs nothing."""
    project.commit({"specs/a.yaml": pipeline("prep")})
    applied(project, "--wait")
    before = {job["id"] for job in local_jobs(project)}
    project.commit({"specs/a.yaml": pipeline("prepare", renamed_from="prep")})
    killed = recon(
        project, "apply", ".", "--auto-approve", env={"RECON_FAULT_INJECT": "after-move"}
    )
    assert killed.returncode == -9, killed.stdout + killed.stderr
    assert (project.root / "runs/prepare/data.txt").exists()
    assert not os.path.lexists(project.root / "runs/prep")

    planned = recon(project, "plan", ".")
    assert " -> moved     prepare" in planned.stdout, planned.stdout
    assert "current (job 1 succeeded)" in planned.stdout, planned.stdout
    out = applied(project)
    assert "moved prep -> prepare" in out and "\nsubmitted " not in out, out
    assert recon(project, "plan", ".", "--detailed-exitcode").returncode == 0
    assert {job["id"] for job in local_jobs(project)} == before


def test_a_rename_reverted_without_renamed_from_runs_the_old_name_once(
    project: GitRepo,
) -> None:
    """The move is remembered for what was journalled before it: `prep` back under its
    own name (a plain revert) is a new run, submitted once and then current, its job
    never taken for `prepare`'s."""
    project.commit({"specs/a.yaml": pipeline("prep")})
    applied(project, "--wait")
    project.commit({"specs/a.yaml": pipeline("prepare", renamed_from="prep")})
    applied(project)
    project.commit({"specs/a.yaml": pipeline("prep")})
    back = applied(project, "--wait")
    assert back.count("submitted prep: job") == 1, back
    assert recon(project, "plan", ".", "--detailed-exitcode").returncode == 0
    status = recon(project, "status", ".").stdout
    assert "prep   current  succeeded" in status, status
