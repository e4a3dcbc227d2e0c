"""`recon plan --against`: the spec diff a PR shows, on a real temporary git repo."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.cli import recon
from tests.gitrepo import GitRepo

RUN = """\
kind: Run
name: train
command: python train.py
resources:
  gpus: A100:2
"""


def test_add_change_then_comment_only(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(repo.root)
    empty = repo.commit(message="empty")
    added = repo.commit({"specs/train.yaml": RUN}, "add a run")
    changed = repo.commit({"specs/train.yaml": RUN.replace("A100:2", "A100:4")}, "more gpus")
    repo.commit({"specs/train.yaml": "# a comment\n" + RUN.replace("A100:2", "A100:4")}, "comment")

    first = recon(capsys, "plan", root, "--against", empty, "--rev", added, "--detailed-exitcode")
    assert first.code == 2, first.err
    assert "+ run train" in first.out
    assert "Plan: 1 to add, 0 to change, 0 to remove." in first.out

    second = recon(
        capsys, "plan", root, "--against", added, "--rev", changed, "--detailed-exitcode"
    )
    assert second.code == 2, second.err
    assert "~ run train" in second.out
    assert 'resources.gpus: "A100:2" -> "A100:4"' in second.out

    third = recon(capsys, "plan", root, "--against", changed, "--detailed-exitcode")
    assert third.code == 0, third.err
    assert "No changes" in third.out


def test_removed_run_and_formats(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    root = str(repo.root)
    base = repo.commit({"specs/train.yaml": RUN, "specs/prep.yaml": RUN.replace("train", "prep")})
    repo.remove("specs/prep.yaml")
    repo.commit({"specs/train.yaml": RUN.replace("python train.py", "python train.py --fast")})

    as_json = recon(capsys, "plan", root, "--against", base, "--format", "json")
    assert as_json.code == 0
    document = json.loads(as_json.out)
    assert document["summary"] == {"add": 0, "change": 1, "remove": 1, "move": 0}
    changes = {c["name"]: c for c in document["changes"]}
    assert changes["prep"]["action"] == "remove"
    assert changes["train"]["fields"] == [
        {"field": "command", "old": "python train.py", "new": "python train.py --fast"}
    ]

    markdown = recon(capsys, "plan", root, "--against", base, "--format", "markdown")
    assert "| `-` | Run | `prep` |" in markdown.out
    assert "**Plan: 0 to add, 1 to change, 1 to remove.**" in markdown.out


def test_description_and_key_order_are_no_change(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo.commit({"specs/train.yaml": RUN})
    repo.commit(
        {
            "specs/train.yaml": "resources: {gpus: 'A100:2'}\ncommand: python train.py\n"
            "name: train\nkind: Run\ndescription: now described\n"
        }
    )
    result = recon(capsys, "plan", str(repo.root), "--against", base, "--detailed-exitcode")
    assert result.code == 0 and "No changes" in result.out


def test_bad_specs_exit_1_with_file_and_line(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    base = repo.commit({"specs/train.yaml": RUN})
    repo.commit({"specs/train.yaml": RUN + "  cpus: many\n"})
    result = recon(capsys, "plan", str(repo.root), "--against", base, "--detailed-exitcode")
    assert result.code == 1
    assert "specs/train.yaml:6: resources.cpus:" in result.err
    assert "Traceback" not in result.err


def test_a_base_with_project_wide_problems_fails_every_time(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """The base passes the same checks as the head, warm cache or not: an input naming a
    run that the base lacks fails the diff (the PR that adds the run included)."""
    reader = "kind: Run\nname: b\ncommand: x\ninputs:\n  i: a.out\n"
    base = repo.commit({"specs/b.yaml": reader})
    repo.commit({"specs/a.yaml": "kind: Run\nname: a\ncommand: x\noutputs:\n  out: o\n"})
    for _ in range(2):
        result = recon(capsys, "plan", str(repo.root), "--against", base)
        assert result.code == 1
        assert "specs/b.yaml:5: inputs.i: 'a.out' names no run 'a'" in result.err


def test_unknown_base_revision(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.commit({"specs/train.yaml": RUN})
    result = recon(capsys, "plan", str(repo.root), "--against", "origin/main")
    assert result.code == 1 and "revision 'origin/main' not found" in result.err


def test_validate_lists_everything(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    repo.commit(
        {
            "specs/a.yaml": "kind: Run\nname: a\ncommand: x\nbogus: 1\n",
            "specs/b.yaml": "kind: Run\n",
        }
    )
    result = recon(capsys, "validate", str(repo.root))
    assert result.code == 1
    assert "specs/a.yaml:4: bogus: unknown field" in result.err
    assert "specs/b.yaml:1: name: required field is missing" in result.err

    repo.commit({"specs/a.yaml": "kind: Run\nname: a\ncommand: x\n", "specs/b.yaml": ""})
    assert recon(capsys, "validate", str(repo.root)).code == 0


def test_usage_errors_exit_1_not_2(repo: GitRepo, capsys: pytest.CaptureFixture[str]) -> None:
    assert recon(capsys, "plan", "--no-such-flag").code == 1


def test_the_commit_that_adds_recon_diffs_against_nothing(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    from pathlib import Path

    bare = GitRepo(Path(str(tmp_path)) / "fresh")
    before = bare.commit({"README": "no recon yet\n"})
    bare.commit({"recon.yaml": "project: new\n", "specs/train.yaml": RUN})
    result = recon(capsys, "plan", str(bare.root), "--against", before, "--detailed-exitcode")
    assert result.code == 2, result.err
    assert "+ run train" in result.out


def test_an_unknown_target_is_a_recon_error_not_a_traceback() -> None:
    from reconciler.desired import graph
    from reconciler.errors import ReconError

    with pytest.raises(ReconError, match="no run named ghost"):
        graph.select(graph.build({"train": ()}), ["ghost"])


def test_one_changed_file_among_many_builds_and_decodes_only_what_differs(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep of many runs and a PR that changes one: the diff compares hashes, builds
    the one changed run of each side, and the base commit reuses the head's parse cache
    (no file of the base is parsed or decoded again). Counted, not timed."""
    from reconciler.desired import cache, loader
    from reconciler.desired.summary import DocumentSummary

    runs = {
        f"specs/r{i:03d}.yaml": f"kind: Run\nname: r{i}\ncommand: echo {i}\n" for i in range(60)
    }
    base = repo.commit(runs)
    repo.commit({"specs/r007.yaml": "kind: Run\nname: r7\ncommand: echo changed\n"})
    assert recon(capsys, "plan", str(repo.root), "--against", base).code == 0  # warms the cache

    built: list[str] = []
    decoded: list[int] = []
    real_build, real_decode = loader._desired_run, cache.FileResult.from_plain

    def counting_build(summary: DocumentSummary, *more: Any) -> object:
        built.append(summary.name)
        return real_build(summary, *more)

    def counting_decode(plain: tuple[object, ...]) -> cache.FileResult:
        decoded.append(1)
        return real_decode(plain)

    monkeypatch.setattr(loader, "_desired_run", counting_build)
    monkeypatch.setattr(cache.FileResult, "from_plain", staticmethod(counting_decode))
    shown = recon(capsys, "plan", str(repo.root), "--against", base)
    assert shown.code == 0
    assert "~ run r7" in shown.out and "1 to change" in shown.out
    assert built == ["r7", "r7"]  # the old and the new r7, nothing else
    assert len(decoded) == 60 + 1  # the head's 60 files, then only the base's old r007


