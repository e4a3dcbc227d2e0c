"""The local backend's state decisions, on plain tables of job facts. No processes."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.scheduler.local.decide import (
    Assessment,
    Cancel,
    Ending,
    Grant,
    JobFacts,
    Status,
    assess,
)
from reconciler.scheduler.states import SlurmState as S

T0 = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


def at(seconds: int) -> datetime:
    return T0 + timedelta(seconds=seconds)


def job(
    job_id: int,
    cpus: int = 1,
    after: tuple[int, ...] = (),
    *,
    started: int | None = None,
    ended: Ending | None = None,
    cancelled: Cancel | None = None,
    supervised: bool = True,
) -> JobFacts:
    return JobFacts(
        job_id=job_id,
        cpus=cpus,
        dependencies=after,
        submitted=at(0),
        started=None if started is None else at(started),
        ended=ended,
        cancelled=cancelled,
        supervised=supervised,
    )


def run(*jobs: JobFacts, cpus: int = 4) -> Assessment:
    return assess({facts.job_id: facts for facts in jobs}, cpus)


def states(assessment: Assessment) -> dict[int, tuple[S, str | None]]:
    return {job_id: (s.state, s.reason) for job_id, s in assessment.status.items()}


@pytest.mark.parametrize(
    ("facts", "expected"),
    [
        (job(1, started=1), Status(S.RUNNING)),
        (job(1, started=1, ended=Ending(at(5), 0)), Status(S.COMPLETED, None, at(5))),
        (
            job(1, started=1, ended=Ending(at(5), 3)),
            Status(S.FAILED, "NonZeroExitCode", at(5)),
        ),
        (job(1, started=1, ended=Ending(at(5), 0, signal=9)), Status(S.FAILED, None, at(5))),
        (
            job(1, started=1, ended=Ending(at(5), 0, signal=15, timed_out=True)),
            Status(S.TIMEOUT, "TimeLimit", at(5)),
        ),
        (
            job(1, started=1, ended=Ending(at(5), 0, signal=9, out_of_memory=True)),
            Status(S.OUT_OF_MEMORY, None, at(5)),
        ),
        (job(1, cancelled=Cancel(at(2), 0)), Status(S.CANCELLED, None, at(2))),
        # Cancelled while running: CANCELLED at once, ended when its processes are gone.
        (job(1, started=1, cancelled=Cancel(at(2), 0)), Status(S.CANCELLED, None, at(2))),
        (
            job(1, started=1, cancelled=Cancel(at(2), 0), ended=Ending(at(3), 0, 15)),
            Status(S.CANCELLED, None, at(3)),
        ),
        (job(1, started=1, supervised=False), Status(S.NODE_FAIL, "SupervisorLost")),
    ],
)
def test_a_jobs_own_facts_decide_its_state(facts: JobFacts, expected: Status) -> None:
    assert run(facts).status[1] == expected


def test_jobs_start_oldest_first_while_cpus_last() -> None:
    result = run(job(1, 2), job(2, 1), job(3, 1), job(4, 1), cpus=4)
    assert result.start == (1, 2, 3)
    assert states(result)[4] == (S.PENDING, "Resources")


def test_running_jobs_hold_their_cpus_and_a_big_job_blocks_the_queue_behind_it() -> None:
    result = run(job(1, 3, started=0), job(2, 2), job(3, 1), cpus=4)
    assert result.start == ()
    assert states(result) == {
        1: (S.RUNNING, None),
        2: (S.PENDING, "Resources"),
        3: (S.PENDING, "Priority"),  # fits, but would overtake job 2 for ever
    }


def test_a_cancelled_job_holds_its_cpus_until_its_processes_end() -> None:
    running_cancelled = job(1, 4, started=0, cancelled=Cancel(at(1), 0))
    assert run(running_cancelled, job(2), cpus=4).start == ()
    gone = job(1, 4, started=0, cancelled=Cancel(at(1), 0), ended=Ending(at(2), 0, 15))
    assert run(gone, job(2), cpus=4).start == (2,)


def test_a_lost_job_holds_no_cpus() -> None:
    assert run(job(1, 4, started=0, supervised=False), job(2), cpus=4).start == (2,)


def test_a_job_bigger_than_the_machine_waits_for_ever_without_holding_up_others() -> None:
    result = run(job(1, 5), job(2, 1), cpus=4)
    assert result.start == (2,)
    assert states(result)[1] == (S.PENDING, "PartitionConfig")


def test_afterok_waits_for_the_upstream_to_complete() -> None:
    waiting = run(job(1, started=0), job(2, after=(1,)))
    assert (waiting.start, states(waiting)[2]) == ((), (S.PENDING, "Dependency"))
    met = run(job(1, started=0, ended=Ending(at(4), 0)), job(2, after=(1,)))
    assert met.start == (2,)


@pytest.mark.parametrize(
    "upstream",
    [
        job(1, started=0, ended=Ending(at(4), 1)),
        job(1, started=0, ended=Ending(at(4), 0, timed_out=True)),
        job(1, cancelled=Cancel(at(1), 0)),
        job(1, started=0, cancelled=Cancel(at(1), 0)),
        job(1, started=0, supervised=False),
    ],
    ids=["failed", "timeout", "cancelled-pending", "cancelled-running", "lost"],
)
def test_a_dependent_of_an_upstream_that_ended_badly_is_cancelled_never_run(
    upstream: JobFacts,
) -> None:
    result = run(upstream, job(2, after=(1,)), job(3, after=(2,)), job(4, after=(1, 3)))
    assert result.start == ()
    assert result.cancel == (2, 3, 4)  # transitively, in one pass
    assert states(result)[2] == (S.PENDING, "DependencyNeverSatisfied")


def test_a_dependency_whose_record_is_gone_counts_as_failed() -> None:
    assert run(job(2, after=(1,))).cancel == (2,)


def test_dependency_cancelled_jobs_read_with_slurms_reason() -> None:
    cancelled = job(2, after=(1,), cancelled=Cancel(at(5), None, "DependencyNeverSatisfied"))
    assert run(job(1, started=0, ended=Ending(at(4), 1)), cancelled).status[2] == Status(
        S.CANCELLED, "DependencyNeverSatisfied", at(5)
    )


def test_final_means_nothing_can_change() -> None:
    assert job(1, cancelled=Cancel(at(1), 0)).final
    assert job(1, started=0, ended=Ending(at(1), 0)).final
    assert not job(1, started=0, cancelled=Cancel(at(1), 0)).final  # still to end


def task(job_id: int, array: int, cap: int | None, started: int | None = None) -> JobFacts:
    return replace(job(job_id, started=started), array_id=array, max_parallel=cap)


def test_an_array_runs_no_more_tasks_at_once_than_its_cap() -> None:
    assessment = run(task(1, 1, 2), task(2, 1, 2), task(3, 1, 2), task(4, 1, 2), cpus=8)
    assert assessment.start == (1, 2)
    assert states(assessment)[3] == (S.PENDING, "JobArrayTaskLimit")


def test_tasks_held_by_their_cap_do_not_hold_up_the_jobs_behind_them() -> None:
    running = task(1, 1, 1, started=0)
    assessment = run(running, task(2, 1, 1), job(3), cpus=4)
    assert states(assessment)[2] == (S.PENDING, "JobArrayTaskLimit")
    assert assessment.start == (3,)


def test_a_task_whose_processes_are_ending_still_counts_against_the_cap() -> None:
    stopping = replace(task(1, 1, 1, started=0), cancelled=Cancel(at(1), 0))
    assert run(stopping, task(2, 1, 1)).start == ()


def gpu_job(job_id: int, gpus: int, cpus: int = 1, *, holds: Grant | None = None) -> JobFacts:
    """A job asking ``gpus`` GPUs; running with ``holds`` when given."""
    return replace(job(job_id, cpus, started=None if holds is None else 1), gpus=gpus, grant=holds)


def test_gpu_jobs_are_handed_devices_no_running_job_holds() -> None:
    jobs = {
        1: gpu_job(1, 1, holds=Grant(gpus=("1",), cores=(0,))),
        2: gpu_job(2, 1),
        3: gpu_job(3, 2),
        4: gpu_job(4, 0),
    }
    assessment = assess(jobs, 8, gpus=("0", "1", "2"), cores=(0, 1, 2, 3))
    # Job 3 asks two GPUs where one is free: it waits, and so does job 4 behind it.
    assert states(assessment)[3] == (S.PENDING, "Resources")
    assert states(assessment)[4] == (S.PENDING, "Priority")
    assert assessment.start == (2,)
    assert assessment.grants[2] == Grant(gpus=("0",), cores=(1,))


def test_a_job_asking_more_gpus_than_there_are_waits_for_ever_and_holds_nobody_up() -> None:
    assessment = assess({1: gpu_job(1, 1), 2: gpu_job(2, 0)}, 4, gpus=())
    assert states(assessment)[1] == (S.PENDING, "PartitionConfig")
    assert assessment.start == (2,)
    assert assessment.grants[2].gpus == ()


def test_started_jobs_get_distinct_cores_then_the_least_held_then_none() -> None:
    busy = replace(job(1, 1, started=1), grant=Grant(cores=(0,)))
    jobs = {1: busy, 2: job(2, 1), 3: job(3, 2), 4: job(4, 3)}
    assessment = assess(jobs, 8, cores=(0, 1, 2))
    assert assessment.start == (2, 3, 4)
    # Core 0 is held: job 2 gets a free one; job 3 the free one left and then the one
    # held once only; job 4 asks as many as there are: all three, pinned.
    assert assessment.grants[2].cores == (1,)
    assert assessment.grants[3].cores == (0, 2)
    assert assessment.grants[4].cores == (0, 1, 2)
    # Asking more cores than the machine has: not pinned at all.
    wide = assess({5: job(5, 4)}, 8, cores=(0, 1, 2))
    assert wide.grants[5].cores == ()
