"""A plan's next look (engine/plan/requeue.py): the earliest moment the same observation
would be planned otherwise, from each source on plain values, through the planner."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from reconciler.desired.desired import DesiredAllocation, Location, effective_allocation, spec_hash
from reconciler.desired.models import Allocation, Project
from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import LookKind, NextLook, Plan
from reconciler.scheduler.base import JobRecord, Launch, Observation, ObservedJob
from reconciler.scheduler.states import SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.state.records import (
    UNSEEN_GRACE,
    SetupRecord,
    SubmissionRecord,
    SubmissionStatus,
)
from tests.planning import NOW, PROJECT, desired, hash_of, job, record, run

RUNNING, PENDING = SlurmState.RUNNING, SlurmState.PENDING
MINUTE = timedelta(minutes=1)


def allocation(name: str = "warm", **fields: Any) -> DesiredAllocation:
    data: dict[str, Any] = {"kind": "Allocation", "name": name, "time_limit": "1h"}
    data.update(fields)
    project = Project.model_validate({"project": PROJECT})
    spec = effective_allocation(Allocation.model_validate(data), project)
    return DesiredAllocation(spec, Location("specs/w.yaml", 1), spec_hash(spec))


WARM = allocation()  # min_remaining: 5m
IDLE = allocation(idle_release="30m")
SET_UP = allocation(setup=["pip install x"])


def alloc_tag(of: DesiredAllocation) -> Tag:
    return Tag(
        project=PROJECT, deployment="0123456789ab", kind="alloc", name=of.name,
        spec_hash=of.spec_hash,
    )  # fmt: skip


def alloc_job(
    job_id: str,
    of: DesiredAllocation = WARM,
    left: timedelta | None = 50 * MINUTE,
    started: timedelta = 20 * MINUTE,
    steps: tuple[JobRecord, ...] = (),
) -> ObservedJob:
    """A running job of the allocation with `left` to live, started `started` ago."""
    own = alloc_tag(of)
    row = JobRecord(
        job_id=job_id, top_id=job_id, tag=own, state=RUNNING, nodes="cpu1",
        start=NOW - started, time_left=left, source="squeue",
    )  # fmt: skip
    return ObservedJob(job_id=job_id, tag=own, rows=(row, *steps))


def known(*jobs: ObservedJob) -> list[SubmissionRecord]:
    """The journal's records of jobs it has seen (none of them in a grace)."""
    return [_seen(index + 1, found) for index, found in enumerate(jobs)]


def _seen(number: int, found: ObservedJob) -> SubmissionRecord:
    return SubmissionRecord(
        id=number, project=PROJECT, kind=found.tag.kind, name=found.tag.name,
        spec_hash=found.tag.spec_hash, commit=None, job_id=found.job_id,
        status=SubmissionStatus.SUBMITTED, created_at=NOW - 30 * MINUTE,
        updated_at=NOW - 30 * MINUTE,
    )  # fmt: skip


def planned(
    state: Any,
    *jobs: ObservedJob,
    records: list[SubmissionRecord] | None = None,
    **kw: Any,
) -> Plan:
    observation = Observation(
        taken_at=NOW, jobs=jobs, complete=True, launches=kw.pop("launches", ())
    )
    journal = known(*jobs) if records is None else records
    return plan(state, observation, journal, NOW, scheduler="slurm", **kw)


def look(result: Plan) -> tuple[timedelta, LookKind, str] | None:
    """The plan's next look as (time after NOW, kind, target)."""
    found = result.next_look
    return None if found is None else (found.at - NOW, found.kind, found.target)


# -- each source --------------------------------------------------------------------------


def test_nothing_due_without_allocations_graces_or_limits() -> None:
    state = desired(run("a"))
    done = job("a", hash_of(state, "a"), SlurmState.COMPLETED, "7")
    assert planned(state, done).next_look is None


def test_a_ready_allocation_is_looked_at_when_it_gets_down_to_min_remaining() -> None:
    state = desired(run("a"), allocations=(WARM,))
    result = planned(state, alloc_job("12", left=50 * MINUTE))
    assert look(result) == (45 * MINUTE, LookKind.RENEWAL, "warm")
    assert result.next_look is not None
    assert result.next_look.reason == (
        "allocation job 12 of warm is down to 5m (min_remaining): renewed"
    )


