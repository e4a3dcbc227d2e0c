"""``LocalScheduler``: the Scheduler protocol on this machine, with no Slurm.

See the package docstring for what it does and how; this class only validates requests,
writes them to the store, and reads the store back as observations.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shlex
import socket
import time
from collections.abc import Iterator, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.errors import (
    ObservationError,
    PermanentSchedulerError,
    TransientSchedulerError,
)
from reconciler.scheduler.base import AllocateRequest, Observation, ObservedJob, SubmitRequest
from reconciler.scheduler.local.decide import CANCELLED_ALONE, Cancel, Status, assess
from reconciler.scheduler.local.directives import (
    DirectiveError,
    Directives,
    expand_pattern,
    has_shebang,
    parse_directives,
)
from reconciler.scheduler.local.dispatch import dispatch, dispatch_locked
from reconciler.scheduler.local.environment import (
    array_environment,
    inherited_names,
    job_environment,
)
from reconciler.scheduler.local.gpus import machine_gpus
from reconciler.scheduler.local.processes import signal_group
from reconciler.scheduler.local.records import PARTITION, in_window, observed_array, observed_job
from reconciler.scheduler.local.store import ArrayTask, JobSpec, Snapshot, Store, machine_cpus
from reconciler.scheduler.partitions import Gres, Node, Partition
from reconciler.scheduler.render import allocation_options
from reconciler.scheduler.tag import Tag

DEFAULT_OUTPUT = "slurm-%j.out"  # sbatch's, relative to the working directory
DEFAULT_ARRAY_OUTPUT = "slurm-%A_%a.out"  # sbatch's for an array's tasks
ALLOCATE_WAIT = 10.0  # seconds allocate waits for the hold to start before returning
CLOCK_STEP_BACK = timedelta(minutes=5)  # how far the clock may step back between submits
# One more than the highest array index, as Slurm's MaxArraySize: its default, so that an
# array split for one backend fits the other.
MAX_ARRAY_SIZE = 1001


class LocalScheduler:
    """Run batch scripts as local processes, with Slurm's states, ids and dependencies."""

    name = "local"

    def __init__(
        self, state_dir: Path, cpus: int | None = None, gpus: Sequence[str] | None = None
    ) -> None:
        """``state_dir`` is the project's (jobs live under ``<state_dir>/local``, made at
        the first submit); ``cpus`` is how many CPUs jobs may hold at once, this machine's
        by default; ``gpus`` the GPUs, by device id, that jobs may be handed, by default
        those ``RECON_LOCAL_GPUS`` declares or ``nvidia-smi -L`` lists (``gpus``). Both are
        the state directory's: each submit sets them for all."""
        self._store = Store(Path(state_dir).absolute() / "local")
        self._cpus = cpus if cpus is not None else machine_cpus()
        if self._cpus < 1:
            raise ValueError(f"cpus must be at least 1, got {cpus}")
        self._gpus = tuple(gpus) if gpus is not None else machine_gpus(os.environ)
        self._host = socket.gethostname()

    @property
    def root(self) -> Path:
        """Where this scheduler's jobs live: ``<state_dir>/local``."""
        return self._store.root

    def observe(self, since: datetime) -> Observation:
        """Every job of the store's in the window, read without a lock.

        If what was read says a job should start or be cancelled now (its starter died
        before it could), a dispatch pass is run first and the store read again.
        """
        if since.tzinfo is None:
            since = since.astimezone()  # naive: this machine's local time, as on Slurm
        try:
            return self._observe(since)
        except OSError as error:
            raise ObservationError(
                f"the local jobs in {self.root} cannot be read: {error}"
            ) from error

    def accounting(self, job_ids: Sequence[str], since: datetime, until: datetime) -> Observation:
        """The named jobs of the store's seen since ``since`` (its records are kept:
        ``until`` bounds nothing more here), read as ``observe`` reads them."""
        named = {job_id.partition(".")[0].partition("_")[0] for job_id in job_ids}
        seen = self.observe(since)
        return seen.model_copy(update={"jobs": tuple(j for j in seen.jobs if j.job_id in named)})

    def _observe(self, since: datetime) -> Observation:
        if not self._store.root.exists():  # nothing was ever submitted; leave no trace
            return Observation(taken_at=datetime.now(UTC), jobs=(), complete=True)
        snapshot = self._snapshot(since)
        assessment = assess(snapshot.facts, self._store.total_cpus(), self._store.gpus())
        if (assessment.start or assessment.cancel) and dispatch(self._store, blocking=False):
            snapshot = self._snapshot(since)
            assessment = assess(snapshot.facts, self._store.total_cpus(), self._store.gpus())
        taken_at = datetime.now(UTC)
        return self._observation(snapshot, assessment.status, since, taken_at)

    def _snapshot(self, since: datetime) -> Snapshot:
        # Every job not final yet, and every one submitted in the window (less a margin
        # for the clock stepping back between submits: ids follow submit order), and
        # every task of an array one of those is a task of: an array is reported whole.
        recent = self._store.submitted_since(since - CLOCK_STEP_BACK)
        active = self._store.active_ids()
        snapshot = self._store.snapshot([*active, *recent], gathered=True)
        siblings = {
            task
            for spec in snapshot.specs.values()
            if spec.array is not None
            for task in spec.array.job_ids
        }
        if siblings <= snapshot.specs.keys():
            return snapshot
        return self._store.snapshot([*snapshot.specs, *siblings], gathered=True)

    def _observation(
        self, snapshot: Snapshot, status: Mapping[int, Status], since: datetime, now: datetime
    ) -> Observation:
        jobs: list[ObservedJob] = []
        arrays: dict[int, list[int]] = {}
        for job_id, spec in snapshot.specs.items():
            if spec.array is not None:
                arrays.setdefault(spec.array.array_id, []).append(job_id)
                continue
            facts, job_status = snapshot.facts[job_id], status[job_id]
            if not in_window(spec, facts, job_status, since):
                continue
            job = observed_job(spec, facts, job_status, self._host, now)
            if job is not None:
                jobs.append(job)
        for tasks in arrays.values():
            seen = [(snapshot.specs[t], snapshot.facts[t], status[t]) for t in sorted(tasks)]
            if any(in_window(*task, since) for task in seen):
                array = observed_array(seen, self._host, now)
                if array is not None:
                    jobs.append(array)
        jobs.sort(key=lambda job: int(job.job_id))
        return Observation(
            taken_at=now,
            jobs=tuple(jobs),
            complete=not snapshot.problems,
            problems=snapshot.problems,
            skipped=snapshot.problems,
        )

    def submit(self, request: SubmitRequest) -> str:
        """Queue the script and start it at once if its dependencies are met and its CPUs
        free; returns its id. Refused (PermanentSchedulerError) as sbatch would refuse it:
        no shebang, an unreadable ``#SBATCH`` value, a dependency on no known job."""
        if not has_shebang(request.script):
            raise PermanentSchedulerError(
                "the script does not start with #! and an interpreter, which sbatch "
                "requires too (e.g. #!/bin/bash)"
            )
        try:
            directives = parse_directives(request.script)
        except DirectiveError as error:
            raise PermanentSchedulerError(f"the script's #SBATCH header: {error}") from None
        if request.array is not None and request.array.indices[-1] >= MAX_ARRAY_SIZE:
            raise PermanentSchedulerError(
                f"Invalid job array specification: index {request.array.indices[-1]} is "
                f"not below MaxArraySize ({MAX_ARRAY_SIZE}); split the array"
            )
        with _stopped_by_os_errors(f"submit a job to {self.root}"):
            return self._enqueue(request, directives)

    def _enqueue(self, request: SubmitRequest, directives: Directives) -> str:
        workdir = Path(request.workdir).absolute()
        # The job's declared environment, whole; else the submitter's, as sbatch gives it
        # (less an outer Slurm job's variables), its values passed by name.
        declared = request.environment is not None
        submitter = dict(os.environ) if request.environment is None else dict(request.environment)
        submit_dir = os.getcwd()
        array = request.array
        self._store.prepare()
        passed: dict[int, tuple[str, ...]] = {}
        with self._store.locked():
            self._store.set_total_cpus(self._cpus)
            self._store.set_gpus(self._gpus)
            dependencies = self._waited_for(request.dependencies)

            def build(first: int, job_id: int) -> tuple[JobSpec, dict[str, str]]:
                task = None
                if array is not None:
                    index = array.indices[job_id - first]
                    task = ArrayTask(first, index, len(array.indices), array.max_parallel)
                spec = self._spec(job_id, request.tag, directives, workdir, dependencies, task)
                env = job_environment(
                    submitter,
                    whole=declared,
                    job_id=str(job_id),
                    job_name=spec.name,
                    components=spec.components,
                    host=self._host,
                    bin_dir=str(self._store.bin_dir),
                    submit_dir=submit_dir,
                )
                if array is not None and task is not None:
                    env |= array_environment(str(first), task.index, array.indices)
                passed[job_id] = request.passed if declared else inherited_names(submitter, env)
                return spec, env

            count = 1 if array is None else len(array.indices)
            first, *_ = self._store.create(build, request.script, count, passed.get)
            dispatch_locked(self._store)
        return str(first.job_id)

    def _waited_for(self, dependencies: tuple[str, ...]) -> tuple[int, ...]:
        """The local jobs behind each dependency (under the lock): a job array's id stands
        for every one of its tasks, ``<array>_<index>`` for that task alone."""
        found: list[int] = []
        unknown: list[str] = []
        for dependency in dependencies:
            ids = self._jobs_of(dependency)
            found += ids
            if not ids:
                unknown.append(dependency)
        if unknown:
            raise PermanentSchedulerError(
                f"Job dependency problem: no local job {', '.join(unknown)} in {self._store.root}"
            )
        return tuple(dict.fromkeys(found))

    def _jobs_of(self, job_id: str) -> list[int]:
        """The local jobs a job id names: itself, every task of an array (by the array's
        id), or one array task (``12_3``); none for an id the store does not hold."""
        top, _, index = job_id.partition("_")
        if not top.isdigit() or (index and not index.isdigit()):
            return []
        spec = self._store.spec(int(top))
        if spec is None:
            return []
        array = spec.array
        if array is None or array.array_id != spec.job_id:
            return [] if index else [spec.job_id]
        if not index:
            return list(array.job_ids)
        tasks = (self._store.spec(task) for task in array.job_ids)
        return [
            task.job_id
            for task in tasks
            if task is not None and task.array is not None and task.array.index == int(index)
        ]

    def _spec(
        self,
        job_id: int,
        tag: Tag,
        directives: Directives,
        workdir: Path,
        dependencies: tuple[int, ...],
        array: ArrayTask | None,
    ) -> JobSpec:
        place = None if array is None else (str(array.array_id), array.index)

        def log_file(pattern: str) -> str:
            name = expand_pattern(
                pattern,
                job_id=str(job_id),
                job_name=tag.job_name,
                user=_user(),
                host=self._host,
                array=place,
            )
            return str(workdir / name)  # an absolute name stays as it is

        limit = directives.time_limit
        default_output = DEFAULT_OUTPUT if array is None else DEFAULT_ARRAY_OUTPUT
        return JobSpec(
            job_id=job_id,
            name=tag.job_name,
            comment=tag.format(),
            workdir=str(workdir),
            dependencies=dependencies,
            components=directives.components,
            stdout=log_file(directives.output or default_output),
            stderr=None if directives.error is None else log_file(directives.error),
            time_limit=None if limit is None else limit.total_seconds(),
            submitted=datetime.now(UTC),
            array=array,
            warning=directives.warning,
        )

    def cancel(self, job_id: str) -> None:
        """Mark the job cancelled and SIGTERM its process group (its supervisor sends
        SIGKILL after ``KILL_WAIT`` if anything is left). Unknown or ended is fine.

        An array's id cancels every task of it; ``<array>_<index>`` that task alone. A
        task cancelled alone before it started is forgotten, as Slurm forgets it."""
        if not self._store.root.exists():
            return
        with _stopped_by_os_errors(f"cancel job {job_id} in {self.root}"), self._store.locked():
            now = datetime.now(UTC)
            alone = "_" in job_id
            cancelled = False
            for task in self._jobs_of(job_id):
                spec = self._store.spec(task)
                facts = None if spec is None else self._store.facts(spec)
                if facts is None or facts.final or facts.cancelled is not None:
                    continue
                forgotten = alone and facts.started is None
                reason = CANCELLED_ALONE if forgotten else None
                self._store.write_cancelled(task, Cancel(now, os.getuid(), reason))
                cancelled = True
                group = self._store.process_group(task)
                if group is not None:
                    signal_group(group)
            if cancelled:  # its dependents are doomed now, not when its processes are gone
                dispatch_locked(self._store)

    def allocate(self, request: AllocateRequest) -> str:
        """A held allocation is a local job that holds its CPUs and sleeps until released
        or its ``--time`` runs out (then TIMEOUT, as on Slurm). Nothing can run inside it:
        ``srun --jobid`` has no local meaning. Returns once it holds its CPUs, or after
        ``ALLOCATE_WAIT`` seconds while it still waits for them."""
        options = "".join(
            f"#SBATCH {shlex.quote(option)}\n" for option in allocation_options(request.allocation)
        )
        script = f"#!/bin/sh\n{options}#SBATCH --output=/dev/null\nexec sleep 2147483647\n"
        job_id = self.submit(SubmitRequest(script=script, workdir=self.root, tag=request.tag))
        deadline = time.monotonic() + ALLOCATE_WAIT
        while time.monotonic() < deadline:
            spec = self._store.spec(int(job_id))
            if spec is not None and self._store.facts(spec).started is not None:
                break
            time.sleep(0.02)
        return job_id

    def release(self, job_id: str) -> None:
        self.cancel(job_id)

    def max_array_size(self) -> int:
        """``MAX_ARRAY_SIZE``: the local backend has no configuration of its own for it."""
        return MAX_ARRAY_SIZE

    def partitions(self) -> tuple[Partition, ...]:
        """This machine, as one default partition ``local`` of one node: the CPUs jobs may
        hold, the memory it has and the GPUs jobs may be handed (untyped: a job's GPU type
        means nothing here). The backend itself ignores partition names; only CPUs and
        GPUs can keep a job waiting."""
        gres = (Gres(name="gpu", count=len(self._gpus)),) if self._gpus else ()
        node = Node(
            name=self._host,
            cpus=self._cpus,
            memory_mb=_memory_mb(),
            gres=gres,
            state="idle",
        )
        return (Partition(name=PARTITION, default=True, nodes=(node,)),)


@contextlib.contextmanager
def _stopped_by_os_errors(doing: str) -> Iterator[None]:
    """The state directory failing (not writable, disk full) stops this apply; the next
    pass tries again: the scheduler did not refuse the request itself."""
    try:
        yield
    except OSError as error:
        raise TransientSchedulerError(
            f"could not {doing}: {error}; check that the state directory is writable"
        ) from error


def _memory_mb() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") // 2**20
    except (ValueError, OSError):  # a system that does not say
        return 0


def _user() -> str:
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return str(os.getuid())
