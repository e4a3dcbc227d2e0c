"""`--scheduler` and RECON_SCHEDULER choose the backend over recon.yaml's `scheduler`."""

from __future__ import annotations

import pytest

from tests.cli import recon
from tests.gitrepo import GitRepo

SLURM_PROJECT = "project: demo\nscheduler: slurm\n"
RUN = "kind: Run\nname: hello\ncommand: echo hi\n"


@pytest.fixture
def slurm_project(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    repo.commit({"recon.yaml": SLURM_PROJECT, "specs/a.yaml": RUN})
    return str(repo.root)


@pytest.mark.parametrize("command", ["plan", "status"])
def test_the_option_overrides_recon_yaml(
    slurm_project: str, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    result = recon(capsys, command, slurm_project, "--scheduler", "local")
    assert result.code == 0, result
    assert "(scheduler: local" in result.out


def test_the_variable_overrides_recon_yaml(
    slurm_project: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECON_SCHEDULER", "local")
    result = recon(capsys, "plan", slurm_project)
    assert result.code == 0, result
    assert result.out.startswith("recon plan for project demo at commit ")
    assert "(scheduler: local)" in result.out.splitlines()[0]


def test_the_option_overrides_the_variable(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    repo.commit({"recon.yaml": "project: demo\nscheduler: local\n", "specs/a.yaml": RUN})
    monkeypatch.setenv("RECON_SCHEDULER", "slurm")
    result = recon(capsys, "plan", str(repo.root), "--scheduler", "local")
    assert "(scheduler: local)" in result.out.splitlines()[0]


def test_a_local_apply_on_a_slurm_project(
    slurm_project: str, capsys: pytest.CaptureFixture[str]
) -> None:
    result = recon(capsys, "apply", slurm_project, "--scheduler", "local", "--auto-approve")
    assert result.code == 0, result
    assert "(scheduler: local)" in result.out
    assert "Apply complete: 1 submitted" in result.out


@pytest.mark.parametrize("how", ["option", "variable"])
def test_an_unknown_scheduler_is_an_error(
    slurm_project: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    how: str,
) -> None:
    if how == "variable":
        monkeypatch.setenv("RECON_SCHEDULER", "lcal")
        result = recon(capsys, "plan", slurm_project)
    else:
        result = recon(capsys, "plan", slurm_project, "--scheduler", "lcal")
    assert result.code == 1
    assert "'lcal' is not a scheduler: use auto, slurm or local" in result.err
    if how == "variable":
        assert "RECON_SCHEDULER" in result.err
