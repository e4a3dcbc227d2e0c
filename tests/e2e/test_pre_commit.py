"""The pre-commit hook this repository offers (.pre-commit-hooks.yaml), run by the real
pre-commit from a repository that uses it by path: a commit with a bad spec is refused
with the problem as FILE:LINE, a good one goes through, and a commit touching no
project does not validate any.

pre-commit installs the hook from this repository's HEAD into an environment of its own
(pip, from the package registry), as it would from the hosted repository.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "repo"
BAD_SPEC = "kind: Run\nname: bad\ncommand: echo hi\nresources:\n  memory: 32G\n"


@pytest.fixture(scope="module")
def environment(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What the commits run with: pre-commit's cache in a folder of the test's, the
    hook's Python from this repository, not this checkout on PYTHONPATH."""
    return {
        **{name: value for name, value in os.environ.items() if name != "PYTHONPATH"},
        "PRE_COMMIT_HOME": str(tmp_path_factory.mktemp("pre-commit-home")),
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@example.invalid",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@example.invalid",
    }


def hooked_repository(root: Path, environment: dict[str, str]) -> GitRepo:
    """A repository holding the example project in `cartpole/`, with recon-validate
    installed as its pre-commit hook from this repository's HEAD."""
    repo = GitRepo(root)
    shutil.copytree(EXAMPLE, root / "cartpole", ignore=shutil.ignore_patterns(".recon", "runs"))
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.strip()
    repo.write(
        {
            ".pre-commit-config.yaml": (
                f"repos:\n  - repo: {ROOT}\n    rev: {head}\n"
                "    hooks:\n      - id: recon-validate\n"
            ),
            "README.md": "notes\n",
        }
    )
    subprocess.run(
        [sys.executable, "-m", "pre_commit", "install"],
        cwd=root, env=environment, check=True, capture_output=True,
    )  # fmt: skip
    return repo


def commit(
    repo: GitRepo, environment: dict[str, str], message: str, *options: str
) -> subprocess.CompletedProcess[str]:
    """`git commit` of every change; what the hook printed (git sends it to stderr) as
    the result's stdout."""
    subprocess.run(["git", "add", "-A"], cwd=repo.root, check=True)
    return subprocess.run(
        ["git", "commit", "-q", "-m", message, *options],
        cwd=repo.root, env=environment, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, timeout=900,
    )  # fmt: skip


def test_a_bad_spec_blocks_the_commit_and_a_good_one_passes(
    tmp_path: Path, environment: dict[str, str]
) -> None:
    repo = hooked_repository(tmp_path / "repo", environment)
    first = commit(repo, environment, "the example project")
    assert first.returncode == 0, first.stdout
    assert "recon validate" in first.stdout and "Passed" in first.stdout
    head = repo.git("rev-parse", "HEAD")

    repo.write({"cartpole/specs/bad.yaml": BAD_SPEC})
    refused = commit(repo, environment, "a bad spec")
    assert refused.returncode == 1, refused.stdout
    assert "Failed" in refused.stdout
    assert (
        "cartpole/specs/bad.yaml:5: resources.memory: memory must look like 32GB" in refused.stdout
    ), refused.stdout
    assert repo.git("rev-parse", "HEAD") == head

    repo.write({"cartpole/specs/bad.yaml": BAD_SPEC.replace("32G\n", "32GiB\n")})
    fixed = commit(repo, environment, "the spec fixed")
    assert fixed.returncode == 0, fixed.stdout
    assert repo.git("rev-parse", "HEAD") != head


def test_a_commit_validates_only_the_projects_it_touches(
    tmp_path: Path, environment: dict[str, str]
) -> None:
    """The project is broken at HEAD (committed with --no-verify): a commit of notes
    outside it passes, a commit of one of its scripts is refused."""
    repo = hooked_repository(tmp_path / "repo", environment)
    repo.write({"cartpole/specs/bad.yaml": BAD_SPEC})
    forced = commit(repo, environment, "a bad spec, unchecked", "--no-verify")
    assert forced.returncode == 0, forced.stdout
    repo.write({"README.md": "more notes\n"})
    passed = commit(repo, environment, "notes only")
    assert passed.returncode == 0, passed.stdout
    assert "recon validate" in passed.stdout and "(no files to check)Skipped" not in passed.stdout
    repo.write({"cartpole/scripts/train.py": "print('changed')\n"})
    refused = commit(repo, environment, "a script of the project")
    assert refused.returncode == 1, refused.stdout
    assert "cartpole/specs/bad.yaml:5: resources.memory" in refused.stdout
