"""What state each local job is in, and which waiting jobs to start or cancel now. Pure.

A job's files record only facts, each written once: it was submitted, started, cancelled,
ended (with an exit status). Its Slurm state is derived from those facts here, so there
is no state field to keep in step with the processes. ``assess`` looks at all jobs at
once because a waiting job's state depends on others: its dependencies' outcomes, and
the CPUs that running jobs hold.

Scheduling is first come, first served among jobs whose dependencies are met: the oldest
such job that does not fit the free CPUs or GPUs waits (``Resources``) and so does every
job after it (``Priority``), so small jobs cannot starve a large one. A job asking more
CPUs or GPUs than there are at all can never run; it waits with ``PartitionConfig``, as on
Slurm, and does not hold up the jobs behind it. Neither does an array task that waits
because as many of its array's tasks as its cap allows already run (``JobArrayTaskLimit``).

A job that starts is handed its own GPUs, devices no running job holds, and cores to run
on (``Grant``): cores no running job holds while there are enough of them, else the ones
least held (the CPU count handed out may be set above the machine's cores), and none,
meaning every core, when it asks more than the machine has.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from reconciler.scheduler.states import ENDED, HEALTH, SlurmState

# Slurm's reason words, so a local job reads like a Slurm one.
DEPENDENCY = "Dependency"
NEVER_SATISFIED = "DependencyNeverSatisfied"
RESOURCES = "Resources"
PRIORITY = "Priority"
TOO_BIG = "PartitionConfig"
ARRAY_LIMIT = "JobArrayTaskLimit"
NONZERO_EXIT = "NonZeroExitCode"
TIME_LIMIT = "TimeLimit"
# The supervisor of a started job died without recording how the job ended.
SUPERVISOR_LOST = "SupervisorLost"
# An array task cancelled by its own id before it started: Slurm keeps no record of such a
# task (neither squeue nor sacct lists it again), and the local backend reports none.
CANCELLED_ALONE = "CancelledAlone"


@dataclass(frozen=True)
class Ending:
    """How the job's script ended: its exit code, or the signal that killed it, and
    whether the supervisor ended it for its time limit or for its memory."""

    at: datetime
    exit_code: int
    signal: int = 0
    timed_out: bool = False
    out_of_memory: bool = False
    # What its processes used (``supervisor._used``): the largest one's peak resident
    # memory, in MiB, and their CPU time, user and system; None where not measured (a
    # job that never ran its script, an ending written by an older recon)
    peak_memory_mb: float | None = None
    cpu_time_s: float | None = None


@dataclass(frozen=True)
class Cancel:
    at: datetime
    by: int | None  # uid of whoever cancelled; None when the backend did (a failed dependency)
    reason: str | None = None


@dataclass(frozen=True)
class Grant:
    """What a started job was handed: GPUs by device id, and the cores it runs on (none:
    it may run on any)."""

    gpus: tuple[str, ...] = ()
    cores: tuple[int, ...] = ()


NO_GRANT = Grant()


@dataclass(frozen=True)
class JobFacts:
    """Everything a job's files say, as of one read of them."""

    job_id: int
    cpus: int
    dependencies: tuple[int, ...]
    submitted: datetime
    gpus: int = 0
    array_id: int | None = None  # the array the job is a task of
    max_parallel: int | None = None  # its array's cap on tasks running at once
    started: datetime | None = None
    grant: Grant | None = None  # what it was handed when it started
    cancelled: Cancel | None = None
    ended: Ending | None = None
    # Whether the supervisor still runs; only asked of a job started and not ended.
    supervised: bool = True

    @property
    def final(self) -> bool:
        """Nothing about this job can change any more."""
        return self.ended is not None or (self.started is None and self.cancelled is not None)

    @property
    def lost(self) -> bool:
        return self.started is not None and self.ended is None and not self.supervised

    @property
    def holds_cpus(self) -> bool:
        """A started job holds its CPUs until its processes are gone, cancelled or not."""
        return self.started is not None and self.ended is None and self.supervised


@dataclass(frozen=True)
class Status:
    state: SlurmState
    reason: str | None = None
    end: datetime | None = None


@dataclass(frozen=True)
class Assessment:
    status: Mapping[int, Status]
    start: tuple[int, ...]  # pending jobs that may start now, oldest first
    cancel: tuple[int, ...]  # pending jobs whose dependency can no longer be met
    grants: Mapping[int, Grant] = field(default_factory=dict)  # what each of `start` gets


