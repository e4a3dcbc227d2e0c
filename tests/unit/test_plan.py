"""The planner's decision table, on plain values: no cluster, no git, no clock."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import timedelta

import pytest

from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.state.records import EndingKind, SubmissionRecord, SubmissionStatus
from tests.planning import NOW, desired, hash_of, job, observed, record, run


def kinds(result: Plan) -> dict[str, tuple[str, str]]:
    """Each target's action kind and reason, for tests of what the plan says in words."""
    return {a.target: (a.kind.value, a.reason) for a in result.actions}


def causes(result: Plan) -> dict[str, tuple[str, Cause]]:
    """Each target's action kind and cause: what the planner decided, whatever its words."""
    return {a.target: (a.kind.value, a.cause) for a in result.actions}


def test_a_fresh_dag_is_queued_whole_with_afterok() -> None:
    state = desired(run("prep"), run("train", "prep"), run("eval", "train", "prep"))
    result = plan(state, observed(), [], NOW, scheduler="slurm")
    assert [(a.kind, a.target, a.after) for a in result.actions] == [
        (ActionKind.SUBMIT, "prep", ()),
        (ActionKind.SUBMIT, "train", ("prep",)),
        (ActionKind.SUBMIT, "eval", ("prep", "train")),
    ]
    assert result.summary == "Plan: 3 to submit, 0 to replace, 0 to cancel."
    assert result.has_changes


def test_everything_current_plans_nothing() -> None:
    state = desired(run("prep"), run("train", "prep"))
    jobs = observed(
        job("prep", hash_of(state, "prep"), S.COMPLETED, "10"),
        job("train", hash_of(state, "train"), S.COMPLETED, "11"),
    )
    records = [
        record("prep", hash_of(state, "prep"), "10"),
        record("train", hash_of(state, "train"), "11"),
    ]
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert not result.has_changes
    assert causes(result)["train"] == ("no-op", Cause.CURRENT)


def test_success_remembered_by_the_journal_outlives_sacct() -> None:
    state = desired(run("prep"))
    records = [record("prep", hash_of(state, "prep"), "10", final=Health.SUCCEEDED)]
    result = plan(state, observed(), records, NOW, scheduler="slurm")
    assert kinds(result)["prep"][0] == "no-op"


def test_downstream_of_an_inflight_upstream_waits_on_its_live_job() -> None:
    state = desired(run("prep"), run("train", "prep"))
    jobs = observed(job("prep", hash_of(state, "prep"), S.RUNNING, "10"))
    result = plan(
        state, jobs, [record("prep", hash_of(state, "prep"), "10")], NOW, scheduler="slurm"
    )
    train = result.actions[-1]
    assert (train.kind, train.after, train.after_jobs) == (ActionKind.SUBMIT, (), ("10",))


def test_pending_outdated_job_is_replaced_with_the_changed_field() -> None:
    old = run("train", resources={"gpus": "A100:2"})
    new = run("train", resources={"gpus": "A100:4"})
    before, state = desired(old), desired(new)
    jobs = observed(job("train", hash_of(before, "train"), S.PENDING, "20"))
    records = [record("train", hash_of(before, "train"), "20", spec=old)]
    (action,) = plan(state, jobs, records, NOW, scheduler="slurm").actions
    assert action.kind is ActionKind.REPLACE
    assert action.job_ids == ("20",)
    assert action.cause is Cause.SPEC_CHANGED
    assert [(c.field, c.old, c.new) for c in action.changes] == [
        ("resources.gpus", "A100:2", "A100:4")
    ]


@pytest.mark.parametrize(("update", "expected"), [("defer", "no-op"), ("replace", "replace")])
def test_running_outdated_job_follows_the_update_policy(update: str, expected: str) -> None:
    before = desired(run("train", command="v1"))
    state = desired(run("train", command="v2", update=update))
    jobs = observed(job("train", hash_of(before, "train"), S.RUNNING, "20"))
    records = [record("train", hash_of(before, "train"), "20")]
    (action,) = plan(state, jobs, records, NOW, scheduler="slurm").actions
    assert action.kind.value == expected


def test_deferred_upstream_makes_downstream_wait() -> None:
    before = desired(run("prep", command="v1"), run("train", "prep"))
    state = desired(run("prep", command="v2"), run("train", "prep"))
    jobs = observed(job("prep", hash_of(before, "prep"), S.RUNNING, "20"))
    result = plan(
        state, jobs, [record("prep", hash_of(before, "prep"), "20")], NOW, scheduler="slurm"
    )
    assert causes(result)["train"] == ("no-op", Cause.WAITING_UPSTREAM)
    assert not result.has_changes


