"""What the planner reads, indexed once per plan, and what one run's decision returns.

Pure and read-only: the planner's modules look things up here by name and never write
back; each run's decision is a value (``Decision``) that the assembly in engine/plan/assemble.py
collects, and later runs read the earlier ones' decisions from that collection.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler.desired.desired import Desired
from reconciler.engine.plan.actions import Action, RunOutcome
from reconciler.engine.plan.allocation_state import AllocationState
from reconciler.engine.plan.fit import Fit
from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.scheduler.states import ALIVE
from reconciler.state.records import SetupRecord, SubmissionRecord


@dataclass(frozen=True)
class FileState:
    """What the filesystem holds now, as version digests (None: missing).

    `outputs[(run, output)]` for runs' declared outputs, `inputs[(run, input)]` for
    external `path:` inputs. A key left out was not looked at and counts as present.
    """

    outputs: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    inputs: Mapping[tuple[str, str], str | None] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class PlanInputs:
    """Everything one plan is made from. Jobs, journal records and coupled partners are
    grouped by run and by allocation once (``PlanInputs.of``), then looked up by name: a
    scan of every job, record or run for each run made a plan of 10,000 runs take
    minutes. Built by keyword, like every wide record."""

    desired: Desired
    observation: Observation
    records: Sequence[SubmissionRecord]
    now: datetime
    files: FileState
    fit: Fit | None
    replace: frozenset[str]  # runs to submit anew on request (--replace)
    scheduler: str  # the backend's name: "slurm", "local"
    setups: Sequence[SetupRecord] = ()  # the journal's allocation setups
    # Container.features the cluster offers; None: not looked at (no allocation has one)
    containers: frozenset[str] | None = None
    # commit -> each committed file's git blob id (None: a link, not compared), for the
    # commits of journal records that do not carry the code versions their job ran with
    # (written by an older recon); read before planning (``engine/reconcile.code_at``)
    code_at: Mapping[str, Mapping[str, str | None]] = field(default_factory=dict)
    # the jobs recon itself cancelled (the journal's cancels): never an attempt of a run
    cancelled: frozenset[str] = frozenset()

    # The indexes, built by ``of``:
    jobs_by_run: Mapping[str, tuple[ObservedJob, ...]]
    history_by_run: Mapping[str, Sequence[SubmissionRecord]]
    partners_by_run: Mapping[str, Sequence[str]]
    # a job array's id -> its tasks, each a sweep member's job (engine/plan/identity.split_arrays)
    tasks_by_array: Mapping[str, tuple[ObservedJob, ...]]
    # the project's allocation jobs (observed order) and the journal's records of them
    # (oldest first), by allocation
    jobs_by_allocation: Mapping[str, tuple[ObservedJob, ...]]
    history_by_allocation: Mapping[str, Sequence[SubmissionRecord]]
    # the journal's records of runs started as steps (12.3), by allocation job id (12)
    steps_by_job: Mapping[str, Sequence[SubmissionRecord]]
    # (run, spec hash) -> the spec its first record of that hash was started with (flat
    # fields); an adopted job's record holds none and is left out
    specs_by_run: Mapping[tuple[str, str], Mapping[str, object]]

    # Each allocation's state in this plan (allocations/state.py), for the runs inside it:
    # planned from the inputs above, then added (``with_allocations``).
    allocation_states: Mapping[str, AllocationState] = field(default_factory=dict)

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
        scheduler: str,
        setups: Sequence[SetupRecord] = (),
        containers: frozenset[str] | None = None,
        code_at: Mapping[str, Mapping[str, str | None]] | None = None,
        cancelled: frozenset[str] = frozenset(),
    ) -> PlanInputs:
        project = desired.project.project
        jobs, tasks, allocation_jobs = _job_indexes(observation, project)
        history: dict[str, list[SubmissionRecord]] = {}
        allocation_history: dict[str, list[SubmissionRecord]] = {}
        steps: dict[str, list[SubmissionRecord]] = {}
        specs: dict[tuple[str, str], Mapping[str, object]] = {}
        for record in records:
            if record.kind == "alloc":
                allocation_history.setdefault(record.name, []).append(record)
            if record.kind != "run":
                continue
            history.setdefault(record.name, []).append(record)
            if record.spec_fields:
                specs.setdefault((record.name, record.spec_hash), record.spec_fields)
            if record.job_id is not None and "." in record.job_id:
                steps.setdefault(record.job_id.split(".", 1)[0], []).append(record)
        return cls(
            desired=desired,
            observation=observation,
            records=records,
            now=now,
            files=files,
            fit=fit,
            replace=replace,
            scheduler=scheduler,
            setups=setups,
            containers=containers,
            jobs_by_run=jobs,
            history_by_run=history,
            partners_by_run=coupled_partners(desired),
            tasks_by_array=tasks,
            jobs_by_allocation=allocation_jobs,
            history_by_allocation=allocation_history,
            steps_by_job=steps,
            specs_by_run=specs,
            code_at=code_at or {},
            cancelled=cancelled,
        )

    def with_observation(self, observation: Observation, now: datetime) -> PlanInputs:
        """These inputs with another observation of the same jobs (their states changed)
        at ``now``: its jobs indexed again, the journal's indexes kept."""
        jobs, tasks, allocation_jobs = _job_indexes(observation, self.project)
        return dataclasses.replace(
            self,
            observation=observation,
            now=now,
            jobs_by_run=jobs,
            tasks_by_array=tasks,
            jobs_by_allocation=allocation_jobs,
        )

    def with_allocations(self, states: Mapping[str, AllocationState]) -> PlanInputs:
        """These inputs with the allocations' states planned from them (the indexes are
        kept, not built again)."""
        return dataclasses.replace(self, allocation_states=states)

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

    def allocation_jobs(self, name: str) -> tuple[ObservedJob, ...]:
        """The allocation's observed jobs, in observed order."""
        return self.jobs_by_allocation.get(name, ())

    def allocation_history(self, name: str) -> Sequence[SubmissionRecord]:
        """The journal's records of the allocation's jobs, oldest first."""
        return self.history_by_allocation.get(name, ())

    def step_records(self, job_id: str) -> Sequence[SubmissionRecord]:
        """The journal's records of runs started as steps in the allocation job."""
        return self.steps_by_job.get(job_id, ())

    def recorded_spec(self, name: str, spec_hash: str) -> Mapping[str, object] | None:
        """The spec (flat fields) the journal recorded the run started with at that hash;
        None when no record of it holds one."""
        return self.specs_by_run.get((name, spec_hash))


