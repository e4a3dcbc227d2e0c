"""The Scheduler protocol every backend implements, and the typed records it speaks in.

A backend turns its scheduler's text into these records at its edge; nothing above the
scheduler layer sees a command line, a parsable row or a dict.

Observation reports recon's jobs only, one ``ObservedJob`` per top-level scheduler job
(a het job or a job array is one job), found by its ``Tag``. ``Observation.complete`` is
what lets a caller tell "absent" from "unknown": when it is False, a tag missing from the
observation may still have a job, and nothing may be submitted on the strength of its absence.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from functools import cached_property
from itertools import pairwise
from pathlib import Path
from typing import Annotated, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reconciler.desired.models import Allocation, Container, RunResources
from reconciler.scheduler.arrays import expand
from reconciler.scheduler.partitions import Partition
from reconciler.scheduler.states import (
    ALIVE,
    ENDED,
    Health,
    SlurmState,
    aggregate,
    health_of,
    held_in_queue,
    in_words,
)
from reconciler.scheduler.tag import Tag

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_JOB_ID = r"^[0-9]+$"
JobId = Annotated[str, Field(pattern=_JOB_ID)]
# What a job can wait for: a whole job (every task of an array), or one array task, 123_4.
DependencyId = Annotated[str, Field(pattern=r"^[0-9]+(_[0-9]+)?$")]
# A run that ran as a step inside an allocation is known by its step's id (12.3); one task
# of a job array by its task id (123_4, see ``ObservedJob.tasks``).
_OBSERVED_ID = r"^[0-9]+(\.[0-9]+|_[0-9]+)?$"
# Slurm's own steps: not something recon started, and never a reason to keep a job.
OWN_STEPS = frozenset({"extern", "batch", "interactive"})


class ArrayRequest(BaseModel):
    """A job array: the same script run once per index, each run (a task) seeing its index
    in ``SLURM_ARRAY_TASK_ID`` and the array's id in ``SLURM_ARRAY_JOB_ID``. Slurm says it
    ``--array=0-3,7%2``; indices must be below the scheduler's ``max_array_size()``."""

    model_config = _FROZEN

    indices: tuple[int, ...] = Field(min_length=1, description="sorted, unique, 0 or more")
    max_parallel: int | None = Field(
        default=None, ge=1, description="at most this many tasks running at once (Slurm's %N)"
    )

    @field_validator("indices")
    @classmethod
    def _sorted_unique(cls, indices: tuple[int, ...]) -> tuple[int, ...]:
        if indices[0] < 0:
            raise ValueError(f"array indices must be 0 or more, got {indices[0]}")
        if any(later <= earlier for earlier, later in pairwise(indices)):
            raise ValueError("array indices must be sorted and unique")
        return indices


class SubmitRequest(BaseModel):
    """One batch job to submit: its rendered script, where it runs, what it waits for.

    With ``array``, the one submission is a job array, and its logs are per task: where a
    single job's file name holds Slurm's ``%j``, an array task's holds ``%A_%a`` (array
    id, task index) on both backends (``render.log_paths``).
    """

    model_config = _FROZEN

    script: str = Field(min_length=1, description="the whole batch script, #SBATCH lines included")
    workdir: Path
    dependencies: tuple[DependencyId, ...] = Field(
        default=(),
        description="job ids (123: every task of an array; 123_4: that task alone) that "
        "must all complete successfully first",
    )
    tag: Tag
    array: ArrayRequest | None = Field(
        default=None, description="submit a job array of these indices, not a single job"
    )
    environment: dict[str, str] | None = Field(
        default=None,
        repr=False,  # it may hold a passed secret
        description="the job's starting environment (``scheduler/jobenv``); None: the "
        "submitter's, as sbatch gives by default",
    )
    passed: tuple[str, ...] = Field(
        default=(),
        description="names in ``environment`` passed from the submitter: their values are "
        "never written to disk",
    )


class AllocateRequest(BaseModel):
    """One interactive allocation to hold, with no shell: later steps run in it by job id.
    Each backend says it in its own words (Slurm: ``salloc`` options)."""

    model_config = _FROZEN

    allocation: Allocation = Field(description="the node shape and time limit to hold")
    tag: Tag


