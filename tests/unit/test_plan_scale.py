"""Planning stays linear: counted work, not time.

A plan, its status rows and the judging of finished jobs over 2,000 runs visit each observed job,
journal record and desired run a bounded number of times. Every collection they are given
counts the items it hands out; a loop that scans all jobs, records or runs for each run
(once 10^8 iterations at 10,000 runs) hands out millions and fails here, on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from reconciler.engine.plan import plan
from reconciler.engine.settle import as_recorded, judge
from reconciler.engine.status import allocation_statuses, run_statuses
from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.spec.desired import Desired, DesiredRun
from reconciler.state.records import SubmissionRecord
from tests.planning import NOW, desired, hash_of, job, record, run

RUNS = 2000
# Each pass over everything hands out every item once; a plan, status and settle take
# about four between them. A scan of everything per run makes it thousands (50 million
# visits here before jobs, records and partners were indexed).
VISITS_PER_ITEM = 10


class Visits:
    count = 0


class CountedJobs(tuple[ObservedJob, ...]):
    def __iter__(self) -> Iterator[ObservedJob]:
        for item in super().__iter__():
            Visits.count += 1
            yield item


class CountedRecords(list[SubmissionRecord]):
    def __iter__(self) -> Iterator[SubmissionRecord]:
        for item in super().__iter__():
            Visits.count += 1
            yield item

    def __reversed__(self) -> Iterator[SubmissionRecord]:
        for item in super().__reversed__():
            Visits.count += 1
            yield item


class CountedRuns(dict[str, DesiredRun]):
    def __iter__(self) -> Iterator[str]:
        for key in super().__iter__():
            Visits.count += 1
            yield key

    def values(self) -> Any:
        return (self[key] for key in self)

    def items(self) -> Any:
        return ((key, self[key]) for key in self)


def sweep() -> tuple[Desired, Observation, CountedRecords]:
    """A prepare run and RUNS - 1 runs reading it; every tenth pair coupled, every tenth
    run heterogeneous; a quarter each succeeded, running, outdated, and never run."""
    specs = [run("prep")]
    for i in range(1, RUNS):
        fields: dict[str, Any] = {}
        if i % 10 == 5:
            fields["resources"] = {"components": [{"cpus": 1}, {"cpus": 1}]}
        if i % 20 == 2:
            fields["coupled_with"] = [f"r{i - 1}"]
        specs.append(run(f"r{i}", "prep", **fields))
    state = desired(*specs)
    jobs: list[ObservedJob] = []
    records: list[SubmissionRecord] = []
    for i, name in enumerate(state.runs):
        job_id, current = str(1000 + i), hash_of(state, name)
        if i % 4 == 0:
            jobs.append(job(name, current, S.COMPLETED, job_id))
            records.append(record(name, current, job_id, final=Health.SUCCEEDED))
        elif i % 4 == 1:
            jobs.append(job(name, current, S.RUNNING, job_id))
            records.append(record(name, current, job_id))
        elif i % 4 == 2:
            jobs.append(job(name, "0" * 16, S.COMPLETED, job_id))
            records.append(record(name, "0" * 16, job_id, final=Health.SUCCEEDED))
    counted = Desired(
        state.project,
        state.root,
        state.commit,
        CountedRuns(state.runs),
        state.allocations,
        state.upstreams,
    )
    observation = Observation.model_construct(
        taken_at=NOW, jobs=CountedJobs(jobs), complete=True, problems=(), skipped=()
    )
    return counted, observation, CountedRecords(records)


def test_plan_status_and_settle_visit_each_job_record_and_run_a_bounded_number_of_times() -> None:
    state, observation, records = sweep()
    items = len(state.runs) + len(observation.jobs) + len(records)
    Visits.count = 0
    result = plan(state, observation, records, NOW, scheduler="slurm")
    run_statuses(state, result, observation, records)
    allocation_statuses(state, result, observation, records)
    as_recorded(records, judge(state, observation, records))
    assert len(result.actions) == RUNS
    assert Visits.count <= VISITS_PER_ITEM * items, (
        f"{Visits.count} visits for {items} jobs, records and runs: "
        "some pass scans everything once per run"
    )


def test_the_counting_sees_a_scan_per_run() -> None:
    """The guard counts what a quadratic loop does: one scan of the jobs per run."""
    state, observation, _ = sweep()
    Visits.count = 0
    for name in state.runs:
        any(job.tag.name == name for job in observation.jobs)
    assert Visits.count > VISITS_PER_ITEM * 3 * RUNS


def test_the_job_index_follows_a_copy_with_other_jobs() -> None:
    """An observation cut to one deployment's share is a model_copy with other jobs: its
    lookups must not answer from the index of the whole."""
    state, observation, _ = sweep()
    name = next(iter(state.runs))
    assert observation.find(state.project.project, name)  # the index of the whole is built
    share = observation.model_copy(update={"jobs": ()})
    assert share.find(state.project.project, name) == ()
    assert observation.find(state.project.project, name)
