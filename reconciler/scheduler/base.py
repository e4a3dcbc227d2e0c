"""The Scheduler protocol every backend implements, and the typed records it speaks in.

A backend turns its scheduler's text into these records at its edge; nothing above the
scheduler layer sees a command line, a parsable row or a dict.

Observation reports recon's jobs only, one ``ObservedJob`` per top-level scheduler job
(a het job or a job array is one job), found by its ``Tag``. ``Observation.complete`` is
what lets a caller tell "absent" from "unknown": when it is False, a tag missing from the
observation may still have a job, and nothing may be submitted on the strength of its absence.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path
from typing import Annotated, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from reconciler.scheduler.partitions import Partition
from reconciler.scheduler.states import HEALTH, Health, SlurmState, aggregate
from reconciler.scheduler.tag import Tag

_FROZEN = ConfigDict(frozen=True, extra="forbid")
_JOB_ID = r"^[0-9]+$"
JobId = Annotated[str, Field(pattern=_JOB_ID)]
_ENDED = {Health.SUCCEEDED, Health.FAILED, Health.CANCELLED}


class SubmitRequest(BaseModel):
    """One batch job to submit: its rendered script, where it runs, what it waits for."""

    model_config = _FROZEN

    script: str = Field(min_length=1, description="the whole batch script, #SBATCH lines included")
    workdir: Path
    dependencies: tuple[JobId, ...] = Field(
        default=(), description="job ids that must all complete successfully first"
    )
    tag: Tag


class AllocateRequest(BaseModel):
    """One interactive allocation to hold, with no shell: later steps run in it by job id."""

    model_config = _FROZEN

    options: tuple[str, ...] = Field(
        description="salloc options in long form, e.g. ('--partition=cpu', '--time=10')"
    )
    tag: Tag


class JobRecord(BaseModel):
    """One row the scheduler reports: a job, a het component, an array task, or a step."""

    model_config = _FROZEN

    job_id: str = Field(description="as Slurm prints it: 12, 4+1, 12_4, 12_[3-5%2], 4+0.batch")
    top_id: str = Field(pattern=_JOB_ID, description="the id sbatch returned for the whole job")
    raw_id: str | None = Field(default=None, description="JobIDRaw (sacct), unique per component")
    het_offset: int | None = None
    array_task: str | None = Field(default=None, description="4, or a pending range [3-5%2]")
    step: str | None = Field(default=None, description="batch, extern, 0, ...")
    name: str = ""
    tag: Tag | None = None
    state: SlurmState
    cancelled_by: int | None = Field(default=None, description="uid, when sacct names one")
    exit_code: int | None = None
    signal: int | None = None
    reason: str | None = None
    submit: datetime | None = None
    start: datetime | None = None
    end: datetime | None = None
    time_left: timedelta | None = None
    nodes: str | None = None
    partition: str | None = None
    source: Literal["sacct", "squeue"] = Field(description="which command's state this is")

    @property
    def health(self) -> Health:
        return HEALTH[self.state]

    @property
    def is_step(self) -> bool:
        return self.step is not None


class ObservedJob(BaseModel):
    """One top-level job of recon's: all its component, array-task and step rows."""

    model_config = _FROZEN

    job_id: str = Field(pattern=_JOB_ID)
    tag: Tag
    rows: tuple[JobRecord, ...] = Field(min_length=1)

    @property
    def components(self) -> tuple[JobRecord, ...]:
        """Job-level rows: the job itself, its het components, or its array tasks."""
        return tuple(row for row in self.rows if not row.is_step)

    @property
    def steps(self) -> tuple[JobRecord, ...]:
        return tuple(row for row in self.rows if row.is_step)

    @property
    def health(self) -> Health:
        """All rows folded by the one rule (``states.aggregate``). Derived, so not stored:
        an observation saved as JSON reads back as it was."""
        return aggregate(row.health for row in self.rows)

    @property
    def finished(self) -> bool:
        """Every component has ended. Not the same as a final ``health``: one failed or
        cancelled component makes the whole job failed or cancelled while another may
        still be running or completing."""
        return all(row.health in _ENDED for row in self.components)


class Observation(BaseModel):
    """recon's jobs as the scheduler reported them at ``taken_at``."""

    model_config = _FROZEN

    taken_at: datetime
    jobs: tuple[ObservedJob, ...]
    complete: bool
    problems: tuple[str, ...] = Field(
        default=(), description="why the observation is not complete; empty when it is"
    )
    skipped: tuple[str, ...] = Field(
        default=(),
        description="every row that could not be read; one of recon's also lands in problems",
    )

    def find(self, project: str, name: str) -> tuple[ObservedJob, ...]:
        """The jobs of one run or allocation, any spec hash, in job id order."""
        return tuple(
            job for job in self.jobs if job.tag.project == project and job.tag.name == name
        )


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
        """Cancel a whole job (every het component and array task). Gone already is fine."""
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
