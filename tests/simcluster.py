"""A scripted cluster for generated fault histories: a Scheduler whose jobs the test moves
on by hand, and whose answers it can make lag, fail, forget jobs or hand out reused ids.

It keeps Slurm's shape where recon reads it: one row per job (per task for an array), ids
given out in order, dependencies that must complete first (a dependent waits with reason
`Dependency`; a failed dependency cancels it with reason `DependencyNeverSatisfied`), an
array's `max_parallel`, a job ended by `scancel` shown CANCELLED by its user with exit code
0 (an array task cancelled alone before it started is forgotten, unless it is the last),
what each job held and for how long (sacct's AllocTRES, ElapsedRaw and TimelimitRaw, from
its header). A job that completes runs its batch script with bash in its working directory,
as slurmd would, its output in the script's `--output` (Slurm's default name without one),
so its outputs are on disk as a real job's are; one that fails leaves what it wrote so far
and exits non-zero.

Not a stand-in for the adapters (they are tested on the real dev cluster); the engine is
what the histories drive, and this is what they drive it against. The scheduler contract
(tests/contract) runs against it too, so where it answers, it answers as Slurm does; what
it does not do at all (het jobs, memory and time limits, scripts that run while their job
runs, accounting asked by job id) is marked there, with the reason.
"""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import TypedDict

from reconciler.errors import ObservationError, PermanentSchedulerError, TransientSchedulerError
from reconciler.scheduler.base import (
    AllocateRequest,
    ArrayRequest,
    Held,
    JobRecord,
    Observation,
    ObservedJob,
    StepRequest,
    SubmitRequest,
    UntaggedJob,
)
from reconciler.scheduler.local.directives import DirectiveError, expand_pattern, parse_directives
from reconciler.scheduler.partitions import Node, Partition
from reconciler.scheduler.runfolder import CHECKPOINTED_DIR
from reconciler.scheduler.slurm.steps import step_runs
from reconciler.scheduler.states import SlurmState
from reconciler.scheduler.tag import Tag

ALIVE = frozenset({SlurmState.PENDING, SlurmState.RUNNING})
# How a job can end, as the histories pick them.
ENDINGS = (
    SlurmState.COMPLETED,
    SlurmState.FAILED,
    SlurmState.CANCELLED,
    SlurmState.TIMEOUT,
    SlurmState.NODE_FAIL,
    SlurmState.OUT_OF_MEMORY,
    SlurmState.PREEMPTED,
)


# A job stopped before its command finished, when its run checkpoints.
_STOPPED = (SlurmState.TIMEOUT, SlurmState.PREEMPTED)
CHECKPOINT_LINE = "# recon checkpoint:"
# Slurm's MaxArraySize as the dev clusters (and Slurm's default) set it.
MAX_ARRAY_SIZE = 1001
# The one node every job runs on.
NODE = "sim1"


def one_node(cpus: int = 8, memory_mb: int = 16384) -> Partition:
    """A partition of the one node, the default, for ``SimCluster.sinfo``."""
    node = Node(name=NODE, cpus=cpus, memory_mb=memory_mb, state="idle")
    return Partition(name="sim", default=True, nodes=(node,))


@dataclass
class SimTask:
    index: int | None  # None: a plain job
    state: SlurmState = SlurmState.PENDING
    exit_code: int | None = None
    reason: str | None = None
    start: datetime | None = None
    end: datetime | None = None
    cancelled_by: int | None = None  # the uid that cancelled it, as sacct names it


@dataclass
class SimStep:
    """A step started in an allocation's job (``srun --jobid``): a run's, or setup's."""

    number: int
    tag: Tag  # its name: steps have no comment
    script: str
    workdir: str
    log_dir: str  # its output goes to slurm-<job>.<step>.out and .err here, as srun's
    state: SlurmState = SlurmState.RUNNING
    exit_code: int | None = None
    start: datetime | None = None
    end: datetime | None = None
    index: None = None  # as a plain job's task: the histories pick endings for both


