"""Code is part of a run, and failures heal once their cause changes: the planner on
plain values (a run's code files and blob ids, the versions each job ran with)."""

from __future__ import annotations

from typing import Any

from reconciler.engine.plan import FileState, plan
from reconciler.engine.plan.actions import SyncStatus
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.inputs import FileState as _FileState
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from tests.planning import COMMIT, NOW, desired, hash_of, job, observed, record, run

OLD = "0ld" * 13 + "0"  # the commit an older recon submitted a job from
TRAIN = {"train": {"scripts/train.py": "b2", "conf/model.yaml": "c1"}}


def decided(result: Any, name: str) -> tuple[str, Cause, SyncStatus | None]:
    """What the planner decided for the run: its action's kind, cause and sync status."""
    (action,) = [a for a in result.actions if a.target == name and a.kind.value != "adopt"]
    return action.kind.value, action.cause, action.sync


def said(result: Any, name: str) -> str:
    """Why, in words: for the tests of what a plan tells a person."""
    (action,) = [a for a in result.actions if a.target == name and a.kind.value != "adopt"]
    return str(action.reason)


def test_a_changed_code_file_makes_the_run_outdated_naming_the_file() -> None:
    state = desired(run("train"), code=TRAIN)
    ran = {"scripts/train.py": "b1", "conf/model.yaml": "c1"}
    success = record("train", hash_of(state, "train"), "812", Health.SUCCEEDED, code_versions=ran)
    result = plan(state, observed(), [success], NOW, scheduler="slurm")
    assert decided(result, "train") == ("submit", Cause.CODE_CHANGED, SyncStatus.OUTDATED)
    assert said(result, "train") == "code scripts/train.py changed since job 812 ran it"
    same = record(
        "train", hash_of(state, "train"), "812", Health.SUCCEEDED, code_versions=TRAIN["train"]
    )
    result = plan(state, observed(), [same], NOW, scheduler="slurm")
    assert decided(result, "train") == ("no-op", Cause.CURRENT, SyncStatus.CURRENT)


def test_several_changed_files_are_named_together() -> None:
    state = desired(run("train"), code=TRAIN)
    ran = {"scripts/train.py": "b1", "conf/model.yaml": "c0"}
    success = record("train", hash_of(state, "train"), "8", Health.SUCCEEDED, code_versions=ran)
    result = plan(state, observed(), [success], NOW, scheduler="slurm")
    assert said(result, "train") == (
        "code conf/model.yaml, scripts/train.py changed since job 8 ran them"
    )


def test_a_record_without_code_versions_is_compared_at_its_commit() -> None:
    """A job of an older recon: its commit tells what it ran."""
    state = desired(run("train"), code=TRAIN)
    digest = hash_of(state, "train")
    old = record("train", digest, "5", Health.SUCCEEDED, commit=OLD)
    same_at_old = {OLD: {"scripts/train.py": "b2", "conf/model.yaml": "c1", "x": "y"}}
    result = plan(state, observed(), [old], NOW, scheduler="slurm", code_at=same_at_old)
    assert decided(result, "train")[:2] == ("no-op", Cause.CURRENT)

    changed_at_old = {OLD: {"scripts/train.py": "b1", "conf/model.yaml": "c1"}}
    result = plan(state, observed(), [old], NOW, scheduler="slurm", code_at=changed_at_old)
    assert decided(result, "train")[:2] == ("submit", Cause.CODE_CHANGED)
    # A file that was not in the job's commit is new code (a file `code:` came to match).
    result = plan(state, observed(), [old], NOW, scheduler="slurm", code_at={OLD: {}})
    assert decided(result, "train")[:2] == ("submit", Cause.CODE_CHANGED)


def test_code_that_cannot_be_known_never_reruns_a_run() -> None:
    state = desired(run("train"), code=TRAIN)
    digest = hash_of(state, "train")
    for old in (
        record("train", digest, "5", Health.SUCCEEDED),  # no commit (a lost journal)
        record("train", digest, "5", Health.SUCCEEDED, commit=OLD),  # git lost the commit
        record("train", digest, "5", Health.SUCCEEDED, commit=COMMIT),  # this very commit
    ):
        result = plan(state, observed(), [old], NOW, scheduler="slurm", code_at={})
        assert decided(result, "train")[0] == "no-op"
    linked = {OLD: {"scripts/train.py": None, "conf/model.yaml": "c1"}}  # a link then
    old = record("train", digest, "5", Health.SUCCEEDED, commit=OLD)
    assert (
        decided(plan(state, observed(), [old], NOW, scheduler="slurm", code_at=linked), "train")[0]
        == "no-op"
    )