def settled_status(job: JobFacts) -> Status | None:
    """The state of a job that is no longer waiting; None while it waits."""
    if job.cancelled is not None:
        end = job.ended.at if job.ended is not None else job.cancelled.at
        return Status(SlurmState.CANCELLED, job.cancelled.reason, end)
    if job.ended is not None:
        return _ended_status(job.ended)
    if job.started is None:
        return None
    if job.lost:
        return Status(SlurmState.NODE_FAIL, SUPERVISOR_LOST)
    return Status(SlurmState.RUNNING)


def _ended_status(ending: Ending) -> Status:
    if ending.timed_out:
        return Status(SlurmState.TIMEOUT, TIME_LIMIT, ending.at)
    if ending.out_of_memory:
        return Status(SlurmState.OUT_OF_MEMORY, None, ending.at)
    if ending.signal or ending.exit_code:
        return Status(SlurmState.FAILED, NONZERO_EXIT if ending.exit_code else None, ending.at)
    return Status(SlurmState.COMPLETED, None, ending.at)


def assess(
    jobs: Mapping[int, JobFacts],
    total_cpus: int,
    gpus: Sequence[str] = (),
    cores: Sequence[int] = (),
) -> Assessment:
    """Every job's state, and what a dispatcher should do now. ``jobs`` must hold each
    waiting job's dependencies (a dependency it lacks is taken as failed: its record is
    gone, and nothing recon cannot see may count as a success). ``gpus`` are the devices
    that may be handed out, ``cores`` the machine's cores (none: no job is pinned)."""
    status: dict[int, Status] = {}
    free = total_cpus - sum(job.cpus for job in jobs.values() if job.holds_cpus)
    holding = [job.grant for job in jobs.values() if job.holds_cpus and job.grant is not None]
    held_gpus = {device for grant in holding for device in grant.gpus}
    free_gpus = [device for device in gpus if device not in held_gpus]
    core_load = Counter(core for grant in holding for core in grant.cores)
    grants: dict[int, Grant] = {}
    # Tasks running per array, for its cap (jobs that are no array task count under None).
    running = Counter(job.array_id for job in jobs.values() if job.holds_cpus)
    start: list[int] = []
    cancel: list[int] = []
    queue_blocked = False
    # Oldest first: a dependency always has a smaller id than its dependent (it existed at
    # submit time), so its status is known when the dependent is looked at.
    for job_id in sorted(jobs):
        job = jobs[job_id]
        settled = settled_status(job)
        if settled is not None:
            status[job_id] = settled
            continue
        upstream = [status.get(dep) for dep in job.dependencies]
        if any(up is None or _dooms(up) for up in upstream):
            # Shown as Slurm shows it until the cancel is written; its own dependents
            # are doomed by it in this same pass.
            status[job_id] = Status(SlurmState.PENDING, NEVER_SATISFIED)
            cancel.append(job_id)
        elif any(up is not None and up.state is not SlurmState.COMPLETED for up in upstream):
            status[job_id] = Status(SlurmState.PENDING, DEPENDENCY)
        elif job.cpus > total_cpus or job.gpus > len(gpus):
            status[job_id] = Status(SlurmState.PENDING, TOO_BIG)
        elif job.max_parallel is not None and running[job.array_id] >= job.max_parallel:
            status[job_id] = Status(SlurmState.PENDING, ARRAY_LIMIT)
        elif queue_blocked:
            status[job_id] = Status(SlurmState.PENDING, PRIORITY)
        elif job.cpus > free or job.gpus > len(free_gpus):
            queue_blocked = True
            status[job_id] = Status(SlurmState.PENDING, RESOURCES)
        else:
            free -= job.cpus
            running[job.array_id] += 1
            handed, free_gpus = tuple(free_gpus[: job.gpus]), free_gpus[job.gpus :]
            pinned = _cores(job.cpus, cores, core_load)
            core_load.update(pinned)
            grants[job_id] = Grant(gpus=handed, cores=pinned)
            start.append(job_id)
            status[job_id] = Status(SlurmState.PENDING)
    return Assessment(status=status, start=tuple(start), cancel=tuple(cancel), grants=grants)


def _cores(asked: int, cores: Sequence[int], load: Counter[int]) -> tuple[int, ...]:
    """The ``asked`` cores least held by running jobs (the lowest first among equals);
    none when the machine has fewer: the job then runs on all of them."""
    if asked > len(cores):
        return ()
    return tuple(sorted(sorted(cores, key=lambda core: (load[core], core))[:asked]))


def _dooms(upstream: Status) -> bool:
    """An afterok dependency on a job in this state can never be met."""
    if upstream.reason == NEVER_SATISFIED:
        return True
    return upstream.state is not SlurmState.COMPLETED and HEALTH[upstream.state] in ENDED