class StepRequest(BaseModel):
    """One step to start inside a held allocation, detached: it outlives recon."""

    model_config = _FROZEN

    allocation_id: JobId
    script: Path = Field(description="a bash script, readable where the step runs")
    workdir: Path
    log_dir: Path = Field(description="its output goes to slurm-<job>.<step>.out and .err here")
    shape: RunResources | None = Field(
        description="the run's own share of the allocation; None: setup, once on every node"
    )
    container: Container | None = None
    container_name: str = Field("", description="the container's name, shared by later steps")
    allocation_gpus: bool = Field(
        False,
        description="the allocation holds GPUs: a run's step that asks for none is given none",
    )
    tag: Tag = Field(description="the step's name: it is found by it, steps have no comment")
    environment: dict[str, str] | None = Field(
        default=None,
        repr=False,  # it may hold a passed secret
        description="the step's starting environment (``scheduler/jobenv``); None: recon's",
    )


@dataclass(frozen=True, slots=True)
class Held:
    """What a job, component, task or step held while it ran: Slurm's ``AllocTRES``
    (``cpu=2,gres/gpu=2,mem=500M,node=1``), summed over its nodes. Memory in MiB."""

    cpus: int = 0
    gpus: int = 0  # devices: whole GPUs and MIG slices alike, as Slurm counts gres/gpu
    memory_mb: int = 0
    nodes: int = 0
    # Those GPUs in whole GPUs where they differ (MIG slices: their share of a GPU,
    # docs/cost.md); None: ``gpus``
    gpu_value: float | None = None
    shards: int = 0  # GPU shards (gres/shard)

    @property
    def gpu_equivalents(self) -> float:
        """What GPU-hours count: whole GPUs, a MIG slice its share of one."""
        return self.gpus if self.gpu_value is None else self.gpu_value


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """One row the scheduler reports: a job, a het component, an array task, or a step.

    A plain slotted record, not a model: a pass over 10,000 jobs holds 30,000 of them
    (each job's row and its batch and extern steps), and a model of twenty fields cost
    1.2 KiB a row (36 MiB) against under 200 bytes here. The parsers are what read
    Slurm's text, and they build each field in its type."""

    job_id: str  # as Slurm prints it: 12, 4+1, 12_4, 12_[3-5%2], 4+0.batch
    top_id: str  # the id sbatch returned for the whole job
    raw_id: str | None = None  # JobIDRaw (sacct), unique per component
    het_offset: int | None = None
    array_task: str | None = None  # 4, or a pending range [3-5%2]
    step: str | None = None  # batch, extern, 0, ...
    name: str = ""
    tag: Tag | None = None
    state: SlurmState
    cancelled_by: int | None = None  # uid, when sacct names one
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    submit: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    time_left: timedelta | None = None
    nodes: str | None = None
    partition: str | None = None
    workdir: str | None = None  # the working directory Slurm records (what --chdir set)
    # Accounting, from sacct (ElapsedRaw, TimelimitRaw, AllocTRES) or the local store: how
    # long it held its resources (while it runs: so far), its limit, and what it held
    elapsed: timedelta | None = None
    time_limit: timedelta | None = None
    held: Held | None = None
    # What it used, for right-sizing (sacct's MaxRSS and TotalCPU, the local store's own):
    # the most resident memory one task held, in MiB (on steps; None where nothing
    # gathered it), and the CPU time its processes took, user and system
    peak_memory_mb: float | None = None
    cpu_time: timedelta | None = None
    source: Literal["sacct", "squeue"]  # which command's state this is

    def __post_init__(self) -> None:
        if not self.top_id.isdigit():
            raise ValueError(f"a job's top id is its number, not {self.top_id!r}")

    @property
    def health(self) -> Health:
        return health_of(self.state, self.reason)

    @property
    def held_in_queue(self) -> bool:
        """Failed for recon, yet still queued: held in special exit or after a failed
        launch (``states.held_in_queue``)."""
        return held_in_queue(self.state, self.reason)

    @property
    def is_step(self) -> bool:
        return self.step is not None

    @property
    def step_tag(self) -> Tag | None:
        """The tag a step's name carries: steps have no comment, so recon names the steps
        it starts with a tag (a run's, or its allocation's own for setup)."""
        return Tag.parse(self.name) if self.is_step else None


