"""A journalled job, step or setup the scheduler does not list yet is waited for within
its grace (``records.within_grace``), then taken as lost (``records.lost_at``, when the
plan's next look is due): one rule, asked by the run's unseen job, its unlisted step and
an allocation's job and setup alike."""

from __future__ import annotations

from datetime import timedelta

from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import ActionKind
from reconciler.engine.plan.causes import Cause
from reconciler.state.records import UNSEEN_GRACE, lost_at, within_grace
from tests.planning import NOW, desired, hash_of, observed, record, run


def test_within_grace_ends_when_the_grace_has_passed() -> None:
    assert within_grace(NOW - UNSEEN_GRACE + timedelta(seconds=1), NOW)
    assert not within_grace(NOW - UNSEEN_GRACE, NOW)
    assert lost_at(NOW - UNSEEN_GRACE) == NOW  # when the next look is due (Plan.next_look)


def test_an_unseen_job_is_waited_for_within_its_grace_then_submitted_again() -> None:
    state = desired(run("a"))
    digest = hash_of(state, "a")
    for age, kind, cause in [
        (UNSEEN_GRACE - timedelta(seconds=1), ActionKind.NOOP, Cause.NOT_SEEN_YET),
        (UNSEEN_GRACE, ActionKind.SUBMIT, Cause.JOB_LOST),
    ]:
        records = [record("a", digest, "10", created_at=NOW - age)]
        (action,) = plan(state, observed(), records, NOW, scheduler="slurm").actions
        assert (action.kind, action.cause) == (kind, cause), age
