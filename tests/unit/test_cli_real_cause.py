"""Errors that point at the real cause (issue 28, point 3 and 6): the whole message a
newcomer's mistake gets, compared."""

from __future__ import annotations

import errno
import io
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from reconciler.state.journal import Journal
from tests.cli import recon
from tests.docs import ROOT
from tests.gitrepo import GitRepo
from tests.unit.test_cli_messages import inside
from tests.unit.test_report_plan import EVERY_KIND

RUN = "kind: Run\nname: hello\ncommand: echo hi > {outputs.o.path}\noutputs:\n  o: o.txt\n"
NO_FOLDER = (
    "error: the folder {} does not exist: give the project folder (the one holding "
    "recon.yaml), or nothing for the current folder\n"
)


@pytest.mark.parametrize(
    "arguments",
    [("status", "../prjo"), ("plan", "/no/such/dir"), ("apply", "./typo", "--auto-approve")],
)
def test_a_path_mistaken_for_a_run_says_the_folder_does_not_exist(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], arguments: tuple[str, ...]
) -> None:
    repo.commit({"specs/a.yaml": RUN})
    with inside(repo.root):
        result = recon(capsys, *arguments)
    assert (result.code, result.out) == (1, "")
    assert result.err == NO_FOLDER.format(arguments[1].removeprefix("./"))