def test_a_changed_code_file_is_listed_with_the_file(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """The spec is the same; the script its command names is not."""
    root = str(repo.root)
    base = repo.commit({"specs/train.yaml": RUN, "train.py": "print(1)\n", "x.md": "a"}, "add")
    head = repo.commit({"train.py": "print(2)\n"}, "fix the trainer")
    found = recon(capsys, "plan", root, "--against", base, "--rev", head, "--detailed-exitcode")
    assert found.code == 2, found.err
    old, new = (repo.git("rev-parse", f"{c}:train.py")[:12] for c in (base, head))
    assert "~ run train" in found.out
    assert f'code train.py: "{old}" -> "{new}"' in found.out
    assert "Plan: 0 to add, 1 to change, 0 to remove." in found.out
    shown = json.loads(
        recon(capsys, "plan", root, "--against", base, "--rev", head, "--format", "json").out
    )
    assert shown["changes"][0]["fields"] == [{"field": "code train.py", "old": old, "new": new}]
    # A file no run names changes nothing.
    other = repo.commit({"x.md": "b"}, "docs")
    assert recon(capsys, "plan", root, "--against", head, "--rev", other).out.count("No changes")


PIPELINE = """\
kind: Run
name: {name}
{renamed}command: echo hi > {{outputs.data.path}}
outputs:
  data: data.txt
---
kind: Run
name: train
command: cat {{inputs.d.path}}
inputs:
  d: {name}.data
"""


def test_a_renamed_run_is_a_move_and_its_reader_no_change(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    root = str(repo.root)
    base = repo.commit({"specs/a.yaml": PIPELINE.format(name="prep", renamed="")})
    renamed = PIPELINE.format(name="prepare", renamed="renamed_from: prep\n")
    repo.commit({"specs/a.yaml": renamed})
    shown = recon(capsys, "plan", root, "--against", base, "--detailed-exitcode")
    assert shown.code == 2, shown.err
    assert "  -> run prepare  (specs/a.yaml:1)\n      renamed from prep: moved, with no job\n" in (
        shown.out
    )
    assert "train" not in shown.out  # its input names the new name: the same run
    assert "Plan: 0 to add, 0 to change, 0 to remove, 1 to move." in shown.out
    as_json = json.loads(recon(capsys, "plan", root, "--against", base, "--format", "json").out)
    assert as_json["summary"] == {"add": 0, "change": 0, "remove": 0, "move": 1}
    (change,) = as_json["changes"]
    assert (change["name"], change["action"], change["moved_from"]) == ("prepare", "move", "prep")


def test_a_rename_with_a_changed_spec_is_a_removal_and_an_addition(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    """As the plan judges it: a run renamed and changed at once is a new run."""
    root = str(repo.root)
    base = repo.commit({"specs/a.yaml": PIPELINE.format(name="prep", renamed="")})
    changed = PIPELINE.format(name="prepare", renamed="renamed_from: prep\n")
    repo.commit({"specs/a.yaml": changed.replace("echo hi", "echo other")})
    shown = recon(capsys, "plan", root, "--against", base)
    assert "+ run prepare" in shown.out and "- run prep" in shown.out, shown.out
    assert "Plan: 1 to add, 0 to change, 1 to remove." in shown.out
