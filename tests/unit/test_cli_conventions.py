"""The conventions a newcomer expects of a command line: -h, --version, completion, help
with examples, `recon` alone showing the help, and exit codes that say what happened."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler import __version__
from tests.cli import recon
from tests.gitrepo import GitRepo

COMMANDS = [
    ["validate"],
    ["plan"],
    ["apply"],
    ["status"],
    ["watch"],
    ["schema"],
    ["export", "ro-crate"],
    ["cron", "install"],
    ["cron", "remove"],
]


@pytest.mark.parametrize("arguments", [[], ["export"], ["cron"], ["dev-cluster"]])
def test_a_group_alone_prints_its_help_and_exits_0(
    capsys: pytest.CaptureFixture[str], arguments: list[str]
) -> None:
    result = recon(capsys, *arguments)
    assert result.code == 0, result
    assert result.out.startswith(f"Usage: {' '.join(['recon', *arguments])} [OPTIONS] COMMAND")
    assert result.err == ""


def test_h_and_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert recon(capsys, "-h").out == recon(capsys, "--help").out
    version = recon(capsys, "--version")
    assert (version.code, version.out) == (0, f"{__version__}\n")
    assert "--show-completion" in recon(capsys, "-h").out  # shell completion, from typer


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_command_s_help_has_examples_and_names_project(
    capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    result = recon(capsys, *command, "-h")
    assert result.code == 0, result
    usage, *_ = result.out.splitlines()
    assert usage.startswith(f"Usage: recon {' '.join(command)} [OPTIONS]")
    if command != ["schema"]:
        assert "[PROJECT]" in usage
        assert "PROJECT is the folder holding recon.yaml" in " ".join(result.out.split())
    examples = result.out.split("Examples:\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert examples and all(line.strip().startswith("recon ") for line in examples)
    assert "<bool>" not in result.out and "<str>" not in result.out  # no Python types


def test_a_usage_error_names_the_command_s_help(capsys: pytest.CaptureFixture[str]) -> None:
    result = recon(capsys, "plan", "--bogus")
    assert result.code == 1
    assert result.err.startswith("error: No such option: --bogus")
    assert result.err.endswith("Try 'recon plan -h'.\n")


def test_ctrl_c_exits_130(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*_: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("reconciler.desired.loader.load_desired", interrupted)
    result = recon(capsys, "validate")
    assert result.code == 130  # 128 + SIGINT, as a shell reports it
    assert "Traceback" not in result.err


def test_watch_outside_git_does_not_offer_worktree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result = recon(capsys, "watch", str(tmp_path))
    assert result.code == 1
    assert "is not inside a git repository" in result.err
    assert "--worktree" not in result.err
    assert "--worktree" in recon(capsys, "validate", str(tmp_path)).err


def test_the_version_command_and_option_agree(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    assert recon(capsys, "version").out == recon(capsys, "--version").out
