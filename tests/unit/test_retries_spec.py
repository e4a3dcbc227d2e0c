"""`retries`: a number, or budgets per kind; every bad form named by file, line and field."""

from __future__ import annotations

import pytest

from reconciler.desired.loader import load_desired, open_source
from reconciler.desired.models import Run
from reconciler.desired.retries import Retries, RetryKind
from reconciler.errors import SpecError
from tests.gitrepo import GitRepo
from tests.planning import desired, hash_of, run

SPEC = "kind: Run\nname: train\ncommand: echo hi\n"


def retries_of(value: object) -> Retries:
    spec = {"kind": "Run", "name": "a", "command": "x", "retries": value}
    return Run.model_validate(spec).retries


def test_a_plain_number_is_one_budget_for_every_kind() -> None:
    three = retries_of(3)
    assert three.shared
    assert {kind: three.allowed(kind) for kind in RetryKind} == dict.fromkeys(RetryKind, 3)
    assert retries_of(3).form() == 3


def test_budgets_per_kind_give_an_unlisted_kind_none() -> None:
    budgets = retries_of({"timeout": 3, "failure": 1, "preemption": "unlimited"})
    assert not budgets.shared
    assert {kind: budgets.allowed(kind) for kind in RetryKind} == {
        RetryKind.FAILURE: 1,
        RetryKind.TIMEOUT: 3,
        RetryKind.PREEMPTION: None,  # unlimited
        RetryKind.NODE_FAILURE: 0,
        RetryKind.OUT_OF_MEMORY: 0,
    }
    assert not budgets.lists(RetryKind.NODE_FAILURE) and budgets.lists(RetryKind.TIMEOUT)
    # as written, in kind order: what `recon specs` and the web view show
    assert budgets.form() == {"failure": 1, "timeout": 3, "preemption": "unlimited"}
    assert budgets.text == "{failure: 1, timeout: 3, preemption: unlimited}"
    assert retries_of({}).allowed(RetryKind.FAILURE) == 0
    written = Run.model_validate({"kind": "Run", "name": "a", "command": "x", "retries": {}})
    assert Run.model_validate(written.model_dump(mode="json")) == written  # reads back equal
    spec = {"kind": "Run", "name": "a", "command": "x", "retries": budgets.form()}
    assert Run.model_validate(spec).retries == budgets


def test_the_default_is_no_retries() -> None:
    default = Run.model_validate({"kind": "Run", "name": "a", "command": "x"}).retries
    assert default == Retries(0) and default.allowed(RetryKind.TIMEOUT) == 0


@pytest.mark.parametrize(
    "value", [0, 5, {"failure": 0, "timeout": 2}, {"preemption": "unlimited", "timeout": 1}]
)
def test_retries_are_not_part_of_the_spec_hash(value: object) -> None:
    assert hash_of(desired(run("train", retries=value)), "train") == hash_of(
        desired(run("train")), "train"
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("retries: {oops: 1}", "oops is not a kind of retry: the kinds are failure, timeout, "
         "preemption, node_failure, out_of_memory"),
        ("retries: {timout: 1}", "timout is not a kind of retry: did you mean timeout?"),
        ("retries: -1", "must be from 0 to 100, got -1"),
        ("retries: 101", "must be from 0 to 100, got 101"),
        ("retries: {timeout: -2}", "timeout: must be from 0 to 100, got -2"),
        ("retries: {preemption: unlimted}", "preemption: expected a whole number from 0 to "
         "100 or `unlimited`, got 'unlimted'"),
        ("retries: {failure: 1.5}", "failure: expected a whole number from 0 to 100, got the "
         "number 1.5"),
        ("retries: {timeout: unlimited}", "timeout: `unlimited` is taken for preemption and "
         "node_failure only (the cluster's doing): a run that always ends in a timeout would "
         "be submitted forever; give a number from 0 to 100"),
        ("retries: 1.5", "expected a whole number (retries after any failure, 0 to 100) or "
         "budgets per kind ({failure: 1, timeout: 3, preemption: unlimited}), got the number 1.5"),
        ("retries: three", "expected a whole number (retries after any failure, 0 to 100) or "
         "budgets per kind ({failure: 1, timeout: 3, preemption: unlimited}), got 'three'"),
        ("retries: [1, 2]", "expected a whole number (retries after any failure, 0 to 100) or "
         "budgets per kind ({failure: 1, timeout: 3, preemption: unlimited}), got a list"),
    ],
)  # fmt: skip
def test_a_bad_form_is_told_at_its_file_line_and_field(
    repo: GitRepo, line: str, message: str
) -> None:
    repo.commit({"specs/a.yaml": SPEC + line + "\n"})
    with pytest.raises(SpecError) as caught:
        load_desired(open_source(repo.root))
    (issue,) = caught.value.issues
    assert str(issue) == f"specs/a.yaml:4: retries: {message}"


def test_a_bad_budget_in_block_form_is_told_at_the_retries_line(repo: GitRepo) -> None:
    repo.commit({"specs/a.yaml": SPEC + "retries:\n  failure: 1\n  timeout: lots\n"})
    with pytest.raises(SpecError) as caught:
        load_desired(open_source(repo.root))
    (issue,) = caught.value.issues
    assert (issue.line, issue.field) == (4, "retries")
    assert issue.message == "timeout: expected a whole number from 0 to 100, got 'lots'"