class ObservedJob(BaseModel):
    """One top-level job of recon's: all its component, array-task and step rows.

    A run that ran as a step of an allocation is a job of its own too, with the step's id
    (``12.3``) and the step's one row as its component.
    """

    model_config = _FROZEN

    job_id: str = Field(pattern=_OBSERVED_ID)
    tag: Tag
    rows: tuple[JobRecord, ...] = Field(min_length=1)

    def tasks(self) -> dict[int, ObservedJob]:
        """A job array's tasks by index, each a view of its own (job id ``123_4``, the
        array's tag, its row and its steps' rows); empty for a job that is no array.

        A pending range (``123_[5-9%2]``) stands for one pending task per index in it. A
        task listed on its own row is not read from a range that also holds it: the
        scheduler combined both sources already, and a task's own row is the fresher word
        (it started since the range was printed).

        Worked out once per job (a 10,000-task array's views cost tens of milliseconds);
        each call returns a dict of its own.
        """
        rows, views = self.__dict__.get("task_views_of_rows", (None, {}))
        if rows is not self.rows:  # not yet, or carried over by a model_copy of other rows
            views = self._task_views()
            self.__dict__["task_views_of_rows"] = (self.rows, views)
        return dict(views)

    def _task_views(self) -> dict[int, ObservedJob]:
        own: dict[int, JobRecord] = {}
        ranges: list[JobRecord] = []
        for row in self.components:
            task = row.array_task
            if task is None:
                continue
            if task.isdigit():
                own[int(task)] = row
            else:
                ranges.append(row)
        steps: dict[str, list[JobRecord]] = {}
        for row in self.steps:
            steps.setdefault(row.job_id.partition(".")[0], []).append(row)
        views = {
            index: ObservedJob(
                job_id=row.job_id, tag=self.tag, rows=(row, *steps.get(row.job_id, ()))
            )
            for index, row in own.items()
        }
        for pending in ranges:
            for index in expand(pending.array_task or ""):
                if index in views:
                    continue
                task_id = f"{pending.top_id}_{index}"
                row = replace(pending, job_id=task_id, array_task=str(index))
                views[index] = ObservedJob(job_id=task_id, tag=self.tag, rows=(row,))
        return dict(sorted(views.items()))

    @property
    def components(self) -> tuple[JobRecord, ...]:
        """Job-level rows: the job itself, its het components, or its array tasks."""
        return self._parts.components

    @property
    def steps(self) -> tuple[JobRecord, ...]:
        return self._parts.steps

    @property
    def live_steps(self) -> tuple[JobRecord, ...]:
        """The steps still running (or starting) in it, Slurm's own ones left out."""
        return tuple(row for row in self.steps if row.step not in OWN_STEPS and row.health in ALIVE)

    @property
    def health(self) -> Health:
        """What the job is doing, or how it ended. Derived, so not stored: an observation
        saved as JSON reads back as it was.

        While a component still waits or runs, the components alone say it: a step that
        failed or was cancelled inside a running job does not make the job read as over
        (what happened to its steps is a fact of its own, ``ended_steps``, which the coupled
        teardown reads). Once every component has ended, the steps that ended are folded in
        by the one rule (``states.aggregate``), so a failed step fails the job; a step that
        accounting still lists as running after its job ended is lag, and not read.
        """
        return self._parts.health

    @property
    def ended_steps(self) -> tuple[JobRecord, ...]:
        """The steps that have ended, well or badly, Slurm's ``extern`` left out (it ends
        with the job and says nothing about the work)."""
        return tuple(row for row in self.steps if row.step != "extern" and row.health in ENDED)

    @property
    def in_words(self) -> str | None:
        """How it ended or stands beyond its health (``states.in_words``), from the first
        component that says more: "timed out", "held (JobHeldUser)"."""
        return next(
            (words for row in self.components if (words := in_words(row.state, row.reason))),
            None,
        )

    @property
    def finished(self) -> bool:
        """Every component has ended. Not the same as a final ``health``: one failed or
        cancelled component makes the whole job failed or cancelled while another may
        still be running or completing."""
        return self._parts.finished

    @property
    def _parts(self) -> _JobParts:
        # Worked out once per job: a plan asks every job's health and parts many times.
        # Checked against the rows, which a model_copy may replace.
        parts = self._cached_parts
        if parts.rows is not self.rows:
            parts = _JobParts.of(self.rows)
            self.__dict__["_cached_parts"] = parts
        return parts

    @cached_property
    def _cached_parts(self) -> _JobParts:
        return _JobParts.of(self.rows)