def test_a_job_with_the_desired_hash_is_never_touched() -> None:
    state = desired(run("train"))
    for state_now in (S.PENDING, S.RUNNING):
        jobs = observed(job("train", hash_of(state, "train"), state_now, "30"))
        (action,) = plan(
            state, jobs, [record("train", hash_of(state, "train"), "30")], NOW, scheduler="slurm"
        ).actions
        assert (action.kind, action.cause) == (ActionKind.NOOP, Cause.IN_PROGRESS)


def test_removed_run_is_pruned_and_finished_jobs_are_left_alone() -> None:
    state = desired(run("keep"))
    jobs = observed(
        job("gone", "a" * 16, S.RUNNING, "40"),
        job("old", "b" * 16, S.COMPLETED, "41"),
    )
    records = [record("gone", "a" * 16, "40"), record("old", "b" * 16, "41")]
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    cancels = [a for a in result.actions if a.kind is ActionKind.CANCEL]
    assert [(a.target, a.job_ids) for a in cancels] == [("gone", ("40",))]


def test_prune_off_keeps_the_job() -> None:
    state = desired(run("keep"), prune=False)
    jobs = observed(job("gone", "a" * 16, S.RUNNING, "40"))
    result = plan(state, jobs, [record("gone", "a" * 16, "40")], NOW, scheduler="slurm")
    assert not any(a.kind is ActionKind.CANCEL for a in result.actions)


def test_other_projects_jobs_are_invisible() -> None:
    state = desired(run("keep"))
    jobs = observed(job("gone", "a" * 16, S.RUNNING, "40", project="other"))
    result = plan(state, jobs, [], NOW, scheduler="slurm")
    assert [a.kind for a in result.actions] == [ActionKind.SUBMIT]


def test_unknown_tagged_job_is_adopted_not_resubmitted() -> None:
    state = desired(run("train"))
    jobs = observed(job("train", hash_of(state, "train"), S.PENDING, "50"))
    result = plan(state, jobs, [], NOW, scheduler="slurm")
    assert [(a.kind, a.target) for a in result.actions] == [
        (ActionKind.ADOPT, "train"),
        (ActionKind.NOOP, "train"),
    ]
    assert not result.has_changes


def test_failed_run_retries_then_gives_up_and_blocks_downstream() -> None:
    state = desired(run("train", retries=1), run("eval", "train"))
    digest = hash_of(state, "train")
    first = observed(job("train", digest, S.FAILED, "60", exit_code=1))
    result = plan(state, first, [record("train", digest, "60")], NOW, scheduler="slurm")
    assert causes(result)["train"] == ("retry", Cause.RETRY)
    assert kinds(result)["eval"][0] == "submit"

    second = observed(
        job("train", digest, S.FAILED, "60", exit_code=1),
        job("train", digest, S.FAILED, "61", exit_code=1),
    )
    records = [record("train", digest, "60"), record("train", digest, "61")]
    result = plan(state, second, records, NOW, scheduler="slurm")
    assert causes(result)["train"] == ("no-op", Cause.RETRIES_EXHAUSTED)
    assert causes(result)["eval"] == ("blocked", Cause.UPSTREAM_FAILED)
    assert not result.has_changes


def test_cancelled_for_a_dependency_is_not_an_attempt() -> None:
    state = desired(run("prep"), run("train", "prep"))
    jobs = observed(
        job("prep", hash_of(state, "prep"), S.COMPLETED, "70"),
        job("train", hash_of(state, "train"), S.CANCELLED, "71", reason="DependencyNeverSatisfied"),
    )
    records = [
        record("prep", hash_of(state, "prep"), "70"),
        record("train", hash_of(state, "train"), "71"),
    ]
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert causes(result)["train"] == ("submit", Cause.NEVER_RUN)


def test_blocked_propagates_down_the_chain() -> None:
    state = desired(run("a"), run("b", "a"), run("c", "b"))
    jobs = observed(job("a", hash_of(state, "a"), S.FAILED, "80", exit_code=2))
    result = plan(state, jobs, [record("a", hash_of(state, "a"), "80")], NOW, scheduler="slurm")
    assert causes(result)["b"] == causes(result)["c"] == ("blocked", Cause.UPSTREAM_FAILED)
    assert kinds(result)["c"] == ("blocked", "upstream b is blocked")  # in words


