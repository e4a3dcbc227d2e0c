"""`recon plan` shows what `recon apply` then does: one pipeline (observe, settle, plan).

For each observed situation, the plan `look_once` makes (plan and status; it writes
nothing) is compared with the plan `reconcile_once` carries out (apply and watch) and with
the scheduler calls it makes. The project is a real git repo and the journal a real one;
the scheduler is a recording stand-in that reports a fixed observation, since what is
tested is the engine's one path, not an adapter (the adapters have their own suites).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Literal, TypedDict, Unpack

import pytest

from reconciler.desired.desired import Desired
from reconciler.engine.plan.actions import Plan
from reconciler.engine.reconcile import Request, load, look_once, reconcile_once
from reconciler.errors import ObservationError
from reconciler.scheduler.base import (
    AllocateRequest,
    JobRecord,
    Observation,
    ObservedJob,
    SubmitRequest,
)
from reconciler.scheduler.states import SlurmState
from reconciler.scheduler.tag import Tag, TagKind
from reconciler.scheduler.testing import ScriptedScheduler, job_ids
from reconciler.state.journal import Journal
from reconciler.state.paths import journal_path, tag_for
from tests.gitrepo import GitRepo

NOW = datetime.now(UTC).replace(microsecond=0)
RUN = (
    "kind: Run\nname: {name}\ncommand: 'true'\nretries: {retries}\nresources: {{cpus: 1}}\n"
    "outputs:\n  out: out.txt\n"
)
HET = """\
kind: Run
name: het
command: 'true'
resources:
  components:
    - {cpus: 1}
    - {cpus: 1}
outputs:
  out: out.txt
"""
ALLOCATION = "kind: Allocation\nname: warm\ntime_limit: 1h\nmin_remaining: 10m\n"


def scheduler_reporting(*jobs: ObservedJob) -> ScriptedScheduler:
    """A Scheduler reporting jobs the test describes; no sinfo (fit unknown), job ids
    from 501 for what apply submits or allocates, cancels and releases taken."""
    ids = job_ids(501)
    return ScriptedScheduler(
        observe=Observation(taken_at=NOW, jobs=jobs, complete=True),
        partitions=ObservationError("no sinfo here: fit unknown"),
        submit=ids,
        allocate=ids,
        cancel=None,
        release=None,
    )


def acts(scheduler: ScriptedScheduler) -> list[tuple[str, str]]:
    """What the scheduler was asked to change: submissions and allocations by their
    run's name, cancels and releases by job id."""
    return [
        (method, argument.tag.name if isinstance(argument, SubmitRequest | AllocateRequest)
         else str(argument))
        for method, argument in scheduler.calls_to("submit", "allocate", "cancel", "release")
    ]  # fmt: skip


class RowFields(TypedDict, total=False):
    """What a test says of a row beyond its job, run and state."""

    het_offset: int
    step: str
    exit_code: int
    start: datetime
    end: datetime
    time_left: timedelta
    tag: Tag | None
    source: Literal["sacct", "squeue"]


def row(
    desired: Desired,
    kind: TagKind,
    name: str,
    job_id: str,
    state: SlurmState,
    **more: Unpack[RowFields],
) -> JobRecord:
    spec_hash = (desired.runs[name] if kind == "run" else desired.allocations[name]).spec_hash
    record = JobRecord(
        job_id=job_id,
        top_id=job_id.split("+")[0].split(".")[0],
        tag=tag_for(desired, kind, name, spec_hash),
        state=state,
        submit=NOW - timedelta(minutes=30),
        source="sacct",
    )
    return replace(record, **more)


def job_of(*rows: JobRecord) -> ObservedJob:
    tag = rows[0].tag
    assert tag is not None
    return ObservedJob(job_id=rows[0].top_id, tag=tag, rows=rows)


def journalled(desired: Desired, kind: TagKind, name: str, job_id: str) -> None:
    spec_hash = (desired.runs[name] if kind == "run" else desired.allocations[name]).spec_hash
    path = journal_path(desired)
    path.parent.mkdir(parents=True, exist_ok=True)
    with Journal(path) as journal:
        intent = journal.record_intent(
            desired.project.project, kind, name, spec_hash, desired.commit, {}, NOW
        )
        journal.record_submitted(intent, job_id, NOW - timedelta(minutes=30))


def completed_without_outputs(desired: Desired) -> tuple[ObservedJob, ...]:
    journalled(desired, "run", "a", "10")
    done = row(desired, "run", "a", "10", SlurmState.COMPLETED, exit_code=0, end=NOW)
    return (job_of(done),)


def failed_with_retries_left(desired: Desired) -> tuple[ObservedJob, ...]:
    journalled(desired, "run", "b", "11")
    failed = row(desired, "run", "b", "11", SlurmState.FAILED, exit_code=2, end=NOW)
    return (job_of(failed),)


def het_with_a_failed_step(desired: Desired) -> tuple[ObservedJob, ...]:
    journalled(desired, "run", "het", "12")
    rows = (
        row(desired, "run", "het", "12+0", SlurmState.RUNNING, het_offset=0, start=NOW),
        row(desired, "run", "het", "12+1", SlurmState.RUNNING, het_offset=1, start=NOW),
        row(desired, "run", "het", "12+1.0", SlurmState.FAILED, het_offset=1, step="0",
            exit_code=3, start=NOW, tag=None),
    )  # fmt: skip
    return (job_of(*rows),)