@dataclass(frozen=True)
class _JobParts:
    """What a job's rows say, derived once: its components and steps, whether every
    component has ended, and its health (see ``ObservedJob.health``)."""

    rows: tuple[JobRecord, ...]
    components: tuple[JobRecord, ...]
    steps: tuple[JobRecord, ...]
    finished: bool
    health: Health

    @classmethod
    def of(cls, rows: tuple[JobRecord, ...]) -> _JobParts:
        components = tuple(row for row in rows if not row.is_step)
        steps = tuple(row for row in rows if row.is_step)
        finished = all(row.health in ENDED for row in components)
        health = aggregate(row.health for row in components)
        if finished:
            ended_steps = [
                row.health for row in steps if row.step != "extern" and row.health in ENDED
            ]
            health = aggregate([health, *ended_steps])
        return cls(rows, components, steps, finished, health)


class UntaggedJob(BaseModel):
    """A job of this user's that carries no recon tag. Not recon's by its tag, but it may be
    by its id: a job whose comment someone changed (``scontrol update comment=...``) is
    still the job the journal recorded (see ``engine/plan/identity.py``)."""

    model_config = _FROZEN

    job_id: str = Field(pattern=_JOB_ID)
    rows: tuple[JobRecord, ...] = Field(min_length=1)

    def tagged(self, tag: Tag) -> ObservedJob:
        """This job as recon's, under the tag the journal knows it by."""
        return ObservedJob(job_id=self.job_id, tag=tag, rows=self.rows)


class Launch(BaseModel):
    """A step launcher (``srun --jobid``) still running on this host for one of recon's
    steps. Its step may be listed (running) or not: srun holds a step back, unlisted,
    until its allocation has room for it (free GPUs), and only its launcher shows it."""

    model_config = _FROZEN

    allocation_id: JobId
    tag: Tag


class Observation(BaseModel):
    """recon's jobs as the scheduler reported them at ``taken_at``."""

    model_config = _FROZEN

    taken_at: datetime
    jobs: tuple[ObservedJob, ...]
    complete: bool
    untagged: tuple[UntaggedJob, ...] = Field(
        default=(), description="this user's jobs without a recon tag, matched by id only"
    )
    reused_ids: dict[str, str] = Field(
        default_factory=dict,
        description="journaled job ids Slurm now shows under another recon tag: id -> that "
        "tag. The journaled job is lost (engine/plan/identity.py)",
    )
    problems: tuple[str, ...] = Field(
        default=(), description="why the observation is not complete; empty when it is"
    )
    skipped: tuple[str, ...] = Field(
        default=(),
        description="every row of recon's jobs that could not be read (others' rows are not "
        "read at all); one that holds a tag also lands in problems",
    )
    launches: tuple[Launch, ...] | None = Field(
        default=(),
        description="step launchers running on this host; None: they could not be looked at",
    )

    def find(self, project: str, name: str) -> tuple[ObservedJob, ...]:
        """The jobs of one run or allocation, any spec hash, in job id order."""
        return self._index().by_name.get((project, name), ())

    def _index(self) -> JobIndex:
        index = self.job_index
        if index.jobs is not self.jobs:  # carried over by a model_copy that replaced jobs
            index = JobIndex.of(self.jobs)
            self.__dict__["job_index"] = index
        return index

    @cached_property
    def job_index(self) -> JobIndex:
        """The jobs by (project, name), built on the first lookup: a plan looks up every
        run's jobs several times, and a scan of all jobs per lookup made it quadratic."""
        return JobIndex.of(self.jobs)


@dataclass(frozen=True)
class JobIndex:
    """An observation's jobs grouped by (project, name), each group in observed order."""

    jobs: tuple[ObservedJob, ...]
    by_name: Mapping[tuple[str, str], tuple[ObservedJob, ...]]

    @classmethod
    def of(cls, jobs: tuple[ObservedJob, ...]) -> JobIndex:
        groups: dict[tuple[str, str], list[ObservedJob]] = {}
        for job in jobs:
            groups.setdefault((job.tag.project, job.tag.name), []).append(job)
        return cls(jobs, {key: tuple(group) for key, group in groups.items()})