def test_incomplete_observation_cancels_replaces_and_prunes_nothing() -> None:
    before = desired(run("train", command="v1"))
    state = desired(run("train", command="v2", update="replace"), run("fresh"))
    jobs = observed(
        job("train", hash_of(before, "train"), S.PENDING, "90"),
        job("gone", "c" * 16, S.RUNNING, "91"),
        complete=False,
    )
    records = [record("train", hash_of(before, "train"), "90"), record("gone", "c" * 16, "91")]
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert {a.kind for a in result.actions} <= {ActionKind.NOOP, ActionKind.SUBMIT}
    assert kinds(result)["fresh"][0] == "submit"  # never submitted: safe to submit
    assert causes(result)["train"] == ("no-op", Cause.OBSERVATION_INCOMPLETE)
    assert result.notes and "slurmdbd is down" in result.notes[0]


def test_incomplete_observation_does_not_resubmit_a_job_of_unknown_fate() -> None:
    state = desired(run("train"))
    an_hour_ago = NOW - timedelta(hours=1)
    records = [record("train", hash_of(state, "train"), "95", created_at=an_hour_ago)]
    result = plan(state, observed(complete=False), records, NOW, scheduler="slurm")
    assert causes(result)["train"] == ("no-op", Cause.OBSERVATION_INCOMPLETE)


def test_refused_submission_is_retried_as_a_plain_submit() -> None:
    state = desired(run("train"))
    records = [record("train", hash_of(state, "train"), None, status=SubmissionStatus.REFUSED)]
    result = plan(state, observed(complete=False), records, NOW, scheduler="slurm")
    assert kinds(result)["train"][0] == "submit"


def test_targets_take_their_upstreams_and_skip_pruning() -> None:
    state = desired(run("prep"), run("train", "prep"), run("other"))
    jobs = observed(job("gone", "a" * 16, S.RUNNING, "40"))
    result = plan(
        state, jobs, [record("gone", "a" * 16, "40")], NOW, scheduler="slurm", targets=["train"]
    )
    assert [a.target for a in result.actions] == ["prep", "train"]


def test_fingerprint_follows_the_observed_state() -> None:
    state = desired(run("train"))
    digest = hash_of(state, "train")
    pending = plan(
        state, observed(job("train", digest, S.PENDING, "1")), [], NOW, scheduler="slurm"
    )
    running = plan(
        state, observed(job("train", digest, S.RUNNING, "1")), [], NOW, scheduler="slurm"
    )
    again = plan(state, observed(job("train", digest, S.PENDING, "1")), [], NOW, scheduler="slurm")
    assert pending.fingerprint != running.fingerprint
    assert pending.fingerprint == again.fingerprint


def test_a_just_submitted_job_missing_from_both_views_is_not_resubmitted() -> None:
    state = desired(run("train"))
    records = [record("train", hash_of(state, "train"), "99")]
    result = plan(state, observed(), records, NOW, scheduler="slurm")
    assert causes(result)["train"] == ("no-op", Cause.NOT_SEEN_YET)
    later = plan(state, observed(), records, NOW + timedelta(minutes=11), scheduler="slurm")
    assert kinds(later)["train"][0] == "submit"


def test_runs_waiting_for_unseen_jobs_are_counted_and_never_called_a_match() -> None:
    from reconciler.report.plan import summary

    state = desired(run("a"), run("b"))
    records = [record("a", hash_of(state, "a"), "98"), record("b", hash_of(state, "b"), "99")]
    result = plan(state, observed(), records, NOW, scheduler="slurm")
    assert [a.unseen_job for a in result.actions] == ["98", "99"]
    assert (result.has_changes, result.waiting_unseen) == (False, 2)
    assert summary(result) == (
        "No changes to the cluster; 2 runs wait for jobs the scheduler does not show yet."
    )


def test_a_journaled_id_slurm_shows_with_another_tag_is_lost_at_once() -> None:
    # slurmctld was killed after accepting a's job 3127, forgot it, and gave 3127 to b.
    state = desired(run("a"), run("b"))
    records = [record("a", hash_of(state, "a"), "3127"), record("b", hash_of(state, "b"), "3127")]
    b_job = job("b", hash_of(state, "b"), S.PENDING, "3127")
    jobs = observed(b_job).model_copy(update={"reused_ids": {"3127": b_job.tag.format()}})
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert causes(result)["a"] == ("submit", Cause.JOB_LOST)
    assert kinds(result)["a"][1].endswith(f"Slurm now shows that id as {b_job.tag.format()}")
    assert kinds(result)["b"][0] == "no-op" and result.waiting_unseen == 0