def test_a_missing_output_is_told_before_changed_code() -> None:
    state = desired(run("train"), code=TRAIN)
    success = record("train", hash_of(state, "train"), "8", Health.SUCCEEDED, code_versions={})
    files = FileState(outputs={("train", "out"): None})
    result = plan(state, observed(), [success], NOW, scheduler="slurm", files=files, code_at={})
    assert decided(result, "train") == ("submit", Cause.OUTPUT_MISSING, SyncStatus.MISSING)


def test_a_failed_run_with_no_retries_left_names_the_fixes_that_work() -> None:
    state = desired(run("train"), code=TRAIN)
    failed = record(
        "train",
        hash_of(state, "train"),
        "60",
        Health.FAILED,
        exit_code=1,
        code_versions=TRAIN["train"],
    )
    result = plan(state, observed(), [failed], NOW, scheduler="slurm")
    assert decided(result, "train") == ("no-op", Cause.RETRIES_EXHAUSTED, SyncStatus.NEVER_RUN)
    assert said(result, "train") == (
        "failed: job 60 failed (exit 1); no retries left (retries: 0). Change its spec or "
        "code and commit, or `recon apply --replace train`"
    )


def test_a_failed_run_whose_code_changed_is_tried_again() -> None:
    state = desired(run("train"), run("eval", "train"), code=TRAIN)
    ran = {"scripts/train.py": "b1", "conf/model.yaml": "c1"}
    failed = record(
        "train", hash_of(state, "train"), "60", Health.FAILED, exit_code=1, code_versions=ran
    )
    result = plan(state, observed(), [failed], NOW, scheduler="slurm")
    assert decided(result, "train")[:2] == ("submit", Cause.CODE_CHANGED)
    assert said(result, "train") == "code scripts/train.py changed since job 60 failed with it"
    assert decided(result, "eval")[0] == "submit"  # not blocked: chained with afterok
    # Observed only (sacct's view before the journal settled it): the same.
    jobs = observed(job("train", hash_of(state, "train"), S.FAILED, "60", exit_code=1))
    result = plan(state, jobs, [failed], NOW, scheduler="slurm")
    assert decided(result, "train")[:2] == ("submit", Cause.CODE_CHANGED)


def _downstream_failed(inputs: dict[str, str | None] | None, upstream_job: str = "70") -> Any:
    state = desired(run("prep"), run("train", "prep"))
    records = [
        record(
            "train",
            hash_of(state, "train"),
            "60",
            Health.FAILED,
            exit_code=1,
            input_versions=inputs,
        ),
        record("prep", hash_of(state, "prep"), upstream_job, Health.SUCCEEDED),
    ]
    files = _FileState(outputs={("prep", "out"): "v2"})
    return plan(state, observed(), records, NOW, scheduler="slurm", files=files)


def test_a_downstream_failed_on_bad_data_is_retried_once_its_upstream_is_fixed() -> None:
    result = _downstream_failed({"in_prep": "v1"})
    assert decided(result, "prep")[0] == "no-op"
    assert decided(result, "train")[:2] == ("submit", Cause.INPUTS_CHANGED)
    assert said(result, "train") == "input in_prep (prep.out) changed since job 60 failed"
    # An upstream that wrote nothing (missing then) and is there now: changed too.
    changed = _downstream_failed({"in_prep": None})
    assert decided(changed, "train")[:2] == ("submit", Cause.INPUTS_CHANGED)
    # The same version as when it failed: still failed, no retries left.
    same = _downstream_failed({"in_prep": "v2"})
    assert decided(same, "train")[:2] == ("no-op", Cause.RETRIES_EXHAUSTED)


