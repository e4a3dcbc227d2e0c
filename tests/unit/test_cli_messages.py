"""A newcomer's usual mistakes get a message that names the mistake and the fix."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.cli import Result, recon
from tests.gitrepo import GitRepo

RUN = "kind: Run\nname: hello\ncommand: echo hi\n"


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def error(result: Result) -> str:
    assert result.code == 1, result
    assert result.err.startswith("error: "), result
    return result.err


def test_a_folder_that_does_not_exist(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    message = error(recon(capsys, "validate", str(repo.root / "nosuchdir")))
    assert "nosuchdir does not exist: give the project folder" in message


def test_recon_yaml_given_as_the_project(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.commit()
    with inside(repo.root):
        message = error(recon(capsys, "validate", "recon.yaml"))
    assert (
        "recon.yaml is a file: give the project folder (the one holding recon.yaml), here `.`"
        in (message)
    )


def test_run_from_a_folder_inside_the_project(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit({"specs/a.yaml": RUN})
    with inside(repo.root / "specs"):
        message = error(recon(capsys, "validate"))
    assert f"which is inside the project {repo.root}: run recon from the project folder" in message


def test_an_uncommitted_recon_yaml(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    (repo.root / "recon.yaml").rename(repo.root / "later")
    repo.commit({"specs/a.yaml": RUN})
    (repo.root / "later").rename(repo.root / "recon.yaml")
    message = error(recon(capsys, "validate", str(repo.root)))
    assert "recon.yaml: not committed" in message
    assert "commit it (`git add recon.yaml && git commit`), or use --worktree" in message
    assert recon(capsys, "validate", str(repo.root), "--worktree").code == 0


def test_a_repository_with_no_commits(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    message = error(recon(capsys, "validate", str(repo.root)))
    assert "has no commits yet" in message and "or use --worktree" in message


def test_a_folder_outside_git(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "recon.yaml").write_text("project: demo\n")
    message = error(recon(capsys, "validate", str(tmp_path)))
    assert "is not inside a git repository" in message


@pytest.mark.parametrize(
    ("arguments", "option"),
    [(["validate", "--rev", ""], "--rev"), (["plan", "--against", ""], "--against")],
)
def test_an_empty_revision_is_an_error_not_head(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], arguments: list[str], option: str
) -> None:
    repo.commit({"specs/a.yaml": RUN})
    with inside(repo.root):
        message = error(recon(capsys, *arguments))
    assert f"{option} is empty (an unset CI variable?): name a commit, branch or tag" in message


def test_a_glob_that_matches_nothing_warns(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    repo.commit({"spec/a.yaml": RUN})  # specs/ is what recon.yaml's default globs
    result = recon(capsys, "validate", str(repo.root))
    assert result.code == 0
    assert result.out.startswith("OK: project demo, 0 runs, 0 allocations at ")
    assert result.err.startswith("warning: no runs: the specs patterns of recon.yaml (")
    assert "match no file at commit" in result.err


def test_a_written_pattern_that_matches_nothing_fails_validate_plan_and_apply(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """A typo in recon.yaml's `specs:` would drop every run it held: with prune on, apply
    would then cancel their jobs. Each pattern written there must match a file."""
    project = "project: demo\nspecs:\n  - specs/*.yaml\n  - spec/**/*.yaml\n"
    repo.commit({"recon.yaml": project, "specs/a.yaml": RUN})
    for command in (["validate"], ["plan", "--scheduler", "local"],
                    ["apply", "--auto-approve", "--scheduler", "local"]):  # fmt: skip
        message = error(recon(capsys, *command, str(repo.root)))
        assert "1 problem in the specs" in message, message
        assert "recon.yaml:4: specs: the pattern 'spec/**/*.yaml' matches no file at commit" in (
            message
        )
    assert not (repo.root / ".recon" / "journal.sqlite").exists()  # apply did nothing
    repo.commit({"recon.yaml": "project: demo\nspecs: [spec/*.yaml]\n"})
    message = error(recon(capsys, "validate", str(repo.root)))
    assert "recon.yaml:2: specs: the pattern 'spec/*.yaml' matches no file" in message


def test_an_empty_spec_file_warns(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.commit({"specs/a.yaml": "# nothing yet\n"})
    result = recon(capsys, "plan", str(repo.root), "--scheduler", "local")
    assert result.code == 0, result
    assert "warning: no runs: specs/a.yaml matches the specs patterns" in result.err


def test_one_run_is_one_run(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.commit({"specs/a.yaml": RUN})
    result = recon(capsys, "validate", str(repo.root))
    assert result.out.startswith("OK: project demo, 1 run, 0 allocations at "), result
    assert result.err == ""