def _ok(
    name: str, digest: str, job_id: str, inputs: dict[str, str | None] | None = None
) -> SubmissionRecord:
    base = record(name, digest, job_id, final=Health.SUCCEEDED)
    return replace(base, input_versions=inputs or {})


def test_a_missing_output_makes_the_run_resubmit() -> None:
    from reconciler.engine.plan import FileState

    state = desired(run("prep"))
    records = [_ok("prep", hash_of(state, "prep"), "10")]
    files = FileState(outputs={("prep", "out"): None})
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=files)
    assert causes(result)["prep"] == ("submit", Cause.OUTPUT_MISSING)


def test_changed_input_makes_downstream_outdated_and_identical_one_does_not() -> None:
    from reconciler.engine.plan import FileState

    state = desired(run("prep"), run("train", "prep"))
    records = [
        _ok("prep", hash_of(state, "prep"), "10"),
        _ok("train", hash_of(state, "train"), "11", {"in_prep": "v1"}),
    ]
    same = FileState(outputs={("prep", "out"): "v1", ("train", "out"): "m1"})
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=same)
    assert not result.has_changes

    changed = FileState(outputs={("prep", "out"): "v2", ("train", "out"): "m1"})
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=changed)
    assert causes(result)["train"] == ("submit", Cause.INPUTS_CHANGED)
    assert kinds(result)["train"][1] == "input in_prep (prep.out) changed since job 11 read it"


def test_a_missing_output_shows_no_diff_of_an_older_spec_change() -> None:
    """The spec changed long ago and a job of the new spec succeeded: the old edit does
    not explain why the run is submitted now."""
    from reconciler.engine.plan import FileState

    old = run("prep", resources={"cpus": 1})
    new = run("prep", resources={"cpus": 2})
    before, state = desired(old), desired(new)
    records = [
        record("prep", hash_of(before, "prep"), "9", spec=old, final=Health.SUCCEEDED),
        _ok("prep", hash_of(state, "prep"), "10"),
    ]
    files = FileState(outputs={("prep", "out"): None})
    (action,) = plan(state, observed(), records, NOW, scheduler="slurm", files=files).actions
    assert (action.kind, action.cause) == (ActionKind.SUBMIT, Cause.OUTPUT_MISSING)
    assert action.changes == ()


def test_while_an_upstream_reruns_its_downstream_may_rerun_after_it() -> None:
    """Its input is judged once the upstream has rerun; until then it is queued behind
    it (it used to be judged on a later pass, one level of the DAG per pass)."""
    from reconciler.engine.plan import FileState

    state = desired(run("prep"), run("train", "prep"))
    records = [
        _ok("prep", hash_of(state, "prep"), "10"),
        _ok("train", hash_of(state, "train"), "11", {"in_prep": "v1"}),
    ]
    files = FileState(outputs={("prep", "out"): None, ("train", "out"): "m1"})
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=files)
    assert causes(result)["prep"] == ("submit", Cause.OUTPUT_MISSING)
    assert causes(result)["train"] == ("may rerun", Cause.UPSTREAM_RERUN)
    assert kinds(result)["train"][1] == "after prep (if its output changes)"
    (train,) = (a for a in result.actions if a.target == "train")
    assert train.after == ("prep",) and train.skip_check is None  # prep.out: fingerprint


def test_completed_without_outputs_counts_as_a_failed_attempt() -> None:
    state = desired(run("prep"))
    digest = hash_of(state, "prep")
    jobs = observed(job("prep", digest, S.COMPLETED, "10"))
    judged = record(
        "prep", digest, "10", final=Health.FAILED, reason="completed without outputs: out"
    )
    result = plan(state, jobs, [judged], NOW, scheduler="slurm")
    assert causes(result)["prep"] == ("no-op", Cause.RETRIES_EXHAUSTED)