@dataclass
class SimJob:
    job_id: str
    tag: Tag | None  # None: a job of this user's without a recon tag
    submit: datetime
    script: str
    workdir: str
    dependencies: tuple[str, ...]
    tasks: list[SimTask]
    hidden_for: int = 0  # observations that do not show its end yet (accounting lag)
    foreign: bool = False  # not recon's: the test never moves it on
    limit: datetime | None = None  # an allocation's end (salloc --time); None: a batch job
    steps: list[SimStep] = field(default_factory=list)
    max_parallel: int | None = None  # an array's tasks running at once (Slurm's %N)
    # What each task holds once it starts (sacct's AllocTRES) and its limit (TimelimitRaw),
    # from its --cpus-per-task, --ntasks, --mem and --time
    held: Held = field(default_factory=lambda: Held(cpus=1, nodes=1))
    time_limit: timedelta | None = None

    @property
    def alive(self) -> bool:
        return any(task.state in ALIVE for task in self.tasks)


@dataclass
class Faults:
    """What the cluster does wrong now; the histories switch these on and off."""

    observe_fails: bool = False  # squeue/sacct unreachable: ObservationError
    partial: bool = False  # sacct failed, squeue answered: complete=False, ended jobs left out
    submit_fails: bool = False  # sbatch refused for now (TransientSchedulerError), no job
    reply_lost: bool = False  # sbatch made the job, but its answer never came back
    # A job that ends is in neither squeue nor sacct for this many observations: it left
    # squeue, and slurmctld's accounting pass has not put it in sacct's window yet. A
    # live job is always shown (squeue is the authority for those).
    lag: int = 0