def test_the_renewal_counts_from_when_the_cluster_was_observed() -> None:
    state = desired(run("a"), allocations=(WARM,))
    later = Observation(taken_at=NOW + 2 * MINUTE, jobs=(alloc_job("12"),), complete=True)
    result = plan(state, later, known(alloc_job("12")), NOW, scheduler="slurm")
    assert look(result) == (47 * MINUTE, LookKind.RENEWAL, "warm")


def test_at_the_renewal_the_planner_renews() -> None:
    """The look is right: at that time, observed again, the job is expiring."""
    state = desired(run("a"), allocations=(WARM,))
    at = planned(state, alloc_job("12", left=5 * MINUTE))
    assert [a.kind.value for a in at.actions if a.target == "warm"] == ["replace", "cancel"]


def test_an_idle_allocation_is_looked_at_when_idle_release_is_reached() -> None:
    state = desired(run("a"), allocations=(IDLE,))
    idle_10m = alloc_job("12", of=IDLE, started=10 * MINUTE)
    result = planned(state, idle_10m)
    assert look(result) == (20 * MINUTE, LookKind.IDLE_RELEASE, "warm")
    assert result.next_look is not None
    assert "has been idle 30m (idle_release): released" in result.next_look.reason


def test_no_idle_look_for_an_allocation_a_run_starts_in_now() -> None:
    state = desired(run("a", allocation="warm"), allocations=(IDLE,))
    result = planned(state, alloc_job("12", of=IDLE, started=10 * MINUTE))
    assert [a.allocation_job for a in result.actions if a.target == "a"] == ["12"]
    assert look(result) == (45 * MINUTE, LookKind.RENEWAL, "warm")  # its renewal only


def test_a_job_not_shown_yet_is_looked_at_when_its_grace_ends() -> None:
    state = desired(run("a"))
    sent = record("a", hash_of(state, "a"), "41", created_at=NOW - 3 * MINUTE)
    result = planned(state, records=[sent])
    assert look(result) == (UNSEEN_GRACE - 3 * MINUTE, LookKind.GRACE, "a")
    assert result.next_look is not None
    assert (
        result.next_look.reason == "job 41 of run a is taken as lost if still not shown after 10m"
    )
    # and once the grace is over, the run is submitted again, with nothing due
    after = plan(state, Observation(taken_at=NOW, jobs=(), complete=True), [sent],
                 NOW + 7 * MINUTE, scheduler="slurm")  # fmt: skip
    assert [a.kind.value for a in after.actions] == ["submit"]
    assert after.next_look is None


def test_a_step_not_listed_yet_is_looked_at_when_its_grace_ends() -> None:
    state = desired(run("a", allocation="warm"), allocations=(WARM,))
    started = record(
        "a", hash_of(state, "a"), None, status=SubmissionStatus.INTENT,
        created_at=NOW - 2 * MINUTE,
    )  # fmt: skip
    ready = alloc_job("12")
    result = planned(state, ready, records=[*known(ready), started])
    assert [a.outcome for a in result.actions if a.target == "a"] == ["waiting"]
    assert look(result) == (UNSEEN_GRACE - 2 * MINUTE, LookKind.GRACE, "a")


def test_an_allocation_job_not_listed_yet_is_looked_at_when_its_grace_ends() -> None:
    state = desired(run("a"), allocations=(WARM,))
    made = SubmissionRecord(
        id=1, project=PROJECT, kind="alloc", name="warm", spec_hash=WARM.spec_hash,
        commit=None, job_id="12", status=SubmissionStatus.SUBMITTED,
        created_at=NOW - MINUTE, updated_at=NOW - MINUTE,
    )  # fmt: skip
    result = planned(state, records=[made])
    assert look(result) == (UNSEEN_GRACE - MINUTE, LookKind.GRACE, "warm")


def test_a_setup_not_listed_yet_is_looked_at_when_its_grace_ends() -> None:
    state = desired(run("a"), allocations=(SET_UP,))
    setup = SetupRecord(
        id=1, project=PROJECT, name="warm", spec_hash=SET_UP.spec_hash,
        allocation_job="12", step_id=None, created_at=NOW - 4 * MINUTE, updated_at=NOW,
    )  # fmt: skip
    result = planned(state, alloc_job("12", of=SET_UP), setups=[setup])
    assert look(result) == (UNSEEN_GRACE - 4 * MINUTE, LookKind.GRACE, "warm")
    # a setup in a job no longer there is not waited for
    gone = planned(state, alloc_job("13", of=SET_UP), setups=[setup])
    assert gone.next_look is not None and gone.next_look.kind is not LookKind.GRACE