def test_retries_count_only_since_the_last_success() -> None:
    from reconciler.engine.plan import FileState

    state = desired(run("prep", retries=1))
    digest = hash_of(state, "prep")
    records = [
        record("prep", digest, "5", final=Health.FAILED, exit_code=1),
        _ok("prep", digest, "6"),
        record("prep", digest, "7", final=Health.FAILED, exit_code=1),
    ]
    files = FileState(outputs={("prep", "out"): None})
    result = plan(state, observed(), records, NOW, scheduler="slurm", files=files)
    assert causes(result)["prep"] == ("retry", Cause.RETRY)
    assert kinds(result)["prep"][1] == "attempt 2 of 2: job 7 failed (exit 1)"


def test_sync_status_per_run() -> None:
    from reconciler.engine.plan import FileState
    from reconciler.engine.plan.actions import SyncStatus

    before = desired(run("changed", command="v1"))
    state = desired(run("fresh"), run("done"), run("gone-output"), run("changed", command="v2"))
    records = [
        _ok("done", hash_of(state, "done"), "1"),
        _ok("gone-output", hash_of(state, "gone-output"), "2"),
        _ok("changed", hash_of(before, "changed"), "3"),
    ]
    files = FileState(outputs={("gone-output", "out"): None, ("done", "out"): "x"})
    jobs = observed(job("orphaned", "d" * 16, S.RUNNING, "4"))
    result = plan(
        state,
        jobs,
        [*records, record("orphaned", "d" * 16, "4")],
        NOW,
        scheduler="slurm",
        files=files,
    )
    sync = {a.target: a.sync for a in result.actions}
    assert sync == {
        "fresh": SyncStatus.NEVER_RUN,
        "done": SyncStatus.CURRENT,
        "gone-output": SyncStatus.MISSING,
        "changed": SyncStatus.OUTDATED,
        "orphaned": SyncStatus.ORPHAN,
    }


def _het_job(
    digest: str, job_id: str, rows: Sequence[tuple[str, int | None, str | None, S]]
) -> ObservedJob:
    from reconciler.scheduler.base import JobRecord
    from reconciler.scheduler.tag import Tag

    tag = Tag(project="p", deployment="0123456789ab", kind="run", name="het", spec_hash=digest)
    records = tuple(
        JobRecord(
            job_id=shown,
            top_id=job_id,
            het_offset=offset,
            step=step,
            tag=tag if step is None else None,
            state=state,
            exit_code=1 if state is S.FAILED else 0,
            source="sacct",
        )
        for shown, offset, step, state in rows
    )
    return ObservedJob(job_id=job_id, tag=tag, rows=records)


HET = {"resources": {"components": [{"partition": "cpu"}, {"partition": "gpu", "gpus": 2}]}}


def test_a_failed_step_of_one_component_tears_the_het_job_down() -> None:
    state = desired(run("het", **HET))
    digest = hash_of(state, "het")
    broken = _het_job(
        digest,
        "40",
        [
            ("40+0", 0, None, S.RUNNING),
            ("40+0.0", 0, "0", S.RUNNING),
            ("40+1", 1, None, S.RUNNING),
            ("40+1.0", 1, "0", S.FAILED),
        ],
    )
    result = plan(state, observed(broken), [record("het", digest, "40")], NOW, scheduler="slurm")
    teardown, decision = result.actions
    assert (teardown.kind, teardown.job_ids) == (ActionKind.TEARDOWN, ("40",))
    assert teardown.cause is Cause.COMPONENT_FAILED
    assert (
        teardown.reason
        == "step 40+1.0 failed (exit 1) while the job still holds its other components"
    )
    assert decision.kind is ActionKind.NOOP  # resubmitting waits for the teardown to finish
    assert result.summary == "Plan: 0 to submit, 0 to replace, 0 to cancel, 1 to tear down."


def test_a_step_that_ended_well_or_teardown_none_leaves_the_job_alone() -> None:
    rows = [
        ("41+0", 0, None, S.RUNNING),
        ("41+1", 1, None, S.RUNNING),
        ("41+1.0", 1, "0", S.COMPLETED),
    ]
    state = desired(run("het", **HET))
    finished_step = _het_job(hash_of(state, "het"), "41", rows)
    result = plan(
        state,
        observed(finished_step),
        [record("het", hash_of(state, "het"), "41")],
        NOW,
        scheduler="slurm",
    )
    assert not result.has_changes

    opted_out = desired(run("het", teardown="none", **HET))
    failing = _het_job(hash_of(opted_out, "het"), "42", [*rows[:2], ("42+1.0", 1, "0", S.FAILED)])
    result = plan(
        opted_out,
        observed(failing),
        [record("het", hash_of(opted_out, "het"), "42")],
        NOW,
        scheduler="slurm",
    )
    assert not result.has_changes


