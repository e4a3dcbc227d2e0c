"""A path the user gets wrong is an error message, never a traceback.

`--out` of `schema`, `export ro-crate` and `plan`, the project folder, and the folders
recon.yaml names (`state_dir`, `runs_dir`): each mistake exits 1 with `error: ...` naming
the path and what to change. The project here uses the local backend; nothing is submitted
(every case fails before a job would be)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.cli import Result, recon
from tests.gitrepo import GitRepo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"


def make_example(root: Path, **settings_: str) -> Path:
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    text = (root / "recon.yaml").read_text()  # scheduler: local, as the example says
    for key, value in settings_.items():
        text = "\n".join(
            f"{key}: {value}" if line.startswith(f"{key}:") else line for line in text.splitlines()
        )
    (root / "recon.yaml").write_text(text + "\n")
    (root / "a-file").write_text("not a folder\n")
    GitRepo(root).commit(message="example")
    return root


@contextmanager
def inside(folder: Path) -> Iterator[None]:
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)


def refused(result: Result, *words: str) -> None:
    assert result.code == 1, result
    assert result.err.startswith("error: "), result
    assert "Traceback" not in result.err + result.out
    for word in words:
        assert word in result.err, result


@pytest.fixture
def example(tmp_path: Path) -> Iterator[Path]:
    root = make_example(tmp_path / "cartpole")
    with inside(root):
        yield root


@pytest.mark.parametrize("command", [["schema"], ["export", "ro-crate"]])
@pytest.mark.parametrize(
    ("out", "why"),
    [
        ("/proc/nope", "No such file or directory"),
        ("a-file", "is a file"),
        ("a-file/below", "is a file"),
    ],
)
def test_out_that_cannot_be_a_folder(
    example: Path, capsys: pytest.CaptureFixture[str], command: list[str], out: str, why: str
) -> None:
    result = recon(capsys, *command, "--out", out)
    refused(result, f"cannot create the folder {out}", why, "--out names a folder")


def test_plan_out_into_a_missing_folder(example: Path, capsys: pytest.CaptureFixture[str]) -> None:
    refused(recon(capsys, "plan", "--out", "/proc/nope/x.plan"), "/proc/nope/x.plan")


def test_state_dir_that_cannot_be_made(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_example(tmp_path / "cartpole", state_dir="a-file/state")
    with inside(root):
        result = recon(capsys, "apply", "--auto-approve")
    refused(result, "a-file/state", "state_dir in recon.yaml")


def test_runs_dir_that_is_a_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = make_example(tmp_path / "cartpole", runs_dir="a-file")
    with inside(root):
        result = recon(capsys, "apply", "--auto-approve")
    assert result.code == 1, result
    assert "Traceback" not in result.err + result.out
    assert "refused prepare: cannot create the folder" in result.err
    assert "runs_dir in recon.yaml" in result.err
    assert "Apply complete: 0 submitted" in result.out


PATH_PARTS = st.sampled_from(
    ["a-file", "missing", "specs", "recon.yaml", "..", ".", "", "/proc", "/proc/nope", "x y", "é"]
)
# Paths stay in the test's folders: an absolute one only under /proc (which refuses every
# write), and at most one ".." (the example's own parent, a folder of the test's).
PATHS = (
    st.lists(PATH_PARTS, min_size=1, max_size=3)
    .map(lambda parts: "/".join(parts))
    # normpath: "/proc/../recon.yaml" is /recon.yaml (it wrote a saved plan there, and
    # the schemas into /, which then made / look like a project to other tests)
    .filter(lambda path: not path.startswith("/") or os.path.normpath(path).startswith("/proc"))
    .filter(lambda path: path.split("/").count("..") <= 1)
)
COMMANDS = st.sampled_from(
    [
        ["schema", "--out", "{}"],
        ["export", "ro-crate", "--out", "{}"],
        ["plan", "--out", "{}"],
        ["validate", "{}"],
        ["status", "{}"],
        ["plan", "{}"],
        ["export", "ro-crate", "{}"],
    ]
)


@pytest.fixture(scope="module")
def shared_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_example(tmp_path_factory.mktemp("paths") / "cartpole")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(command=COMMANDS, path=PATHS)
def test_any_path_is_a_result_or_an_error_message(
    shared_example: Path, capsys: pytest.CaptureFixture[str], command: list[str], path: str
) -> None:
    arguments = [path if part == "{}" else part for part in command]
    with inside(shared_example):
        result = recon(capsys, *arguments)  # a traceback fails the test here
    assert result.code in (0, 1), result
    if result.code == 1:  # notes (uncommitted files) may come first
        assert any(line.startswith("error: ") for line in result.err.splitlines()), result