def test_a_word_outside_any_project_is_taken_for_a_folder(
    tmp_path_factory: pytest.TempPathFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    with inside(tmp_path_factory.mktemp("nowhere")):
        result = recon(capsys, "status", "prjo")
    assert (result.code, result.err) == (1, NO_FOLDER.format("prjo"))


def test_a_run_name_in_a_project_is_still_a_run(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit({"specs/a.yaml": RUN})
    with inside(repo.root):
        result = recon(capsys, "plan", "nosuch")
    assert result.err == "error: no run named nosuch in this project (runs: hello)\n"


def test_a_bare_memory_suggests_what_slurm_means_by_it(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit(
        {
            "specs/a.yaml": RUN
            + "resources:\n  memory: 2048\n---\n"
            + RUN.replace("hello", "small")
            + "resources:\n  memory: 32\n"
        }
    )
    result = recon(capsys, "validate", str(repo.root))
    assert result.err == (
        "error: 2 problems in the specs\n"
        "  specs/a.yaml:7: resources.memory: memory needs a unit: 2048MiB, which is 2GiB, if "
        "you meant Slurm's --mem=2048 (a bare number there is MiB); got the bare number 2048\n"
        "  specs/a.yaml:15: resources.memory: memory needs a unit, like 32GB or 32GiB (got "
        "the bare number 32)\n"
    )


def test_array_in_sbatch_extra_points_to_matrix(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit({"specs/a.yaml": RUN + "resources:\n  sbatch_extra: [--array=0-5]\n"})
    result = recon(capsys, "validate", str(repo.root))
    assert result.err == (
        "error: 1 problem in the specs\n"
        "  specs/a.yaml:7: resources.sbatch_extra.0: --array is set by recon itself; a run "
        "with a `matrix:` is a sweep, submitted as one job array: write the values there "
        "(docs/specs.md, sweeps)\n"
    )


def test_validate_reports_an_invalid_document_once(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    reader = "kind: Run\nname: reader\ncommand: cat {inputs.i.path}\ninputs:\n  i: hello.o\n"
    bad = RUN.replace("echo hi", "echo 'hi {run.name}'")
    repo.commit({"specs/a.yaml": bad, "specs/b.yaml": reader})
    result = recon(capsys, "validate", str(repo.root))
    assert result.err == (
        "error: 1 problem in the specs\n"
        "  specs/a.yaml:3: command: {run.name} is inside quotes: recon fills it in "
        "shell-quoted already, so the quotes would become part of a path with a space or a "
        'bracket; write it bare (--out {run.name}, not --out "{run.name}"), or "$RECON_RUN" '
        "inside quotes\n"
    )


LOCAL = "project: demo\nscheduler: local\ndefaults:\n  environment: {}\n"


def _read_only_state(monkeypatch: pytest.MonkeyPatch, state: Path) -> None:
    """Every file the state directory would open for writing refuses, as a read-only
    mount does (as root, permissions alone refuse nothing)."""
    real_open = os.open

    def refusing(path: str | os.PathLike[str], flags: int, *args: int) -> int:
        writing = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
        if writing and Path(path).resolve().is_relative_to(state.resolve()):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), os.fspath(path))
        return real_open(path, flags, *args)

    monkeypatch.setattr(os, "open", refusing)


def test_a_read_only_state_directory_plan_and_status_read_apply_names_the_file(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    repo.commit({"recon.yaml": LOCAL, "specs/a.yaml": RUN})
    with inside(repo.root):
        assert recon(capsys, "plan").code == 0  # the state directory made
        Journal(repo.root / ".recon" / "journal.sqlite").close()  # as an apply leaves it
        _read_only_state(monkeypatch, repo.root / ".recon")
        planned, status = recon(capsys, "plan"), recon(capsys, "status")
        applied = recon(capsys, "apply", "--auto-approve")
    assert (planned.code, planned.err) == (0, ""), planned
    assert "  + submit    hello          not yet run\n" in planned.out
    assert (status.code, status.err) == (0, ""), status
    state = repo.root / ".recon"
    assert (applied.code, applied.out) == (1, "")
    assert applied.err == (
        f"error: cannot write {state}/lock (Read-only file system): apply writes its lock, "
        f"journal and snapshots in the state directory {state}; make it writable, or set "
        "state_dir in recon.yaml to a folder you can write (plan and status only read it)\n"
    )


def _interrupted_apply(
    monkeypatch: pytest.MonkeyPatch, submitted: tuple[str, ...], *, ask: bool = False
) -> None:
    """reconcile_once as an apply that Ctrl-C stops after these submissions (or, with
    `ask`, at its prompt)."""
    from reconciler.engine import reconcile
    from reconciler.engine.apply.applier import Done

    def interrupted(*_: object, approve: Any, on_done: Any, **__: object) -> None:
        if ask:
            approve(EVERY_KIND)
        for line in submitted:
            run = line.removeprefix("submitted ").rpartition(": job ")[0]
            on_done(Done(line, submitted=run))
        raise KeyboardInterrupt

    monkeypatch.setattr(reconcile, "reconcile_once", interrupted)


def test_ctrl_c_during_submission_says_what_was_submitted(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.commit({"recon.yaml": LOCAL, "specs/a.yaml": RUN})
    _interrupted_apply(monkeypatch, ("submitted prepare: job 7", "submitted seeds[i=1]: job 8_0"))
    with inside(repo.root):
        result = recon(capsys, "apply", "--auto-approve")
    assert result.code == 130
    assert result.out == "submitted prepare: job 7\nsubmitted seeds[i=1]: job 8_0\n"
    assert result.err == (
        "interrupted (Ctrl-C) after 2 submissions: prepare: job 7; seeds[i=1]: job 8_0. "
        "What was submitted stays submitted; the next apply adopts it, and does the rest\n"
    )


def test_ctrl_c_at_the_prompt_exits_130_as_documented(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import typer

    def confirm(*_: object, **__: object) -> bool:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise typer.Abort() from None  # as click's prompt does

    repo.commit({"recon.yaml": LOCAL, "specs/a.yaml": RUN})
    _interrupted_apply(monkeypatch, (), ask=True)
    monkeypatch.setattr(typer, "confirm", confirm)
    monkeypatch.setattr(sys, "stdin", io.StringIO())
    monkeypatch.setattr(sys.stdin, "isatty", lambda: True)
    with inside(repo.root):
        monkeypatch.setattr(sys.stdout, "isatty", lambda: True)
        result = recon(capsys, "apply")
    assert result.code == 130
    assert result.err == "interrupted (Ctrl-C): nothing was submitted or cancelled\n"
    documented = (ROOT / "docs" / "exit-codes.md").read_text()
    assert "\n| 130 | Ctrl-C at the prompt (nothing was done)" in documented


def test_an_external_input_that_is_not_there_is_noted_in_the_plan(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    monkeypatch.setenv("COLUMNS", "80")
    reads = (
        "kind: Run\nname: ext\ncommand: cat {inputs.raw.path} {inputs.ok.path}\ninputs:\n"
        "  raw: {path: data/raw.csv}\n  ok: {path: recon.yaml}\n"
    )
    commit = repo.commit({"recon.yaml": LOCAL, "specs/a.yaml": reads})[:12]
    with inside(repo.root):
        result = recon(capsys, "plan")
    assert (result.code, result.err) == (0, "")
    assert result.out == (
        f"recon plan for project demo at commit {commit} (scheduler: local)\n"
        "Input raw of ext (data/raw.csv) does not exist: the job fails when it reads it,\n"
        "  unless something makes it before the job starts.\n"
        "\n"
        "  + submit    ext            not yet run\n"
        "\n"
        "Plan: 1 to submit, 0 to replace, 0 to cancel.\n"
    )


def test_status_of_a_sweep_lists_its_members_by_value_not_its_upstreams(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    sweep = (
        "kind: Run\nname: lg\nmatrix:\n  i: [10, 2, 1]\ncommand: cat {inputs.d.path}\n"
        "inputs:\n  d: hello.o\n"
    )
    commit = repo.commit({"recon.yaml": LOCAL, "specs/a.yaml": RUN, "specs/lg.yaml": sweep})
    with inside(repo.root):
        result = recon(capsys, "status", "lg")
    assert (result.code, result.err) == (0, "")
    assert result.out == (
        f"demo at {commit[:12]} (scheduler: local)\n"
        "\n"
        "RUN       SYNC       HEALTH  JOB  NEXT\n"
        "lg[i=1]   never run  -       -    submit: not yet run\n"
        "lg[i=2]   never run  -       -    submit: not yet run\n"
        "lg[i=10]  never run  -       -    submit: not yet run\n"
        "\n"
        "3 runs: 3 never run.\n"
    )


def test_the_default_ro_crate_folder_is_no_uncommitted_change(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    repo.commit({"recon.yaml": LOCAL, "specs/a.yaml": RUN})
    with inside(repo.root):
        exported = recon(capsys, "export", "ro-crate")
        planned = recon(capsys, "plan")
    assert exported.out == (
        "Wrote ro-crate/ro-crate-metadata.json: 0 runs (1 without a manifest yet: never "
        "succeeded)\n"
    )
    assert (planned.code, planned.err) == (0, "")  # no `note: uncommitted changes (ro-crate/...)`


def test_ctrl_c_while_waiting_says_the_jobs_go_on(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from types import SimpleNamespace

    from reconciler.commands import apply
    from reconciler.engine import reconcile

    def waited(*_: object) -> int:
        raise KeyboardInterrupt

    nothing = EVERY_KIND.model_copy(update={"actions": (), "notes": ()})
    passed = SimpleNamespace(
        desired=SimpleNamespace(warnings=(), commit=None), plan=nothing, held=None, applied=None
    )
    monkeypatch.setattr(reconcile, "reconcile_once", lambda *_, **__: passed)
    monkeypatch.setattr(apply, "_wait", waited)
    repo.commit({"recon.yaml": LOCAL, "specs/a.yaml": RUN})
    with inside(repo.root):
        result = recon(capsys, "apply", "--auto-approve", "--wait")
    assert result.code == 130
    assert result.err == (
        "interrupted (Ctrl-C): the jobs go on; `recon status` shows them, and "
        "`recon apply --wait` follows them again\n"
    )
