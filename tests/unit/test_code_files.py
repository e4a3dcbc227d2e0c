"""A run's code: the committed files its command names and its `code:` globs, with
their git blob ids, found by the loader; bad `code:` fields are told with file and line."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.desired.loader import load_desired, open_source
from reconciler.desired.source import blob_id, committed_blobs
from reconciler.desired.summary import command_words
from reconciler.errors import SpecError, SpecIssue
from tests.gitrepo import GitRepo

TRAIN = """\
kind: Run
name: train
command: >-
  python3 scripts/train.py --config=conf/model.yaml ./run.sh
  --data {inputs.data.path} --out {outputs.model.path} /usr/bin/env ../outside.py
inputs:
  data: {path: /scratch/data}
outputs:
  model: model.pt
"""

FILES = {
    "recon.yaml": "project: demo\n",
    "scripts/train.py": "print('train')\n",
    "conf/model.yaml": "layers: 2\n",
    "run.sh": "echo hi\n",
    "src/pkg/a.py": "A = 1\n",
    "src/pkg/b.py": "B = 1\n",
    "pyproject.toml": "[project]\n",
}


def code_of(repo: GitRepo, name: str = "train") -> dict[str, str]:
    return dict(load_desired(open_source(repo.root)).runs[name].code)


def test_the_files_a_command_names_are_its_code(repo: GitRepo) -> None:
    repo.commit({**FILES, "specs/train.yaml": TRAIN})
    assert code_of(repo) == {
        path: blob_id(FILES[path].encode())
        for path in ("conf/model.yaml", "run.sh", "scripts/train.py")
    }


def test_code_globs_add_files_and_none_turns_detection_off(repo: GitRepo) -> None:
    more = TRAIN + "code: [src/**/*.py, pyproject.toml]\n"
    repo.commit({**FILES, "specs/train.yaml": more})
    assert sorted(code_of(repo)) == [
        "conf/model.yaml",
        "pyproject.toml",
        "run.sh",
        "scripts/train.py",
        "src/pkg/a.py",
        "src/pkg/b.py",
    ]
    repo.commit({"specs/train.yaml": TRAIN + "code: none\n"})
    assert code_of(repo) == {}


def test_code_is_not_part_of_the_spec_hash(repo: GitRepo) -> None:
    repo.commit({**FILES, "specs/train.yaml": TRAIN})
    before = load_desired(open_source(repo.root)).runs["train"].spec_hash
    repo.commit(
        {"scripts/train.py": "print('changed')\n", "specs/train.yaml": TRAIN + "code: [src/**]\n"}
    )
    after = load_desired(open_source(repo.root)).runs["train"]
    assert after.spec_hash == before  # jobs of today's recon keep their identity
    assert after.code["scripts/train.py"] == blob_id(b"print('changed')\n")


def test_a_linked_script_counts_by_the_file_it_leads_to(repo: GitRepo) -> None:
    repo.commit({**FILES, "specs/train.yaml": TRAIN.replace("scripts/train.py", "train.py")})
    (repo.root / "train.py").symlink_to("scripts/train.py")
    repo.commit()
    assert code_of(repo)["train.py"] == blob_id(FILES["scripts/train.py"].encode())


def test_command_words() -> None:
    assert command_words("python3 ./a/b.py --x=c.yaml {run.dir}/x 'q r.py' | tee /o ../up") == (
        "python3",
        "a/b.py",
        "c.yaml",
        "run.dir",
        "q",
        "r.py",
        "tee",
    )
    assert command_words(None) == ()


def test_committed_blobs_of_a_project_in_a_subfolder(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    commit = repo.commit({"lab/recon.yaml": "project: demo\n", "lab/s.py": "x\n", "top.txt": ""})
    assert committed_blobs(repo.root / "lab", commit) == {
        "recon.yaml": blob_id(b"project: demo\n"),
        "s.py": blob_id(b"x\n"),
    }
    assert committed_blobs(repo.root / "lab", "0" * 40) is None


def problems(repo: GitRepo, spec: str) -> list[SpecIssue]:
    repo.commit({**FILES, "specs/train.yaml": spec})
    with pytest.raises(SpecError) as caught:
        load_desired(open_source(repo.root))
    return caught.value.issues


@pytest.mark.parametrize(
    ("field", "message"),
    [
        ("code: src/*.py", "takes a list of globs over the project's committed files"),
        ("code: [/etc/passwd]", "is not a glob inside the project"),
        ("code: ['../x/*.py']", "is not a glob inside the project"),
        ("code: [srcs/**/*.py]", "'srcs/**/*.py' matches no file at this commit"),
        ("code: [1]", "expected text for each glob, got 1"),
    ],
)
def test_bad_code_fields_name_file_line_and_field(repo: GitRepo, field: str, message: str) -> None:
    (issue,) = problems(repo, TRAIN + field + "\n")
    assert (issue.file, issue.line, issue.field.split(".")[0]) == ("specs/train.yaml", 10, "code")
    assert message in issue.message, issue.message
