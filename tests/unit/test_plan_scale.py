"""Planning stays linear: counted work, not time.

A plan, its status rows and the judging of finished jobs over 2,000 runs visit each observed job,
journal record and desired run a bounded number of times. Every collection they are given
counts the items it hands out; a loop that scans all jobs, records or runs for each run
(once 10^8 iterations at 10,000 runs) hands out millions and fails here, on any machine.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

from reconciler.desired.desired import (
    Desired,
    DesiredAllocation,
    DesiredRun,
    Location,
    effective_allocation,
    spec_hash,
)
from reconciler.desired.models import Allocation, Project
from reconciler.engine.ledger.status import allocation_statuses, run_statuses
from reconciler.engine.observe.endings import as_recorded, judge
from reconciler.engine.plan import plan
from reconciler.engine.plan.causes import Cause
from reconciler.scheduler.base import JobRecord, Observation, ObservedJob
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.scheduler.tag import Tag
from reconciler.state.records import SubmissionRecord, SubmissionStatus
from tests.planning import NOW, PROJECT, desired, hash_of, job, record, run

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


def test_gpu_runs_in_an_allocation_are_counted_without_a_scan_per_run() -> None:
    """RUNS GPU runs in one allocation: a quarter with a step running, a quarter with a step
    of an older spec running (its share read from the journal), a quarter started and
    not listed yet, a quarter not started. Counting what they hold stays linear."""
    project = Project.model_validate({"project": PROJECT})
    held = Allocation.model_validate(
        {"kind": "Allocation", "name": "warm", "time_limit": "1h", "resources": {"gpus": 8}}
    )
    spec = effective_allocation(held, project)
    gpus = DesiredAllocation(spec, Location("specs/w.yaml", 1), spec_hash(spec))
    specs = [run(f"g{i}", allocation="warm", resources={"gpus": 1}) for i in range(RUNS)]
    state = desired(*specs, allocations=(gpus,))
    alloc_tag = Tag(project=PROJECT, deployment="0123456789ab", kind="alloc", name="warm",
                    spec_hash=gpus.spec_hash)  # fmt: skip
    rows = [JobRecord(job_id="12", top_id="12", tag=alloc_tag, state=S.RUNNING, source="squeue")]
    jobs: list[ObservedJob] = []
    records = [replace(record("warm", gpus.spec_hash, "12"), kind="alloc")]
    for i, name in enumerate(state.runs):
        started = hash_of(state, name) if i % 4 != 1 else "0" * 16
        step_id = f"12.{i}"
        if i % 4 in (0, 1):
            own = alloc_tag.model_copy(update={"kind": "run", "name": name, "spec_hash": started})
            row = JobRecord(job_id=step_id, top_id="12", step=str(i), name=own.format(),
                            state=S.RUNNING, source="sacct")  # fmt: skip
            rows.append(row)
            as_run = replace(row, step=None, tag=own)
            jobs.append(ObservedJob(job_id=step_id, tag=own, rows=(as_run,)))
            fields = {"resources.gpus": "1"}
            records.append(replace(record(name, started, None), job_id=step_id, spec_fields=fields))
        elif i % 4 == 2:
            records.append(record(name, started, None, status=SubmissionStatus.INTENT))
    jobs.insert(0, ObservedJob(job_id="12", tag=alloc_tag, rows=tuple(rows)))
    observation = Observation.model_construct(
        taken_at=NOW, jobs=CountedJobs(jobs), complete=True, problems=(), skipped=(),
        launches=(),
    )  # fmt: skip
    items = len(state.runs) + len(jobs) + len(records) + len(rows)
    Visits.count = 0
    result = plan(state, observation, CountedRecords(records), NOW, scheduler="slurm")
    waits = [a for a in result.actions if a.cause is Cause.WAITING_ALLOCATION]
    assert len(waits) == RUNS // 4
    holders = sorted(name for i, name in enumerate(state.runs) if i % 4 != 3)
    assert waits[0].reason.endswith(
        f"{len(holders)} of 8 in use by runs {', '.join(holders[:5])} and {len(holders) - 5} more"
    )
    assert Visits.count <= VISITS_PER_ITEM * items, f"{Visits.count} visits for {items} items"
