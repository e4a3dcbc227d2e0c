"""What the planner reads, indexed once per plan, and what one run's decision returns.

Pure and read-only: the planner's modules look things up here by name and never write
back; each run's decision is a value (``Decision``) that the assembly in engine/plan.py
collects, and later runs read the earlier ones' decisions from that collection.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.desired.desired import Desired
from reconciler.engine.plan import allocations as plan_allocations
from reconciler.engine.plan.actions import Action, RunOutcome
from reconciler.engine.plan.fit import Fit
from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.scheduler.states import ALIVE
from reconciler.state.records import SubmissionRecord


@dataclass(frozen=True)
class FileState:
    """What the filesystem holds now, as version digests (None: missing).

    `outputs[(run, output)]` for runs' declared outputs, `inputs[(run, input)]` for
    external `path:` inputs. A key left out was not looked at and counts as present.
    """

    outputs: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    inputs: Mapping[tuple[str, str], str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class PlanInputs:
    """Everything one plan is made from. Jobs, journal records and coupled partners are
    grouped by run once (``PlanInputs.of``), then looked up by name: a scan of every job,
    record or run for each run made a plan of 10,000 runs take minutes."""

    desired: Desired
    observation: Observation
    records: Sequence[SubmissionRecord]
    now: datetime
    files: FileState
    fit: Fit | None
    replace: frozenset[str]  # runs to submit anew on request (--replace)
    allocation_states: Mapping[str, plan_allocations.AllocationState]
    jobs_by_run: Mapping[str, tuple[ObservedJob, ...]]
    history_by_run: Mapping[str, Sequence[SubmissionRecord]]
    partners_by_run: Mapping[str, Sequence[str]]
    # a job array's id -> its tasks, each a sweep member's job (engine/identity.split_arrays)
    tasks_by_array: Mapping[str, tuple[ObservedJob, ...]] = field(default_factory=dict)
    # commit -> each committed file's git blob id (None: a link, not compared), for the
    # commits of journal records that do not carry the code versions their job ran with
    # (written by an older recon); read before planning (``engine/code.code_at``)
    code_at: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    # the jobs recon itself cancelled (the journal's cancels): never an attempt of a run
    cancelled: frozenset[str] = frozenset()

    @classmethod
    def of(
        cls,
        desired: Desired,
        observation: Observation,
        records: Sequence[SubmissionRecord],
        now: datetime,
        *,
        files: FileState,
        fit: Fit | None,
        replace: frozenset[str],
        allocation_states: Mapping[str, plan_allocations.AllocationState],
        code_at: Mapping[str, Mapping[str, str | None]] | None = None,
        cancelled: frozenset[str] = frozenset(),
    ) -> PlanInputs:
        project = desired.project.project
        jobs: dict[str, list[ObservedJob]] = {}
        tasks: dict[str, list[ObservedJob]] = {}
        for job in observation.jobs:
            if job.tag.project == project and job.tag.kind == "run":
                jobs.setdefault(job.tag.name, []).append(job)
                array, task, _ = job.job_id.partition("_")
                if task:
                    tasks.setdefault(array, []).append(job)
        history: dict[str, list[SubmissionRecord]] = {}
        for record in records:
            if record.kind == "run":
                history.setdefault(record.name, []).append(record)
        return cls(
            desired,
            observation,
            records,
            now,
            files,
            fit,
            replace,
            allocation_states,
            {name: tuple(group) for name, group in jobs.items()},
            history,
            coupled_partners(desired),
            {array: tuple(group) for array, group in tasks.items()},
            code_at or {},
            cancelled,
        )

    @property
    def project(self) -> str:
        return self.desired.project.project

    def jobs(self, name: str) -> tuple[ObservedJob, ...]:
        """The run's observed jobs, oldest first."""
        return self.jobs_by_run.get(name, ())

    def history(self, name: str) -> Sequence[SubmissionRecord]:
        """The journal's records of the run, oldest first."""
        return self.history_by_run.get(name, ())

    def partners(self, name: str) -> Sequence[str]:
        """The runs coupled with this one, sorted."""
        return self.partners_by_run.get(name, ())


def coupled_partners(desired: Desired) -> dict[str, list[str]]:
    """Each coupled run's partners, sorted. Coupling goes both ways: naming a run in
    `coupled_with` couples it back."""
    partners: dict[str, set[str]] = {}
    for run in desired.runs.values():
        for other in run.coupled_with:
            if other in desired.runs:
                partners.setdefault(run.name, set()).add(other)
                partners.setdefault(other, set()).add(run.name)
    return {name: sorted(named) for name, named in partners.items()}


def is_live(job: ObservedJob) -> bool:
    # A het job with one failed component may still hold the others: it is not over.
    return job.health in ALIVE or not job.finished


@dataclass(frozen=True)
class Decision:
    """What the planner decided for one run: the action (before its sync status is
    attached) and where the run stands once the plan is carried out. `live_job`: the job
    of its current spec still queued or running, which downstream runs wait for through
    afterok; `renewal`: (allocation, time needed) when it waits for a fresh allocation job
    with more time left; `demand`: the allocation (with idle_release) it waits to be
    allocated for it; `uses`: the allocation it starts a step in, or waits in for its
    step to be listed (which keeps it from being released as idle)."""

    action: Action
    outcome: RunOutcome
    live_job: str | None = None
    renewal: tuple[str, timedelta] | None = None
    demand: str | None = None
    uses: str | None = None