def test_coupled_runs_go_down_together_and_waiting_is_noted() -> None:
    state = desired(run("server", coupled_with=["client"]), run("client"))
    server, client = hash_of(state, "server"), hash_of(state, "client")
    records = [record("server", server, "50"), record("client", client, "51")]
    down = observed(
        job("server", server, S.RUNNING, "50"), job("client", client, S.FAILED, "51", exit_code=3)
    )
    result = plan(state, down, records, NOW, scheduler="slurm")
    (teardown,) = [a for a in result.actions if a.kind is ActionKind.TEARDOWN]
    assert (teardown.target, teardown.job_ids) == ("server", ("50",))
    assert teardown.cause is Cause.PARTNER_FAILED
    assert teardown.reason == "coupled run client ended failed (job 51)"

    queued = observed(
        job("server", server, S.RUNNING, "50"), job("client", client, S.PENDING, "51")
    )
    result = plan(state, queued, records, NOW, scheduler="slurm")
    assert not result.has_changes
    assert any("client still waits in the queue (job 51)" in note for note in result.notes)


def test_no_teardown_on_an_incomplete_observation() -> None:
    state = desired(run("server", coupled_with=["client"]), run("client"))
    server, client = hash_of(state, "server"), hash_of(state, "client")
    down = observed(
        job("server", server, S.RUNNING, "50"),
        job("client", client, S.FAILED, "51"),
        complete=False,
    )
    result = plan(
        state,
        down,
        [record("server", server, "50"), record("client", client, "51")],
        NOW,
        scheduler="slurm",
    )
    assert not any(a.kind is ActionKind.TEARDOWN for a in result.actions)


class _NoGpus:
    """A cluster without GPUs, for the planner's fit hook."""

    def why_not(self, resources: object) -> str | None:
        shapes = getattr(resources, "shapes", ())
        return "no node has GPUs" if any(s.gpus for s in shapes) else None


def test_a_run_that_fits_nowhere_is_refused_and_blocks_its_downstream() -> None:
    state = desired(run("train", resources={"gpus": "A100:8"}), run("eval", "train"))
    result = plan(state, observed(), [], NOW, scheduler="slurm", fit=_NoGpus())
    assert causes(result)["train"] == ("blocked", Cause.DOES_NOT_FIT)
    assert causes(result)["eval"] == ("blocked", Cause.UPSTREAM_FAILED)
    assert kinds(result)["train"][1] == "does not fit the cluster: no node has GPUs"
    assert not result.has_changes


def test_a_current_run_is_not_fit_checked() -> None:
    state = desired(run("train", resources={"gpus": "A100:8"}))
    records = [_ok("train", hash_of(state, "train"), "10")]
    result = plan(state, observed(), records, NOW, scheduler="slurm", fit=_NoGpus())
    assert kinds(result)["train"][0] == "no-op"


def test_a_het_submission_shows_each_components_resources() -> None:
    from reconciler.report.plan import as_markdown, as_text

    state = desired(run("het", **HET))
    (action,) = plan(state, observed(), [], NOW, scheduler="slurm").actions
    assert action.details == ("component 0: partition cpu", "component 1: gpus 2, partition gpu")
    result = plan(state, observed(), [], NOW, scheduler="slurm")
    assert "component 1: gpus 2, partition gpu" in as_text(result)
    assert "component 0: partition cpu<br>component 1: gpus 2, partition gpu" in as_markdown(result)


def test_a_partner_that_died_before_the_job_was_submitted_does_not_tear_it_down() -> None:
    state = desired(run("server", coupled_with=["client"]), run("client"))
    server, client = hash_of(state, "server"), hash_of(state, "client")
    early, late = NOW - timedelta(minutes=10), NOW - timedelta(minutes=1)
    jobs = observed(
        job("client", client, S.CANCELLED, "51", end=early),
        job("server", server, S.RUNNING, "60", submit=late),
    )
    records = [record("server", server, "60"), record("client", client, "51")]
    result = plan(state, jobs, records, NOW, scheduler="slurm")
    assert not any(a.kind is ActionKind.TEARDOWN for a in result.actions)


