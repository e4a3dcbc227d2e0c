"""Sweeps at validation: members by value, their directories and hashes, and references."""

from __future__ import annotations

import pytest

from reconciler.desired import matrix
from reconciler.desired.desired import Desired, spec_hash
from reconciler.desired.loader import load_desired, open_source
from reconciler.errors import SpecError
from tests.gitrepo import GitRepo

TRAIN = """\
kind: Run
name: train
matrix:
  lr: [0.001, 0.0003]
  seed: [0, 1, 2]
command: python train.py --lr {matrix.lr} --seed {matrix.seed} --out {outputs.model.path}
outputs:
  model: model.pt
"""

AGGREGATE = """\
kind: Run
name: aggregate
inputs:
  models: train.model
command: python aggregate.py {inputs.models.paths} --list {inputs.models.list}
outputs:
  table: table.csv
"""


def load(repo: GitRepo, files: dict[str, str]) -> Desired:
    repo.commit(files)
    return load_desired(open_source(repo.root))


def problems(repo: GitRepo, files: dict[str, str]) -> list[str]:
    repo.commit(files)
    with pytest.raises(SpecError) as caught:
        load_desired(open_source(repo.root))
    return [str(issue) for issue in caught.value.issues]


def test_a_sweep_is_its_members_each_named_and_placed_by_its_values(repo: GitRepo) -> None:
    desired = load(repo, {"specs/train.yaml": TRAIN})
    names = sorted(desired.runs)
    assert names == [
        "train[lr=0.0003,seed=0]", "train[lr=0.0003,seed=1]", "train[lr=0.0003,seed=2]",
        "train[lr=0.001,seed=0]", "train[lr=0.001,seed=1]", "train[lr=0.001,seed=2]",
    ]  # fmt: skip
    member = desired.runs["train[lr=0.001,seed=2]"]
    assert member.spec.workdir == "runs/train/lr=0.001,seed=2"
    assert member.sweep == "train"
    assert desired.sweeps["train"].members[0] == "train[lr=0.001,seed=0]"
    assert len({desired.runs[name].spec_hash for name in names}) == 6


def test_appending_a_value_or_reordering_an_axis_leaves_members_untouched(repo: GitRepo) -> None:
    before = load(repo, {"specs/train.yaml": TRAIN})
    hashes = {name: before.runs[name].spec_hash for name in before.runs}
    grown = TRAIN.replace("seed: [0, 1, 2]", "seed: [2, 0, 1, 3]").replace(
        "lr: [0.001, 0.0003]", "lr: [0.0003, 0.001]"
    )
    after = load(repo, {"specs/train.yaml": grown})
    assert len(after.runs) == 8
    assert {name: after.runs[name].spec_hash for name in hashes} == hashes


def test_exclude_and_include(repo: GitRepo) -> None:
    text = TRAIN.replace(
        "  seed: [0, 1, 2]\n",
        "  seed: [0, 1, 2]\n  exclude: [{lr: 0.0003}]\n  include: [{lr: 0.01, seed: 7}]\n",
    )
    desired = load(repo, {"specs/train.yaml": text})
    assert sorted(desired.runs) == [
        "train[lr=0.001,seed=0]", "train[lr=0.001,seed=1]", "train[lr=0.001,seed=2]",
        "train[lr=0.01,seed=7]",
    ]  # fmt: skip


def test_a_plain_run_gathers_every_member(repo: GitRepo) -> None:
    desired = load(repo, {"specs/train.yaml": TRAIN, "specs/aggregate.yaml": AGGREGATE})
    assert sorted(desired.upstreams["aggregate"]) == sorted(desired.sweeps["train"].members)
    assert desired.runs["aggregate"].gathers["models"] == desired.sweeps["train"].members


def test_a_member_named_alone(repo: GitRepo) -> None:
    one = AGGREGATE.replace("train.model", "train[lr=1e-3,seed=0].model").replace(
        "{inputs.models.paths} --list {inputs.models.list}", "{inputs.models.path}"
    )
    desired = load(repo, {"specs/train.yaml": TRAIN, "specs/aggregate.yaml": one})
    assert desired.upstreams["aggregate"] == ("train[lr=0.001,seed=0]",)
    spec_input = desired.runs["aggregate"].spec.inputs["models"]
    assert spec_input.upstream == ("train[lr=0.001,seed=0]", "model")