def job_order(job_id: str) -> tuple[int, int]:
    """Jobs, steps and array tasks in the order Slurm made them: 12 < 12.3 < 13 < 14_0 <
    14_1; unreadable ids first.

    A step's place is its allocation's: a step started in an old allocation sorts before
    a later batch job even when it started after it.
    """
    top, _, step = job_id.partition(".")
    top, _, task = top.partition("_")  # an array task, 123_4, sorts by its index
    if not top.isdigit():
        return (-1, -1)
    if task.isdigit():
        return (int(top), int(task))
    return (int(top), int(step) if step.isdigit() else -1)


# The journal's stamps are this machine's clock, a scheduler's times its own (slurmctld's,
# often on another host): a window of `since`/`until` drawn from journal stamps reaches
# this far beyond them, for the sacct window of a pass and the accounting's back-fill
# alike. Generous, because a window too wide reads a few more rows while one too narrow
# misses a job for good. Telling a recycled job id apart is the opposite trade (there a
# loose bound claims another's job) and keeps its own, tight bound:
# engine/plan/identity.SUBMIT_CLOCK_SKEW.
JOURNAL_CLOCK_MARGIN = timedelta(hours=1)


class Scheduler(Protocol):
    """What recon needs from a batch scheduler; the Slurm adapter and local backend implement it."""

    name: str

    def observe(self, since: datetime) -> Observation:
        """recon's jobs submitted since ``since`` or still alive: one batched look per pass."""
        ...

    def submit(self, request: SubmitRequest) -> str:
        """Submit one batch job; returns its top-level job id."""
        ...

    def cancel(self, job_id: str) -> None:
        """Cancel a whole job (every het component and array task), or with a task id
        (``123_4``) that one array task alone. Gone already is fine."""
        ...

    def max_array_size(self) -> int:
        """One more than the highest index a job array may have (Slurm's MaxArraySize);
        read once per scheduler object."""
        ...

    def allocate(self, request: AllocateRequest) -> str:
        """Hold an allocation with no shell; returns its job id, normally once granted."""
        ...

    def release(self, job_id: str) -> None:
        """Give an allocation back. Gone already is fine."""
        ...

    def partitions(self) -> tuple[Partition, ...]:
        """Every partition and its nodes' shapes, in one look. Raises ObservationError when
        they cannot all be read: a partial picture would refuse runs that fit."""
        ...


@runtime_checkable
class ConcurrentScheduler(Protocol):
    """A scheduler whose ``submit`` may be called from several threads at once (Slurm:
    each call is an sbatch of its own): apply keeps this many submissions in flight."""

    submissions_at_once: int


@runtime_checkable
class AccountingScheduler(Protocol):
    """A scheduler whose accounting can be asked for jobs long ended, by id (Slurm's
    sacct; the local backend's store): `recon cost` back-fills the usage of jobs settled
    before recon read it."""

    def accounting(self, job_ids: Sequence[str], since: datetime, until: datetime) -> Observation:
        """recon's jobs among ``job_ids`` (the ids sbatch or salloc returned) as the
        accounting holds them, every row and step, for the jobs seen in [since, until]:
        in a few calls whatever the number of ids (Slurm: one per ``NAMED_JOBS_MAX``).
        Raises ``ObservationError`` when it cannot be read."""
        ...


@runtime_checkable
class StepScheduler(Protocol):
    """A scheduler that can run steps inside held allocations (Slurm; not the local backend)."""

    def containers(self) -> frozenset[str]:
        """What a step can ask of a container here, as ``Container.features`` says it
        (``image``, ``writable``, ``workdir``); empty where steps cannot run container
        images (Slurm without pyxis)."""
        ...

    def start_step(self, request: StepRequest) -> str | None:
        """Start one step, detached; returns its id (``12.3``) once Slurm lists it, or None
        when it is started but not listed yet (it waits for room in the allocation): it is
        then found by its name. Raises PermanentSchedulerError when no step came of it."""
        ...