@dataclass
class SimCluster:
    """The cluster: a Scheduler (``observe``, ``submit``, ``cancel``, ...) and the test's
    levers (``start``, ``end``, ``forget``, ``faults``)."""

    clock: Callable[[], datetime]
    name: str = "slurm"
    jobs: dict[str, SimJob] = field(default_factory=dict)
    faults: Faults = field(default_factory=Faults)
    cancels: list[str] = field(default_factory=list)  # every id scancel was given, in order
    submissions: int = 0
    _next: int = 1000
    _free_ids: list[str] = field(default_factory=list)  # lost by a crash, handed out again
    reuse_ids: bool = True  # hand the ids of forgotten jobs out again
    # What sinfo lists: one partition of the one node every job runs on, when given (its
    # name is then each job's partition, and a job asking more CPUs than the node has
    # waits for ever, as Slurm 22.05 keeps it); None: sinfo is not simulated, fit unknown
    sinfo: Partition | None = None
    _mutex: threading.RLock = field(default_factory=threading.RLock)

    # -- the Scheduler protocol ----------------------------------------------------------

    def observe(self, since: datetime) -> Observation:
        with self._mutex:
            if self.faults.observe_fails:
                raise ObservationError("squeue: slurm_load_jobs error: Socket timed out")
            tagged: list[ObservedJob] = []
            untagged: list[UntaggedJob] = []
            for job in self.jobs.values():
                if job.hidden_for > 0 and not job.alive:
                    job.hidden_for -= 1
                    continue
                if self.faults.partial and not job.alive:
                    continue  # only squeue answered: it lists live jobs alone
                if not job.alive and job.submit < since:
                    continue  # outside sacct's window
                rows = tuple(self._rows(job))
                if job.tag is None:
                    untagged.append(UntaggedJob(job_id=job.job_id, rows=rows))
                else:
                    observed = ObservedJob(job_id=job.job_id, tag=job.tag, rows=rows)
                    tagged += [observed, *step_runs(observed)]  # as the adapter does
            return Observation(
                taken_at=self.clock(),
                jobs=tuple(tagged),
                untagged=tuple(untagged),
                complete=not self.faults.partial,
                problems=("sacct: Connection refused",) if self.faults.partial else (),
            )

    def submit(self, request: SubmitRequest) -> str:
        with self._mutex:
            if self.faults.submit_fails:
                raise TransientSchedulerError("sbatch: error: Slurm temporarily unable")
            for dependency in request.dependencies:
                if dependency.split("_")[0] not in self.jobs:
                    raise PermanentSchedulerError(
                        "sbatch: error: Batch job submission failed: Job dependency problem"
                    )
            if request.array is not None and request.array.indices[-1] >= MAX_ARRAY_SIZE:
                raise PermanentSchedulerError(
                    "sbatch: error: Batch job submission failed: Invalid job array specification"
                )
            reused = self._free_ids and self.reuse_ids
            job_id = self._free_ids.pop(0) if reused else self._new_id()
            indices = request.array.indices if request.array is not None else (None,)
            self.jobs[job_id] = SimJob(
                job_id=job_id,
                tag=request.tag,
                submit=self.clock(),
                script=request.script,
                workdir=str(request.workdir),
                dependencies=request.dependencies,
                tasks=[SimTask(index) for index in indices],
                max_parallel=_max_parallel(request.array),
                **_holding(request.script),
            )
            self.submissions += 1
            if self.faults.reply_lost:
                raise TransientSchedulerError("sbatch: error: Socket timed out on send/recv")
            return job_id

    def cancel(self, job_id: str) -> None:
        with self._mutex:
            self.cancels.append(job_id)
            top, _, task = job_id.partition("_")
            job = self.jobs.get(top)
            if job is None:
                return
            if len(job.tasks) > 1 and any(
                str(each.index) == task and each.state is SlurmState.PENDING for each in job.tasks
            ):
                # A task cancelled alone before it started is forgotten, as Slurm takes it
                # out of the array's pending range; the last one ends CANCELLED as the job.
                job.tasks = [each for each in job.tasks if str(each.index) != task]
            for each in job.tasks:
                if each.state in ALIVE and (not task or str(each.index) == task):
                    each.state, each.end = SlurmState.CANCELLED, self.clock()
                    each.exit_code, each.cancelled_by = 0, os.getuid()  # sacct: 0:0, by uid
            for step in job.steps:  # an allocation's steps end with it
                if step.state in ALIVE and not job.alive:
                    step.state, step.end = SlurmState.CANCELLED, self.clock()
            if not job.alive:
                job.hidden_for = self.faults.lag

    def max_array_size(self) -> int:
        return MAX_ARRAY_SIZE

    def allocate(self, request: AllocateRequest) -> str:
        """``salloc --no-shell``: a job holding its nodes at once, for its time limit."""
        with self._mutex:
            if self.faults.submit_fails:
                raise TransientSchedulerError("salloc: error: Slurm temporarily unable")
            reused = self._free_ids and self.reuse_ids
            job_id = self._free_ids.pop(0) if reused else self._new_id()
            now = self.clock()
            self.jobs[job_id] = SimJob(
                job_id=job_id, tag=request.tag, submit=now, script="", workdir="/",
                dependencies=(), tasks=[SimTask(None, SlurmState.RUNNING, start=now)],
                limit=now + timedelta(seconds=request.allocation.time_limit.seconds),
                held=Held(cpus=cpus.count if (cpus := request.allocation.resources.cpus) else 1,
                          nodes=1),
                time_limit=timedelta(seconds=request.allocation.time_limit.seconds),
            )  # fmt: skip
            self.submissions += 1
            if self.faults.reply_lost:
                raise TransientSchedulerError("salloc: error: Socket timed out on send/recv")
            return job_id

    def release(self, job_id: str) -> None:
        self.cancel(job_id)

    def containers(self) -> frozenset[str]:
        return frozenset()  # no pyxis

    def start_step(self, request: StepRequest) -> str | None:
        """``srun --jobid`` of one step, detached; running at once (no room is kept)."""
        with self._mutex:
            if self.faults.submit_fails:
                raise TransientSchedulerError("srun: error: Slurm temporarily unable")
            job = self.jobs.get(request.allocation_id)
            if job is None or job.limit is None or not job.alive:
                raise PermanentSchedulerError(
                    f"srun: error: Unable to confirm allocation for job {request.allocation_id}"
                )
            step = SimStep(
                number=len(job.steps), tag=request.tag, script=request.script.read_text(),
                workdir=str(request.workdir), log_dir=str(request.log_dir), start=self.clock(),
            )  # fmt: skip
            job.steps.append(step)
            return f"{job.job_id}.{step.number}"

    def partitions(self) -> tuple[Partition, ...]:
        if self.sinfo is None:
            raise ObservationError("sinfo: not simulated: fit unknown")
        return (self.sinfo,)

    # -- the test's levers ---------------------------------------------------------------

    def add_foreign(self, tag: Tag | None) -> str:
        """A live job recon must never touch: another deployment's, another project's, or
        one without a tag."""
        with self._mutex:
            job_id = self._new_id()
            self.jobs[job_id] = SimJob(
                job_id, tag, self.clock(), "#!/bin/bash\nsleep 1000\n", "/", (),
                [SimTask(None, SlurmState.RUNNING, start=self.clock())], foreign=True,
            )  # fmt: skip
            return job_id

    def live(self) -> list[SimJob]:
        with self._mutex:
            return [job for job in self.jobs.values() if job.alive]

    def step(self, ending_for: Callable[[SimJob, SimTask | SimStep], SlurmState | None]) -> None:
        """Move every job on once: a pending one whose dependencies completed starts (one
        whose dependency ended badly is cancelled, as `--kill-on-invalid-dep` does), and a
        running one ends as ``ending_for`` says (None: it keeps running)."""
        with self._mutex:
            for job in list(self.jobs.values()):
                was_alive = job.alive
                for step in job.steps:
                    if step.state is SlurmState.RUNNING:
                        ending = ending_for(job, step)
                        if ending is not None:
                            self._end_step(job, step, ending)
                for task in job.tasks:
                    if task.state is SlurmState.PENDING:
                        if job.max_parallel is None or self._running(job) < job.max_parallel:
                            self._maybe_start(job, task)
                    elif job.limit is not None:
                        self._expire(job, task)  # an allocation ends at its time limit only
                    elif task.state is SlurmState.RUNNING and not job.foreign:
                        ending = ending_for(job, task)
                        if ending is not None:
                            self._end(job, task, ending)
                if was_alive and not job.alive:
                    job.hidden_for = self.faults.lag  # just ended: accounting lags

    def forget(self, job_id: str) -> None:
        """slurmctld killed and restarted lost this job; its id is handed out again."""
        with self._mutex:
            if self.jobs.pop(job_id, None) is not None:
                self._free_ids.append(job_id)

    # -- inside --------------------------------------------------------------------------

    def _new_id(self) -> str:
        self._next += 1
        while str(self._next) in self.jobs:
            self._next += 1
        return str(self._next)

    @staticmethod
    def _running(job: SimJob) -> int:
        return sum(task.state is SlurmState.RUNNING for task in job.tasks)

    def _maybe_start(self, job: SimJob, task: SimTask) -> None:
        if self.sinfo is not None and job.held.cpus > max(n.cpus for n in self.sinfo.nodes):
            task.reason = "PartitionConfig"  # more CPUs than any node has: it never starts
            return
        states = [self._state_of(dependency) for dependency in job.dependencies]
        if any(state is None or state not in (SlurmState.COMPLETED, *ALIVE) for state in states):
            task.state, task.reason, task.end, task.exit_code = (
                SlurmState.CANCELLED, "DependencyNeverSatisfied", self.clock(), 0
            )  # fmt: skip
        elif all(state is SlurmState.COMPLETED for state in states):
            task.state, task.start, task.reason = SlurmState.RUNNING, self.clock(), None
        else:
            task.reason = "Dependency"  # squeue's word while a dependency is still to come

    def _state_of(self, dependency: str) -> SlurmState | None:
        top, _, index = dependency.partition("_")
        job = self.jobs.get(top)
        if job is None:
            return None
        tasks = [t for t in job.tasks if not index or str(t.index) == index]
        if any(t.state in ALIVE for t in tasks):
            return SlurmState.PENDING
        if all(t.state is SlurmState.COMPLETED for t in tasks):
            return SlurmState.COMPLETED
        return SlurmState.FAILED

    def _end(self, job: SimJob, task: SimTask, ending: SlurmState) -> None:
        if ending in _STOPPED and CHECKPOINT_LINE in job.script:
            # A checkpointing run's job stopped by its time limit or a preemption: its
            # command never finished, and published nothing. One with an even id had
            # saved its checkpoint when warned and left the script's marker.
            if int(job.job_id.split("_")[0]) % 2 == 0:
                marker = Path(job.workdir, CHECKPOINTED_DIR, job.job_id)
                marker.parent.mkdir(parents=True, exist_ok=True)
                marker.touch()
            task.state, task.end, task.exit_code = ending, self.clock(), None
            return
        code = self._run(job, task, fail=ending is not SlurmState.COMPLETED)
        if ending is SlurmState.COMPLETED and code != 0:
            ending = SlurmState.FAILED
        task.state, task.end = ending, self.clock()
        task.exit_code = code if ending in (SlurmState.COMPLETED, SlurmState.FAILED) else None

    def _expire(self, job: SimJob, task: SimTask) -> None:
        assert job.limit is not None
        if task.state is SlurmState.RUNNING and self.clock() >= job.limit:
            task.state, task.end = SlurmState.TIMEOUT, self.clock()
            for step in job.steps:
                if step.state in ALIVE:
                    step.state, step.end = SlurmState.CANCELLED, self.clock()

    def _end_step(self, job: SimJob, step: SimStep, ending: SlurmState) -> None:
        fail = ending is not SlurmState.COMPLETED
        env = {"SLURM_JOB_ID": job.job_id, "SLURM_STEP_ID": str(step.number)}
        logs = Path(step.log_dir) / f"slurm-{job.job_id}.{step.number}"
        code = self._bash(
            step.script + ("\nexit 1\n" if fail else ""), step.workdir, env,
            Path(f"{logs}.out"), Path(f"{logs}.err"),
        )  # fmt: skip
        if ending is SlurmState.COMPLETED and code != 0:
            ending = SlurmState.FAILED
        step.state, step.end = ending, self.clock()
        step.exit_code = (1 if fail else code) if ending is not SlurmState.CANCELLED else None

    def _run(self, job: SimJob, task: SimTask, *, fail: bool) -> int:
        """The batch script, run as slurmd would; a job that fails stops after its
        command with status 1, its output as far as it got."""
        env = {"SLURM_JOB_ID": job.job_id}
        if task.index is not None:
            env |= {"SLURM_ARRAY_JOB_ID": job.job_id, "SLURM_ARRAY_TASK_ID": str(task.index)}
        output, error = _log_paths(job, task)
        code = self._bash(
            job.script + ("\nexit 1\n" if fail else ""), job.workdir, env, output, error
        )
        return 1 if fail else code

    @staticmethod
    def _bash(
        script: str, workdir: str, env: dict[str, str], output: Path, error: Path | None
    ) -> int:
        """Run ``script``, its stdout to ``output`` and its stderr to ``error`` (None:
        with stdout), as slurmstepd opens them: a folder that does not exist loses them."""
        base = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": os.environ.get("HOME", "/root"),
        }
        done = subprocess.run(
            ["bash", "-s"], input=script, cwd=workdir, env=base | env, text=True,
            capture_output=True, timeout=60,
        )  # fmt: skip
        streams = [(output, done.stdout + ("" if error else done.stderr))]
        if error is not None:
            streams.append((error, done.stderr))
        for path, text in streams:
            if path.parent.is_dir():
                with path.open("a") as log:
                    log.write(text)
        return done.returncode

    def _rows(self, job: SimJob) -> list[JobRecord]:
        rows = []
        for task in job.tasks:
            job_id = job.job_id if task.index is None else f"{job.job_id}_{task.index}"
            rows.append(
                JobRecord(
                    job_id=job_id,
                    top_id=job.job_id,
                    array_task=None if task.index is None else str(task.index),
                    name=job.tag.job_name if job.tag is not None else "",
                    tag=job.tag,
                    state=task.state,
                    cancelled_by=task.cancelled_by,
                    exit_code=task.exit_code,
                    reason=task.reason,
                    submit=job.submit,
                    start=task.start,
                    end=task.end,
                    nodes=None if task.start is None else NODE,
                    partition=None if self.sinfo is None else self.sinfo.name,
                    held=None if task.start is None else job.held,
                    elapsed=None if task.start is None else (task.end or self.clock()) - task.start,
                    time_limit=job.time_limit,
                    time_left=self._time_left(job) if task.state in ALIVE else None,
                    workdir=job.workdir,
                    source="squeue" if task.state in ALIVE else "sacct",
                )
            )
        for step in job.steps:
            rows.append(
                JobRecord(
                    job_id=f"{job.job_id}.{step.number}",
                    top_id=job.job_id,
                    step=str(step.number),
                    name=step.tag.format(),
                    state=step.state,
                    exit_code=step.exit_code,
                    start=step.start,
                    end=step.end,
                    nodes=NODE,
                    workdir=step.workdir,
                    source="squeue" if step.state in ALIVE else "sacct",
                )
            )
        return rows

    def _time_left(self, job: SimJob) -> timedelta:
        if job.limit is None:
            return timedelta(minutes=10)
        return max(job.limit - self.clock(), timedelta(0))