def test_a_running_job_is_looked_at_when_it_reaches_its_time_limit() -> None:
    state = desired(run("a"))
    running = job("a", hash_of(state, "a"), RUNNING, "7")
    with_limit = replace(running.rows[0], time_left=20 * MINUTE)
    result = planned(state, running.model_copy(update={"rows": (with_limit,)}))
    assert look(result) == (20 * MINUTE, LookKind.TIME_LIMIT, "a")
    assert result.next_look is not None
    assert result.next_look.reason == "job 7 of run a reaches its time limit"


@pytest.mark.parametrize(
    ("state", "left"),
    [
        (SlurmState.SUSPENDED, 20 * MINUTE),  # its time left stands still
        (RUNNING, timedelta()),  # past its limit: Slurm is ending it
        (RUNNING, None),  # no limit shown
        (PENDING, 20 * MINUTE),  # not started: its limit has not begun
    ],
)
def test_no_time_limit_look_for_a_job_not_counting_down(
    state: SlurmState, left: timedelta | None
) -> None:
    desired_state = desired(run("a"))
    found = job("a", hash_of(desired_state, "a"), state, "7")
    row = replace(found.rows[0], time_left=left)
    assert planned(desired_state, found.model_copy(update={"rows": (row,)})).next_look is None


# -- the earliest wins ------------------------------------------------------------------


def test_the_earliest_source_is_the_next_look() -> None:
    state = desired(run("a"), run("b"), allocations=(IDLE,))
    running = job("b", hash_of(state, "b"), RUNNING, "7")
    limited = running.model_copy(
        update={"rows": (replace(running.rows[0], time_left=30 * MINUTE),)}
    )
    sent = record("a", hash_of(state, "a"), "41", created_at=NOW - 5 * MINUTE)
    idle = alloc_job("12", of=IDLE, started=15 * MINUTE)
    result = planned(state, idle, limited, records=[*known(idle, limited), sent])
    # grace in 5m, idle release in 15m, time limit in 30m, renewal in 45m
    assert look(result) == (5 * MINUTE, LookKind.GRACE, "a")


def test_a_look_already_due_is_not_the_next_one() -> None:
    """What is due now this plan has decided: only later moments count."""
    state = desired(run("a"), allocations=(IDLE,))
    idle = alloc_job("12", of=IDLE, started=31 * MINUTE)
    result = planned(state, idle)
    assert [a.kind.value for a in result.actions if a.target == "warm"] == ["cancel"]
    assert result.next_look is None  # released: neither idle nor renewal is due


def test_the_next_look_reads_back_from_json() -> None:
    state = desired(run("a"), allocations=(WARM,))
    result = planned(state, alloc_job("12"))
    assert isinstance(result.next_look, NextLook)
    again = Plan.model_validate_json(result.model_dump_json())
    assert again == result
    assert result.model_dump(mode="json")["next_look"]["kind"] == "renewal"


def test_a_launch_held_back_keeps_its_step_waiting_past_the_grace() -> None:
    """srun holding the step back: waited for however long; the grace end is then only
    a look that finds it so."""
    state = desired(run("a", allocation="warm"), allocations=(WARM,))
    started = record(
        "a", hash_of(state, "a"), None, status=SubmissionStatus.INTENT,
        created_at=NOW - 20 * MINUTE,
    )  # fmt: skip
    ready = alloc_job("12")
    tag = Tag(
        project=PROJECT, deployment="0123456789ab", kind="run", name="a",
        spec_hash=hash_of(state, "a"),
    )  # fmt: skip
    result = planned(
        state, ready, records=[*known(ready), started],
        launches=(Launch(allocation_id="12", tag=tag),),
    )  # fmt: skip
    assert [a.outcome for a in result.actions if a.target == "a"] == ["waiting"]
    assert look(result) == (45 * MINUTE, LookKind.RENEWAL, "warm")
