from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from reconciler.desired import loader, yamlsource
from reconciler.desired.loader import load_desired, open_source
from reconciler.desired.models import Run
from reconciler.errors import RepoError, SpecError
from tests.gitrepo import GitRepo

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"

TRAIN = """\
# the trainer
kind: Run
name: train
description: fits the model
command: python train.py --out {outputs.model.path}
resources:
  cpus: 8+
  memory: 32GiB
  gpus: A100:4
  time: "12:00:00"
outputs:
  model: model.pt
"""


def hash_of(repo: GitRepo, text: str, name: str = "train") -> str:
    repo.commit({"specs/train.yaml": text})
    return load_desired(open_source(repo.root)).runs[name].spec_hash


def test_example_repo_validates() -> None:
    desired = load_desired(open_source(EXAMPLE, worktree=True))
    members = {f"seeds[lr={lr},seed={seed}]" for lr in (0.1, 0.5) for seed in range(3)}
    assert (
        set(desired.runs) == {"prepare", "train", "evaluate", "actor-learner", "compare"} | members
    )
    assert desired.sweeps["seeds"].members[0] == "seeds[lr=0.5,seed=0]"
    assert set(desired.allocations) == {"interactive"}
    assert len(desired.runs["actor-learner"].spec.resources.components) == 2


def test_defaults_fill_what_the_run_leaves_out(repo: GitRepo) -> None:
    repo.commit({"specs/a.yaml": "kind: Run\nname: a\ncommand: x\nresources:\n  qos: high\n"})
    run = load_desired(open_source(repo.root)).runs["a"].spec
    assert run.resources.partition == "cpu"  # from recon.yaml
    assert run.resources.time is not None and run.resources.time.seconds == 3600
    assert run.resources.qos == "high"
    assert run.workdir == "runs/a"


def test_formatting_comments_order_and_description_leave_the_hash_alone(repo: GitRepo) -> None:
    before = hash_of(repo, TRAIN)
    reordered = """\
kind: Run
outputs: {model: {path: model.pt}}   # flow style now
resources: {time: '12:00:00', gpus: {A100: 4}, memory: 32768MiB, cpus: "8+"}
name: train
command: "python train.py --out {outputs.model.path}"
description: a different description
labels: {owner: someone}
retries: 3
"""
    assert hash_of(repo, reordered) == before


def test_a_real_change_changes_the_hash(repo: GitRepo) -> None:
    before = hash_of(repo, TRAIN)
    assert hash_of(repo, TRAIN.replace("A100:4", "A100:2")) != before
    assert hash_of(repo, TRAIN.replace("8+", "8")) != before


def test_script_content_is_part_of_the_hash(repo: GitRepo) -> None:
    spec = "kind: Run\nname: s\nscript: scripts/s.sh\n"
    repo.commit({"scripts/s.sh": "echo one\n"})
    first = hash_of(repo, spec, "s")
    repo.commit({"scripts/s.sh": "echo two\n"})
    second = load_desired(open_source(repo.root)).runs["s"]
    assert second.spec_hash != first
    assert second.script_text == "echo two\n"


def test_reads_the_commit_not_the_work_tree(repo: GitRepo) -> None:
    repo.commit({"specs/a.yaml": "kind: Run\nname: a\ncommand: x\n"})
    repo.write({"specs/b.yaml": "kind: Run\nname: b\ncommand: x\n"})
    assert set(load_desired(open_source(repo.root)).runs) == {"a"}
    assert set(load_desired(open_source(repo.root, worktree=True)).runs) == {"a", "b"}


def test_reads_an_older_revision(repo: GitRepo) -> None:
    first = repo.commit({"specs/a.yaml": "kind: Run\nname: a\ncommand: x\n"})
    repo.commit({"specs/a.yaml": "kind: Run\nname: renamed\ncommand: x\n"})
    assert set(load_desired(open_source(repo.root, first)).runs) == {"a"}
    assert load_desired(open_source(repo.root, "HEAD~1")).commit == first


def test_project_in_a_subfolder_of_the_repo(tmp_path: Path) -> None:
    outer = GitRepo(tmp_path / "mono")
    outer.commit(
        {
            "ml/recon.yaml": "project: sub\n",
            "ml/specs/a.yaml": "kind: Run\nname: a\ncommand: x\n",
            "specs/ignored.yaml": "not: a spec\n",
        }
    )
    desired = load_desired(open_source(outer.root / "ml"))
    assert set(desired.runs) == {"a"} and desired.project.project == "sub"


def test_unknown_revision_and_non_repo(repo: GitRepo, tmp_path: Path) -> None:
    repo.commit()
    with pytest.raises(RepoError, match="revision 'nope' not found"):
        open_source(repo.root, "nope")
    (tmp_path / "elsewhere").mkdir()
    with pytest.raises(RepoError, match="not inside a git repository"):
        open_source(tmp_path / "elsewhere")


