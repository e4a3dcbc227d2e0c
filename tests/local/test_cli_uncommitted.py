"""Uncommitted edits in the project folder are never silent: validate, plan, status,
apply and watch name them, the commit they used instead, and how to read the edits."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reconciler.desired.source import uncommitted
from tests.cli import recon
from tests.gitrepo import GitRepo

PROJECT = "project: demo\nscheduler: local\n"
RUN = "kind: Run\nname: hello\ncommand: echo hi\n"


@pytest.fixture
def project(repo: GitRepo) -> GitRepo:
    repo.commit({"recon.yaml": PROJECT, "specs/a.yaml": RUN})
    return repo


def test_the_changed_files_of_the_project_folder(project: GitRepo) -> None:
    root = project.root
    assert uncommitted(root) == []
    (root / "specs" / "a.yaml").write_text(RUN + "retries: 1\n")
    (root / "scripts").mkdir()
    (root / "scripts" / "new.sh").write_text("echo\n")
    (root / "runs" / "hello").mkdir(parents=True)
    (root / "runs" / "hello" / "out.txt").write_text("output\n")
    (root / ".recon").mkdir()
    (root / ".recon" / "journal").write_text("state\n")
    assert sorted(uncommitted(root, (".recon", "runs"))) == ["scripts", "specs/a.yaml"]
    assert uncommitted(root / "specs") == ["a.yaml"]


@pytest.mark.parametrize(
    ("command", "says"),
    [
        ("validate", "were not checked: validate read commit {}; --worktree checks the edits"),
        ("plan", "are not in this plan, made from commit {}; --worktree plans the edits"),
        ("status", "are not in this status, of commit {}; --worktree reads the edits"),
    ],
)
def test_a_command_on_head_names_the_edits_it_did_not_read(
    project: GitRepo, capsys: pytest.CaptureFixture[str], command: str, says: str
) -> None:
    root = str(project.root)
    assert recon(capsys, command, root).err == ""
    (project.root / "specs" / "a.yaml").write_text(RUN + "retries: 1\n")
    head = project.git("rev-parse", "HEAD")[:12]
    result = recon(capsys, command, root)
    assert result.code == 0, result
    assert result.err == f"note: uncommitted changes (specs/a.yaml) {says.format(head)}\n"
    assert recon(capsys, command, root, "--worktree").err == ""
    assert recon(capsys, command, root, "--rev", "HEAD").err == ""


def test_apply_names_the_edits_it_did_not_apply(
    project: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    for index in range(5):
        (project.root / f"notes-{index}.txt").write_text("draft\n")
    result = recon(capsys, "apply", str(project.root), "--auto-approve")
    assert result.code == 0, result
    head = project.git("rev-parse", "HEAD")[:12]
    assert (
        "note: uncommitted changes (notes-0.txt, notes-1.txt, notes-2.txt and 2 more) are not "
        f"applied: recon applied commit {head}; commit them, or use --worktree to apply the edits"
    ) in result.err


def test_watch_names_the_edits_it_does_not_deploy(project: GitRepo) -> None:
    (project.root / "specs" / "a.yaml").write_text(RUN + "retries: 1\n")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    env.pop("RECON_SCHEDULER", None)
    watch = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "watch", ".", "--interval", "1h"],
        cwd=project.root,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        lines = []
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            line = watch.stdout.readline()
            lines.append(line)
            if "uncommitted" in line or not line:
                break
        assert "uncommitted" in lines[-1], lines
        assert "(specs/a.yaml) are not deployed: watch deploys commits (now " in lines[-1]
        watch.send_signal(signal.SIGINT)
        watch.wait(timeout=60)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 0, watch.stderr.read() if watch.stderr else ""  # as documented


def test_a_runs_bookkeeping_folder_is_no_edit_wherever_the_run_works(
    project: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """A run whose workdir is the project folder keeps .recon-run/ at its top; one whose
    workdir is a folder of the repository's, in that folder."""
    project.commit({"elsewhere/deep/README": "a run works here\n"})
    for folder in (project.root, project.root / "elsewhere" / "deep"):
        (folder / ".recon-run").mkdir()
        (folder / ".recon-run" / "manifest.json").write_text("{}\n")
    assert recon(capsys, "plan", str(project.root)).err == ""
    (project.root / "elsewhere" / "notes.txt").write_text("mine\n")
    head = project.git("rev-parse", "HEAD")[:12]
    assert recon(capsys, "plan", str(project.root)).err == (
        f"note: uncommitted changes (elsewhere/notes.txt) are not in this plan, made from commit "
        f"{head}; --worktree plans the edits\n"
    )