def test_sweeps_sharing_axes_pair_member_by_member(repo: GitRepo) -> None:
    evaluate = """\
kind: Run
name: evaluate
matrix:
  lr: [0.001, 0.0003]
  seed: [0, 1, 2]
inputs:
  model: train.model
command: python eval.py {inputs.model.path}
"""
    desired = load(repo, {"specs/train.yaml": TRAIN, "specs/evaluate.yaml": evaluate})
    assert desired.upstreams["evaluate[lr=0.0003,seed=1]"] == ("train[lr=0.0003,seed=1]",)
    run = desired.runs["evaluate[lr=0.0003,seed=1]"]
    assert run.spec.inputs["model"].upstream == ("train[lr=0.0003,seed=1]", "model")


def test_a_sweep_over_fewer_axes_gathers_the_rest(repo: GitRepo) -> None:
    per_lr = """\
kind: Run
name: best
matrix:
  lr: [0.001, 0.0003]
inputs:
  models: train.model
command: python best.py {inputs.models.paths}
"""
    desired = load(repo, {"specs/train.yaml": TRAIN, "specs/best.yaml": per_lr})
    assert sorted(desired.upstreams["best[lr=0.001]"]) == [
        "train[lr=0.001,seed=0]", "train[lr=0.001,seed=1]", "train[lr=0.001,seed=2]",
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("change", "line", "words"),
    [
        (("{matrix.seed}", "{matrix.sed}"), 6, "unknown template token {matrix.sed}"),
        (("seed: [0, 1, 2]", "seed: []"), 5, "is empty"),
        (("seed: [0, 1, 2]", "seed: [0, [1], 2]"), 5, "is not a scalar"),
        (("seed: [0, 1, 2]", "seed: [0, 1, 0]"), 5, "duplicate member"),
        (("seed: [0, 1, 2]", "seed: [0, 1, 2]\n  include: [{lr: 0.001, seed: 1}]"), 6, "duplicate"),
        (("seed: [0, 1, 2]", "seed: [0, 1, 2]\n  exclude: [{sed: 1}]"), 6, "unknown axis sed"),
        (("seed: [0, 1, 2]", "seed: ['a b']"), 5, "a string value"),
        (("seed: [0, 1, 2]", f"seed: {list(range(5001))}"), 3, "more than the 10000"),
    ],
)
def test_matrix_problems_name_their_line(
    repo: GitRepo, change: tuple[str, str], line: int, words: str
) -> None:
    found = problems(repo, {"specs/train.yaml": TRAIN.replace(*change)})
    assert any(f"specs/train.yaml:{line}" in issue and words in issue for issue in found), found


def test_a_gathered_input_has_no_single_path(repo: GitRepo) -> None:
    single = AGGREGATE.replace(
        "{inputs.models.paths} --list {inputs.models.list}", "{inputs.models.path}"
    )
    found = problems(repo, {"specs/train.yaml": TRAIN, "specs/aggregate.yaml": single})
    assert any("specs/aggregate.yaml:4" in issue and "reads 6 members" in issue for issue in found)


def test_a_selector_names_an_axis_and_a_member_that_exist(repo: GitRepo) -> None:
    bad_axis = AGGREGATE.replace("train.model", "train[sed=0].model")
    found = problems(repo, {"specs/train.yaml": TRAIN, "specs/aggregate.yaml": bad_axis})
    assert any("has no axis sed" in issue for issue in found), found
    no_member = AGGREGATE.replace("train.model", "train[seed=9].model")
    found = problems(repo, {"specs/train.yaml": TRAIN, "specs/aggregate.yaml": no_member})
    assert any("train[seed=9] has no such member" in issue for issue in found), found


def test_max_parallel_needs_a_matrix(repo: GitRepo) -> None:
    found = problems(repo, {"specs/a.yaml": "kind: Run\nname: a\ncommand: x\nmax_parallel: 2\n"})
    assert any("needs a matrix" in issue for issue in found)


def test_member_text_of_values() -> None:
    assert matrix.text(True) == "true" and matrix.text(3e-4) == "0.0003" and matrix.text(2) == "2"


def test_a_members_hash_is_the_hash_of_its_spec(repo: GitRepo) -> None:
    # Members' hashes are built from their sweep's canonical fields, once per sweep: they
    # must be what hashing each member's own spec gives.
    evaluate = """\
kind: Run
name: evaluate
matrix:
  lr: [0.001, 0.0003]
  seed: [0, 1, 2]
inputs:
  model: train.model
command: python eval.py {inputs.model.path}
"""
    desired = load(repo, {"specs/train.yaml": TRAIN, "specs/evaluate.yaml": evaluate})
    for name in desired.runs:
        run = desired.runs[name]
        assert run.spec_hash == spec_hash(run.spec, run.script_text), name