def test_a_failure_recorded_without_input_versions_heals_on_a_newer_upstream_success() -> None:
    """A failure an older recon recorded (no input versions): its inputs changed when an
    upstream succeeded in a job submitted after it; otherwise it still counts."""
    healed = _downstream_failed(None, upstream_job="70")
    assert decided(healed, "train")[:2] == ("submit", Cause.INPUTS_CHANGED)
    older = _downstream_failed(None, upstream_job="50")
    assert decided(older, "train")[:2] == ("no-op", Cause.RETRIES_EXHAUSTED)


def test_an_upstream_still_rerunning_heals_nothing_yet() -> None:
    state = desired(run("prep"), run("train", "prep"))
    records = [
        record(
            "train",
            hash_of(state, "train"),
            "60",
            Health.FAILED,
            exit_code=1,
            input_versions={"in_prep": "v1"},
        ),
        record("prep", hash_of(state, "prep"), "70"),
    ]
    jobs = observed(job("prep", hash_of(state, "prep"), S.RUNNING, "70"))
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert decided(result, "train")[0] == "no-op"


def test_a_job_recon_cancelled_is_no_failed_attempt() -> None:
    state = desired(run("train"))
    digest = hash_of(state, "train")
    cancelled = record("train", digest, "60", Health.CANCELLED)
    result = plan(
        state, observed(), [cancelled], NOW, scheduler="slurm", cancelled=frozenset({"60"})
    )
    assert decided(result, "train")[:2] == ("submit", Cause.CANCELLED_BY_RECON)
    assert (
        said(result, "train") == "job 60 was cancelled by recon, which is no attempt of the run's"
    )
    # Cancelled by someone else: an attempt, as before.
    result = plan(state, observed(), [cancelled], NOW, scheduler="slurm")
    assert decided(result, "train")[:2] == ("no-op", Cause.RETRIES_EXHAUSTED)
    # A job that failed on its own before recon cleaned it up (held in SpecialExit) stays
    # a failure.
    held = record("train", digest, "60", Health.FAILED)
    result = plan(state, observed(), [held], NOW, scheduler="slurm", cancelled=frozenset({"60"}))
    assert decided(result, "train")[:2] == ("no-op", Cause.RETRIES_EXHAUSTED)


def test_a_recon_cancelled_job_seen_only_by_the_cluster_is_no_attempt_either() -> None:
    state = desired(run("train", retries=1))
    digest = hash_of(state, "train")
    jobs = observed(
        job("train", digest, S.FAILED, "59", exit_code=1),
        job("train", digest, S.CANCELLED, "60"),
    )
    records = [record("train", digest, "59"), record("train", digest, "60")]
    result = plan(state, jobs, records, NOW, scheduler="slurm", cancelled=frozenset({"60"}))
    assert decided(result, "train")[:2] == ("submit", Cause.CANCELLED_BY_RECON)
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert decided(result, "train")[:2] == ("no-op", Cause.RETRIES_EXHAUSTED)


def test_a_run_torn_down_with_its_coupled_partner_waits_for_the_partner_to_run_again() -> None:
    """recon tore the simulator down when the monitor failed: no attempt of the
    simulator's, but it does not run alone while the monitor stays failed; a fix of the
    monitor submits both."""
    state = desired(run("simulator"), run("monitor", coupled_with=["simulator"]))
    records = [
        record("monitor", hash_of(state, "monitor"), "12", Health.FAILED, exit_code=1),
        record("simulator", hash_of(state, "simulator"), "13", Health.CANCELLED),
    ]
    result = plan(state, observed(), records, NOW, scheduler="slurm", cancelled=frozenset({"13"}))
    assert decided(result, "monitor")[0] == "no-op"
    assert decided(result, "simulator")[:2] == ("blocked", Cause.PARTNER_FAILED)
    assert said(result, "simulator") == (
        "waits for coupled run monitor, which ended failed (job 12); job 13 was cancelled by "
        "recon, which is no attempt of the run's"
    )
    fixed = desired(
        run("simulator"), run("monitor", coupled_with=["simulator"], command="echo fixed")
    )
    result = plan(fixed, observed(), records, NOW, scheduler="slurm", cancelled=frozenset({"13"}))
    assert [decided(result, name)[0] for name in ("monitor", "simulator")] == ["submit", "submit"]