def allocation_expiring(desired: Desired) -> tuple[ObservedJob, ...]:
    journalled(desired, "alloc", "warm", "13")
    held = row(
        desired, "alloc", "warm", "13", SlurmState.RUNNING, start=NOW - timedelta(minutes=55),
        time_left=timedelta(minutes=5), source="squeue",
    )  # fmt: skip
    return (job_of(held),)


SITUATIONS: dict[str, tuple[dict[str, str], Callable[[Desired], tuple[ObservedJob, ...]]]] = {
    "completed without outputs": (
        {"specs/a.yaml": RUN.format(name="a", retries=0)},
        completed_without_outputs,
    ),
    "failed with retries left": (
        {"specs/b.yaml": RUN.format(name="b", retries=2)},
        failed_with_retries_left,
    ),
    "het with a failed step": ({"specs/het.yaml": HET}, het_with_a_failed_step),
    "allocation expiring": ({"specs/warm.yaml": ALLOCATION}, allocation_expiring),
}


@pytest.mark.parametrize("situation", list(SITUATIONS))
def test_plan_shows_exactly_what_apply_then_does(tmp_path: Path, situation: str) -> None:
    files, jobs_of = SITUATIONS[situation]
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"recon.yaml": "project: same\n", **files})
    request = Request(repo.root)
    scheduler = scheduler_reporting(*jobs_of(load(request)))

    planned = look_once(request, scheduler=scheduler).plan
    assert acts(scheduler) == []  # plan acts on nothing
    outcome = reconcile_once(request, scheduler=scheduler)

    assert shown(planned) == shown(outcome.plan)
    changing, calls = EXPECTED[situation]
    assert [(a.kind.value, a.target) for a in planned.actions if a.changes_cluster] == changing
    assert acts(scheduler) == calls


def shown(plan: Plan) -> list[tuple[str, str, str]]:
    return [(action.kind.value, action.target, action.reason) for action in plan.actions]


# What each situation must come to: the plan's changing actions, then the calls apply made.
EXPECTED: dict[str, tuple[list[tuple[str, str]], list[tuple[str, str]]]] = {
    # judged failed (its output is missing), no retries left: nothing to submit
    "completed without outputs": ([], []),
    "failed with retries left": ([("retry", "b")], [("submit", "b")]),
    "het with a failed step": ([("teardown", "het")], [("cancel", "12")]),
    # renewed: a new job first, the old one released (no step runs in it)
    "allocation expiring": (
        [("replace", "warm"), ("cancel", "warm")],
        [("allocate", "warm"), ("release", "13")],
    ),
}


def test_the_scheduler_is_asked_back_to_the_oldest_job_the_journal_has_not_settled(
    tmp_path: Path,
) -> None:
    repo = GitRepo(tmp_path / "repo")
    repo.commit(
        {"recon.yaml": "project: window\n", "specs/a.yaml": RUN.format(name="a", retries=0)}
    )
    request = Request(repo.root)
    desired = load(request)
    submitted = NOW - timedelta(days=3)
    path = journal_path(desired)
    path.parent.mkdir(parents=True, exist_ok=True)
    with Journal(path) as journal:
        spec_hash = desired.runs["a"].spec_hash
        intent = journal.record_intent(
            "window", "run", "a", spec_hash, desired.commit, {}, submitted
        )
        journal.record_submitted(intent, "10", submitted)
    ended = row(
        desired, "run", "a", "10", SlurmState.COMPLETED, exit_code=0, end=NOW - timedelta(days=2)
    )
    scheduler = scheduler_reporting(job_of(ended))

    reconcile_once(request, scheduler=scheduler, clock=lambda: NOW)  # settles job 10
    reconcile_once(request, scheduler=scheduler, clock=lambda: NOW)

    # Its end unknown, job 10 is looked for from its submission on; once the journal holds
    # its end, it is not asked about again (only the margin for clocks remains).
    assert scheduler.observed_since == [submitted - timedelta(hours=1), NOW - timedelta(hours=1)]


def test_a_pass_that_adopts_a_failed_job_and_retries_its_run_records_both(
    tmp_path: Path,
) -> None:
    """A crash after sbatch (or a lost journal) leaves a job the journal does not know; it
    failed meanwhile, so one pass adopts it and submits the retry. The retry's intent is
    written ahead of every call: the adoption must not take it for the intent a crash
    left, or the retry's job id has no record to go to (found by generated histories:
    `submission 1 is adopted with job 10; it cannot also be job 501`)."""
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"recon.yaml": "project: twice\n", "specs/b.yaml": RUN.format(name="b", retries=2)})
    request = Request(repo.root)
    desired = load(request)
    failed = row(desired, "run", "b", "10", SlurmState.FAILED, exit_code=2, end=NOW)
    scheduler = scheduler_reporting(job_of(failed))

    outcome = reconcile_once(request, scheduler=scheduler, clock=lambda: NOW)

    assert [(a.kind.value, a.target) for a in outcome.plan.actions] == [
        ("adopt", "b"),
        ("retry", "b"),
    ]
    assert acts(scheduler) == [("submit", "b")]
    with Journal(journal_path(desired)) as journal:
        records = journal.records("twice")
    assert sorted((r.job_id, r.status.value) for r in records) == [
        ("10", "adopted"),
        ("501", "submitted"),
    ]