JobIndex = dict[str, tuple[ObservedJob, ...]]


def _job_indexes(observation: Observation, project: str) -> tuple[JobIndex, JobIndex, JobIndex]:
    """The project's jobs by run, array tasks by array, and jobs by allocation."""
    jobs: dict[str, list[ObservedJob]] = {}
    tasks: dict[str, list[ObservedJob]] = {}
    allocation_jobs: dict[str, list[ObservedJob]] = {}
    for job in observation.jobs:
        if job.tag.project != project:
            continue
        if job.tag.kind == "run":
            jobs.setdefault(job.tag.name, []).append(job)
            array, task, _ = job.job_id.partition("_")
            if task:
                tasks.setdefault(array, []).append(job)
        elif job.tag.kind == "alloc":
            allocation_jobs.setdefault(job.tag.name, []).append(job)
    return (
        {name: tuple(group) for name, group in jobs.items()},
        {array: tuple(group) for array, group in tasks.items()},
        {name: tuple(group) for name, group in allocation_jobs.items()},
    )


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


@dataclass
class PlanMemo:
    """What one plan was made from and what it decided, kept by `recon watch` to re-plan
    only the runs a commit changed and their downstream (engine/plan/replan.py).

    ``notes``: the plan's notes but the one said of its actions (``bare_notes``), which a
    re-plan says again over the whole plan; ``targeted``: the plan was of some runs only
    (targets or --replace), never re-planned in part."""

    inputs: PlanInputs  # with the allocations' states
    decided: Mapping[str, Decision]  # every chosen run's decision, in the plan's order
    positions: Mapping[str, int]  # run -> the index of its action in the plan's actions
    notes: tuple[str, ...]
    targeted: bool = False
    # run -> the runs that read its outputs, made on first use and handed on to a re-plan
    # of the same graph
    _downstream: dict[str, list[str]] | None = field(default=None, repr=False)

    def renewed(self, inputs: PlanInputs, decided: Mapping[str, Decision]) -> PlanMemo:
        """The memo of a plan made from this one for some runs again (engine/plan/replan):
        the same graph, so the same downstream index."""
        return PlanMemo(
            inputs, decided, self.positions, self.notes, self.targeted, self._downstream
        )

    def downstream(self) -> Mapping[str, list[str]]:
        if self._downstream is None:
            found: dict[str, list[str]] = {}
            for name, upstreams in self.inputs.desired.upstreams.items():
                for upstream in upstreams:
                    found.setdefault(upstream, []).append(name)
            self._downstream = found
        return self._downstream

    def affected(self, changed: Collection[str]) -> list[str] | None:
        """The changed runs and every run downstream of them, in the plan's order; None
        when one of them was not in the plan."""
        below = self.downstream()
        seen = set(changed)
        todo = list(changed)
        while todo:
            for child in below.get(todo.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    todo.append(child)
        if not all(name in self.positions for name in seen):
            return None
        return sorted(seen, key=self.positions.__getitem__)
