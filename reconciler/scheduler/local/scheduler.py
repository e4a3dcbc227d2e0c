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
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.errors import (
    ObservationError,
    PermanentSchedulerError,
    TransientSchedulerError,
)
from reconciler.scheduler.base import AllocateRequest, Observation, ObservedJob, SubmitRequest
from reconciler.scheduler.local.decide import Cancel, Status, assess
from reconciler.scheduler.local.directives import (
    DirectiveError,
    Directives,
    expand_pattern,
    has_shebang,
    parse_directives,
)
from reconciler.scheduler.local.dispatch import dispatch, dispatch_locked
from reconciler.scheduler.local.environment import job_environment
from reconciler.scheduler.local.processes import signal_group
from reconciler.scheduler.local.records import PARTITION, in_window, observed_job
from reconciler.scheduler.local.store import JobSpec, Snapshot, Store, machine_cpus
from reconciler.scheduler.partitions import Node, Partition
from reconciler.scheduler.render import allocation_options
from reconciler.scheduler.tag import Tag

DEFAULT_OUTPUT = "slurm-%j.out"  # sbatch's, relative to the working directory
ALLOCATE_WAIT = 10.0  # seconds allocate waits for the hold to start before returning
CLOCK_SLACK = timedelta(minutes=5)  # how far the clock may step back between submits


class LocalScheduler:
    """Run batch scripts as local processes, with Slurm's states, ids and dependencies."""

    name = "local"

    def __init__(self, state_dir: Path, cpus: int | None = None) -> None:
        """``state_dir`` is the project's (jobs live under ``<state_dir>/local``, made at
        the first submit); ``cpus`` is how many CPUs jobs may hold at once, this machine's
        by default. The count is the state directory's: each submit sets it for all."""
        self._store = Store(Path(state_dir).absolute() / "local")
        self._cpus = cpus if cpus is not None else machine_cpus()
        if self._cpus < 1:
            raise ValueError(f"cpus must be at least 1, got {cpus}")
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

    def _observe(self, since: datetime) -> Observation:
        if not self._store.root.exists():  # nothing was ever submitted; leave no trace
            return Observation(taken_at=datetime.now(UTC), jobs=(), complete=True)
        snapshot = self._snapshot(since)
        assessment = assess(snapshot.facts, self._store.total_cpus())
        if (assessment.start or assessment.cancel) and dispatch(self._store, blocking=False):
            snapshot = self._snapshot(since)
            assessment = assess(snapshot.facts, self._store.total_cpus())
        taken_at = datetime.now(UTC)
        return self._observation(snapshot, assessment.status, since, taken_at)

    def _snapshot(self, since: datetime) -> Snapshot:
        # Every job not final yet, and every one submitted in the window (less a margin
        # for the clock stepping back between submits: ids follow submit order).
        recent = self._store.submitted_since(since - CLOCK_SLACK)
        return self._store.snapshot([*self._store.active_ids(), *recent], gathered=True)

    def _observation(
        self, snapshot: Snapshot, status: Mapping[int, Status], since: datetime, now: datetime
    ) -> Observation:
        jobs: list[ObservedJob] = []
        for job_id, spec in snapshot.specs.items():
            facts, job_status = snapshot.facts[job_id], status[job_id]
            if not in_window(spec, facts, job_status, since):
                continue
            job = observed_job(spec, facts, job_status, self._host, now)
            if job is not None:
                jobs.append(job)
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
        with _stopped_by_os_errors(f"submit a job to {self.root}"):
            return self._enqueue(request, directives)

    def _enqueue(self, request: SubmitRequest, directives: Directives) -> str:
        dependencies = tuple(int(dep) for dep in request.dependencies)
        workdir = Path(request.workdir).absolute()
        submitter = dict(os.environ)
        submit_dir = os.getcwd()
        self._store.prepare()
        with self._store.locked():
            self._store.set_total_cpus(self._cpus)
            unknown = [dep for dep in dependencies if self._store.spec(dep) is None]
            if unknown:
                raise PermanentSchedulerError(
                    f"Job dependency problem: no local job {', '.join(map(str, unknown))} "
                    f"in {self._store.root}"
                )

            def build(job_id: int) -> tuple[JobSpec, dict[str, str]]:
                spec = self._spec(job_id, request.tag, directives, workdir, dependencies)
                env = job_environment(
                    submitter,
                    job_id=str(job_id),
                    job_name=spec.name,
                    components=spec.components,
                    host=self._host,
                    bin_dir=str(self._store.bin_dir),
                    submit_dir=submit_dir,
                )
                return spec, env

            spec = self._store.create(build, request.script)
            dispatch_locked(self._store)
        return str(spec.job_id)

    def _spec(
        self,
        job_id: int,
        tag: Tag,
        directives: Directives,
        workdir: Path,
        dependencies: tuple[int, ...],
    ) -> JobSpec:
        def log_file(pattern: str) -> str:
            name = expand_pattern(
                pattern, job_id=str(job_id), job_name=tag.job_name, user=_user(), host=self._host
            )
            return str(workdir / name)  # an absolute name stays as it is

        limit = directives.time_limit
        return JobSpec(
            job_id=job_id,
            name=tag.job_name,
            comment=tag.format(),
            workdir=str(workdir),
            dependencies=dependencies,
            components=directives.components,
            stdout=log_file(directives.output or DEFAULT_OUTPUT),
            stderr=None if directives.error is None else log_file(directives.error),
            time_limit=None if limit is None else limit.total_seconds(),
            submitted=datetime.now(UTC),
        )

    def cancel(self, job_id: str) -> None:
        """Mark the job cancelled and SIGTERM its process group (its supervisor sends
        SIGKILL after ``KILL_WAIT`` if anything is left). Unknown or ended is fine."""
        if not job_id.isdigit() or not self._store.root.exists():
            return
        with _stopped_by_os_errors(f"cancel job {job_id} in {self.root}"), self._store.locked():
            spec = self._store.spec(int(job_id))
            if spec is None:
                return
            facts = self._store.facts(spec)
            if facts.final or facts.cancelled is not None:
                return
            self._store.write_cancelled(spec.job_id, Cancel(datetime.now(UTC), os.getuid()))
            group = self._store.process_group(spec.job_id)
            if group is not None:
                signal_group(group)
            # Its dependents are doomed now, not when its processes are gone.
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

    def partitions(self) -> tuple[Partition, ...]:
        """This machine, as one default partition ``local`` of one node: the CPUs jobs may
        hold and the memory it has. The backend itself ignores partition names, memory and
        GPUs (a run asking them runs all the same); only CPUs can keep a job waiting."""
        node = Node(
            name=self._host,
            cpus=self._cpus,
            memory_mb=_memory_mb(),
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