def _max_parallel(array: ArrayRequest | None) -> int | None:
    return None if array is None else array.max_parallel


class _Holding(TypedDict):
    held: Held
    time_limit: timedelta | None


def _holding(script: str) -> _Holding:
    """What a batch job holds by its ``#SBATCH`` header: its CPUs (per task, times its
    tasks), its memory, one node; and its time limit. Slurm's defaults where it says
    none (one CPU, no memory held, no limit)."""
    try:
        directives = parse_directives(script)
    except DirectiveError:
        return {"held": Held(cpus=1, nodes=1), "time_limit": None}
    first = directives.components[0]
    held = Held(cpus=first.cpus_per_task * first.tasks, memory_mb=first.memory_mb or 0, nodes=1)
    return {"held": held, "time_limit": directives.time_limit}


def _log_paths(job: SimJob, task: SimTask) -> tuple[Path, Path | None]:
    """Where sbatch sends a job's stdout and stderr: its script's ``--output`` and
    ``--error`` as Slurm fills them in, relative to its working directory; without
    ``--output``, ``slurm-%j.out`` (``slurm-%A_%a.out`` for an array task) there."""
    try:
        directives = parse_directives(job.script)
    except DirectiveError:
        directives = None
    default = "slurm-%j.out" if task.index is None else "slurm-%A_%a.out"
    output = directives.output if directives is not None and directives.output else default
    error = directives.error if directives is not None else None
    array = None if task.index is None else (job.job_id, task.index)
    name = job.tag.job_name if job.tag is not None else "sim"

    def filled(pattern: str) -> Path:
        expanded = expand_pattern(
            pattern, job_id=job.job_id, job_name=name, user="sim", host=NODE, array=array
        )
        return Path(job.workdir, expanded)

    return filled(output), None if error is None else filled(error)