def test_completed_without_outputs_is_never_run_not_outdated() -> None:
    from reconciler.engine.plan.actions import SyncStatus

    state = desired(run("liar"))
    digest = hash_of(state, "liar")
    jobs = observed(job("liar", digest, S.COMPLETED, "10"))
    judged = record(
        "liar",
        digest,
        "10",
        final=Health.FAILED,
        reason="completed without its declared outputs: out",
        ending=EndingKind.NO_OUTPUTS,
    )
    (action,) = plan(state, jobs, [judged], NOW, scheduler="slurm").actions
    assert action.sync is SyncStatus.NEVER_RUN


@pytest.mark.parametrize(
    ("state", "reason", "said"),
    [
        (S.TIMEOUT, "TimeLimit", "attempt 2 of 2: job 10 timed out"),
        (S.NODE_FAIL, None, "attempt 2 of 2: job 10 node failed"),
        (S.OUT_OF_MEMORY, None, "attempt 2 of 2: job 10 out of memory"),
        (S.PREEMPTED, None, "attempt 2 of 2: job 10 preempted"),
        (S.DEADLINE, None, "attempt 2 of 2: job 10 deadline passed"),
        (S.FAILED, "NonZeroExitCode", "attempt 2 of 2: job 10 failed"),
    ],
)
def test_a_retry_says_how_the_job_ended_in_slurms_terms(
    state: S, reason: str | None, said: str
) -> None:
    state_ = desired(run("a", retries=1))
    jobs = observed(job("a", hash_of(state_, "a"), state, "10", reason=reason))
    result = plan(state_, jobs, [record("a", hash_of(state_, "a"), "10")], NOW, scheduler="slurm")
    assert kinds(result)["a"] == ("retry", said)


@pytest.mark.parametrize(
    ("state", "reason", "said"),
    [
        (S.PENDING, "JobHeldUser", "in progress: job 10 held (JobHeldUser)"),
        (S.REQUEUE_HOLD, "JobHeldAdmin", "in progress: job 10 held after requeue (JobHeldAdmin)"),
        (S.SUSPENDED, None, "in progress: job 10 suspended"),
        (S.PENDING, "Priority", "in progress: job 10 pending"),
    ],
)
def test_a_job_in_progress_says_when_it_is_held_or_suspended(
    state: S, reason: str | None, said: str
) -> None:
    state_ = desired(run("a"))
    jobs = observed(job("a", hash_of(state_, "a"), state, "10", reason=reason))
    result = plan(state_, jobs, [record("a", hash_of(state_, "a"), "10")], NOW, scheduler="slurm")
    assert kinds(result)["a"] == ("no-op", said)


def test_retrying_a_job_held_after_its_launch_failed_cancels_it_first() -> None:
    """Slurm requeued it and holds it: it would wait for ever, and run beside its retry
    if someone released it later."""
    from reconciler.report.plan import as_text

    state = desired(run("a", retries=1))
    held = job("a", hash_of(state, "a"), S.PENDING, "10", reason="launch failed requeued held")
    records = [record("a", hash_of(state, "a"), "10")]
    result = plan(state, observed(held), records, NOW, scheduler="slurm")
    (action,) = result.actions
    assert (action.kind.value, action.job_ids) == ("retry", ("10",))
    assert action.reason == "attempt 2 of 2: job 10 held after its launch failed"
    assert "(cancels job 10)" in as_text(result)
    unsure = plan(state, observed(held, complete=False), records, NOW, scheduler="slurm")
    assert causes(unsure)["a"] == ("no-op", Cause.OBSERVATION_INCOMPLETE)


def test_retrying_a_job_held_in_special_exit_cancels_it_first() -> None:
    from reconciler.report.plan import as_text

    state = desired(run("a", retries=1))
    held = job("a", hash_of(state, "a"), S.SPECIAL_EXIT, "10", reason="job requeued in held state")
    records = [record("a", hash_of(state, "a"), "10")]
    result = plan(state, observed(held), records, NOW, scheduler="slurm")
    (action,) = result.actions
    assert (action.kind.value, action.job_ids) == ("retry", ("10",))
    assert action.reason == (
        "attempt 2 of 2: job 10 held in special exit (job requeued in held state)"
    )
    assert "(cancels job 10)" in as_text(result)
    unsure = plan(state, observed(held, complete=False), records, NOW, scheduler="slurm")
    assert causes(unsure)["a"] == ("no-op", Cause.OBSERVATION_INCOMPLETE)