def test_files_outside_the_globs_are_not_specs(repo: GitRepo) -> None:
    repo.commit(
        {
            "specs/a.yaml": "kind: Run\nname: a\ncommand: x\n",
            ".github/workflows/ci.yaml": "on: push\n",
            "specs/notes.txt": "kind: nonsense",
        }
    )
    assert set(load_desired(open_source(repo.root)).runs) == {"a"}


def test_parse_cache_serves_unchanged_files(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed: list[str] = []
    real_parse = yamlsource.parse_documents  # what the loader imported

    def counting_parse(text: str, file: str) -> object:
        parsed.append(file)
        return real_parse(text, file)

    monkeypatch.setattr(loader, "parse_documents", counting_parse)
    files = {f"specs/r{i}.yaml": f"kind: Run\nname: r{i}\ncommand: echo {i}\n" for i in range(5)}
    repo.commit(files)
    cache = tmp_path / "cache"
    first = load_desired(open_source(repo.root), cache_dir=cache)
    assert len(parsed) == 5 + 1  # recon.yaml is read every time
    repo.commit({"specs/r0.yaml": "kind: Run\nname: r0\ncommand: echo changed\n"})
    parsed.clear()
    second = load_desired(open_source(repo.root), cache_dir=cache)
    assert sorted(parsed) == ["recon.yaml", "specs/r0.yaml"]
    assert second.runs["r0"].spec.command == "echo changed"
    assert second.runs["r1"].spec_hash == first.runs["r1"].spec_hash
    assert second.runs["r0"].spec_hash != first.runs["r0"].spec_hash


def test_a_damaged_cache_is_only_a_miss(repo: GitRepo, tmp_path: Path) -> None:
    repo.commit({"specs/a.yaml": "kind: Run\nname: a\ncommand: x\n"})
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "spec-cache.marshal").write_bytes(b"\x80\x05garbage")
    assert set(load_desired(open_source(repo.root), cache_dir=cache).runs) == {"a"}


def test_a_commit_that_passed_the_project_checks_is_not_checked_again(
    repo: GitRepo, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The project-wide checks depend on a commit's files alone: the cache remembers
    the commits that passed them (both sides of `plan --against`). Counted, not timed."""
    checked: list[str] = []

    def counted(name: str, real: Callable[..., object]) -> Callable[..., object]:
        def check(*args: object) -> object:
            checked.append(name)
            return real(*args)

        return check

    for name in ("check_project", "check_output_paths"):
        monkeypatch.setattr(loader, name, counted(name, getattr(loader, name)))
    upstream = "kind: Run\nname: a\ncommand: x\noutputs:\n  out: o\n"
    reader = "kind: Run\nname: b\ncommand: x\ninputs:\n  i: a.out\n"
    first = repo.commit({"specs/a.yaml": upstream, "specs/b.yaml": reader})
    cache = tmp_path / "cache"
    loaded = load_desired(open_source(repo.root), cache_dir=cache)
    assert checked == ["check_project", "check_output_paths"]
    checked.clear()
    again = load_desired(open_source(repo.root), cache_dir=cache)
    assert checked == []
    assert dict(again.upstreams) == dict(loaded.upstreams) == {"a": (), "b": ("a",)}
    assert again.runs["b"].spec_hash == loaded.runs["b"].spec_hash
    repo.commit({"specs/c.yaml": "kind: Run\nname: c\ncommand: x\n"})
    load_desired(open_source(repo.root), cache_dir=cache)  # another commit: checked
    load_desired(open_source(repo.root, worktree=True), cache_dir=cache)  # no commit: checked
    assert checked == ["check_project", "check_output_paths"] * 2
    checked.clear()
    load_desired(open_source(repo.root, first), cache_dir=cache)
    assert checked == []


def test_a_commit_that_failed_the_project_checks_fails_every_time(
    repo: GitRepo, tmp_path: Path
) -> None:
    repo.commit({"specs/b.yaml": "kind: Run\nname: b\ncommand: x\ninputs:\n  i: a.out\n"})
    cache = tmp_path / "cache"
    for _ in range(2):
        with pytest.raises(SpecError) as failed:
            load_desired(open_source(repo.root), cache_dir=cache)
        assert "names no run 'a'" in str(failed.value)


def test_het_run_model() -> None:
    run = Run.model_validate(
        {
            "kind": "Run",
            "name": "h",
            "command": "x",
            "resources": {
                "time": "1h",
                "components": [{"partition": "cpu", "cpus": 2}, {"partition": "gpu", "gpus": 2}],
            },
        }
    )
    assert [shape.partition for shape in run.resources.shapes] == ["cpu", "gpu"]
