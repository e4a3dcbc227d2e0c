"""``SlurmScheduler``: the Scheduler protocol on a real Slurm, through one swappable runner.

Everything Slurm-specific that is not I/O lives in the pure modules beside this one
(``argv`` builds commands, ``parse`` reads their text, ``combine`` folds an observation,
``failures`` tells transient from permanent); this class only sequences calls and retries.
"""

from __future__ import annotations

import os
import pwd
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import TypeVar

from reconciler.errors import (
    ObservationError,
    PermanentSchedulerError,
    SchedulerError,
    TransientSchedulerError,
)
from reconciler.scheduler.base import (
    AllocateRequest,
    JobRecord,
    Launch,
    Observation,
    StepRequest,
    SubmitRequest,
)
from reconciler.scheduler.jobenv import SLURM_PASSED
from reconciler.scheduler.partitions import Partition
from reconciler.scheduler.slurm import argv
from reconciler.scheduler.slurm.combine import combine
from reconciler.scheduler.slurm.failures import failure, is_gone, message_of
from reconciler.scheduler.slurm.launches import running_launches
from reconciler.scheduler.slurm.localtime import SystemLocalTime
from reconciler.scheduler.slurm.parse import (
    Parsed,
    Rejected,
    parse_granted,
    parse_max_array_size,
    parse_sacct,
    parse_squeue,
    parse_squeue_steps,
    parse_submitted,
    recon_jobs,
    recon_rows,
)
from reconciler.scheduler.slurm.runner import Runner, Spawner, run, spawn_detached
from reconciler.scheduler.slurm.sinfo import parse_sinfo, sinfo
from reconciler.scheduler.slurm.steps import (
    container_features,
    sacct_steps,
    squeue_steps,
    srun,
    step_named,
)
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag

T = TypeVar("T")
Result = subprocess.CompletedProcess[str]

# How long start_step looks for the step it started, every STEP_POLL seconds: while srun
# runs, in squeue (a step srun holds back until the allocation has room is not listed, and
# is found by its name later: srun's own words, "step creation temporarily disabled", reach
# its log only once the step is made); once srun has exited, in sacct, which lists a step
# that ended before squeue ever showed it a moment after it ended.
STEP_POLL = 0.2
STEP_LISTED_WAIT = 10.0
STEP_ACCOUNTED_WAIT = 10.0


# At most this many jobs are named to sacct (--jobs=...): one argument of a command line
# holds at most 128 KiB on Linux, and a Slurm job id at most 8 digits (MaxJobId stays
# under 67,108,864), so 10,000 ids and their commas take at most 90,000 bytes. With more
# of the project's jobs in the window, the second call asks for the window in full, as
# one call did before it was split. Naming costs what it lists: on the dev cluster 8,000
# named jobs took 3.7-4.2 s (12,761 rows) where their 75-minute window took 10.6-12.2 s
# (65,010 rows, mostly others' jobs); an array counts once (docs/architecture.md).
NAMED_JOBS_MAX = 10_000

# sbatch calls an apply keeps in flight (``ConcurrentScheduler``): each spends most of its
# ~15 ms starting up and waiting for slurmctld's answer, so a few at once send the same
# jobs in less time; slurmctld takes job submissions one at a time anyway.
SUBMISSIONS_AT_ONCE = 4


class SlurmScheduler:
    """Observe, submit to and cancel jobs on Slurm by running its client commands."""

    name = "slurm"

    def __init__(
        self,
        runner: Runner = run,
        *,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], datetime] = lambda: datetime.now(UTC),
        tz: tzinfo | None = None,
        attempts: int = 4,
        first_delay: float = 1.0,
        spawn: Spawner = spawn_detached,
        launches: Callable[[], tuple[Launch, ...] | None] = running_launches,
        user: str | None = None,
        project: str | None = None,
        submissions_at_once: int = SUBMISSIONS_AT_ONCE,
        history_at_once: bool = True,
    ) -> None:
        """``tz`` is the zone Slurm prints times in: this machine's local time unless told;
        ``user`` whose jobs are observed: the user recon runs as unless told; ``project``
        whose jobs are read from sacct's history (every recon job's when None);
        ``submissions_at_once``: how many ``submit`` calls an apply may make at once (1: one
        after another, as a runner scripted in order needs); ``history_at_once``: whether
        ``observe`` may run its two sacct calls at once (``_history``; False: one after
        the other, as a runner scripted in order needs)."""
        if attempts < 1:
            raise ValueError("attempts must be at least 1")
        self._runner = runner
        self._sleep = sleep
        self._clock = clock
        self._tz = tz or SystemLocalTime()
        self._attempts = attempts
        self._first_delay = first_delay
        self._spawn = spawn
        self._launches = launches
        self._user = user or pwd.getpwuid(os.geteuid()).pw_name
        self._project = project
        self._max_array_size: int | None = None
        self.submissions_at_once = submissions_at_once
        self._history_at_once = history_at_once

    def observe(self, since: datetime) -> Observation:
        """One squeue and two sacct calls (three at times: ``_history``), whatever the
        number of jobs, and one squeue of the steps running in recon's allocations while
        any runs (``_running_steps``).

        No retries here: a pass that cannot see everything says so (``complete=False``)
        and the next pass looks again.
        """
        taken_at = self._clock()
        # Launchers first: a step srun holds back is made (and listed) once it stops
        # waiting, so looking after squeue could miss it in both.
        launches = self._launches()
        live = self._runner(argv.squeue(), None)
        if live.returncode != 0:
            raise ObservationError(f"squeue failed, the cluster cannot be seen: {message_of(live)}")
        squeue = parse_squeue(live.stdout, self._tz)
        # Before sacct: a step that ends in between is then shown ended by sacct's row.
        steps = self._running_steps(squeue.records)
        history = self._history(since, squeue.records)
        if history.returncode != 0:
            observation = combine(squeue, None, taken_at, message_of(history), steps)
        else:
            kept = recon_rows(history.stdout, squeue.records, self._project)
            observation = combine(squeue, parse_sacct(kept, self._tz), taken_at, "", steps)
        return observation.model_copy(update={"launches": launches})

    def _history(
        self, since: datetime, live: Sequence[JobRecord]
    ) -> subprocess.CompletedProcess[str]:
        """sacct's rows of recon's jobs in the window, steps included, in two calls: the
        jobs' own rows (cheap: slurmdbd's cost is in the steps) say which jobs are recon's,
        then sacct lists those jobs in full. With none of recon's in the window (a first
        plan, beside two days of other work), the second call is not made.

        Each call waits ~0.1 s on slurmdbd whatever it lists, so the jobs squeue already
        shows as recon's are asked for in full beside the first call, not after it
        (``history_at_once``): when they are all of recon's in the window (a pass while
        the jobs it watches are queued or running, a commit's pass after the last one
        submitted), that answer is the second call's, ready with the first's. When some
        are not (jobs that ended and left squeue), it is dropped and the second call made
        as before: one sacct more for slurmdbd, no time lost."""
        tz, user = self._tz, self._user
        known = recon_jobs("", live, self._project)
        early: Future[Result] | None = None
        with ThreadPoolExecutor(max_workers=1) as beside:
            if self._history_at_once and known and len(known) <= NAMED_JOBS_MAX:
                early = beside.submit(self._runner, argv.sacct(since, tz, user, of=known), None)
            jobs = self._runner(argv.sacct(since, tz, user, jobs_only=True), None)
        if jobs.returncode != 0:
            return jobs
        ours = recon_jobs(jobs.stdout, live, self._project)
        if not ours:
            return subprocess.CompletedProcess(jobs.args, 0, "", "")
        if len(ours) > NAMED_JOBS_MAX:
            return self._runner(argv.sacct(since, tz, user), None)
        if early is not None and ours == known and early.result().returncode == 0:
            return early.result()
        return self._runner(argv.sacct(since, tz, user, of=ours), None)

    def accounting(self, job_ids: Sequence[str], since: datetime, until: datetime) -> Observation:
        """One sacct call per ``NAMED_JOBS_MAX`` jobs named (``--jobs``, steps included),
        in the window [since, until]; no squeue: the jobs asked for have ended. A failed
        call is an ObservationError: nothing is known of the jobs it named."""
        taken_at = self._clock()
        tops = sorted({_top_id(job_id) for job_id in job_ids}, key=int)
        rows: list[JobRecord] = []
        rejected: list[Rejected] = []
        for first in range(0, len(tops), NAMED_JOBS_MAX):
            named = tops[first : first + NAMED_JOBS_MAX]
            command = argv.sacct(since, self._tz, self._user, of=named, until=until)
            listed = self._runner(command, None)
            if listed.returncode != 0:
                raise ObservationError(f"sacct failed, usage not read: {message_of(listed)}")
            parsed = parse_sacct(recon_rows(listed.stdout, (), self._project), self._tz)
            rows += parsed.records
            rejected += parsed.rejected
        nothing_live = Parsed(records=(), rejected=())
        history = Parsed(records=tuple(rows), rejected=tuple(rejected))
        return combine(nothing_live, history, taken_at)

    def _running_steps(self, live: Iterable[JobRecord]) -> Parsed | None:
        """The steps slurmctld lists in recon's running allocations; None when none runs.

        sacct's window misses them for the first seconds of an allocation (slurmctld
        records a job in accounting only some seconds after it starts; see combine), and
        a run started in it then would look never started. A failure is an
        ObservationError, like squeue's: the same daemon answers both."""
        running = sorted(
            {
                row.top_id
                for row in live
                if row.tag is not None
                and row.tag.kind == "alloc"
                and (self._project is None or row.tag.project == self._project)
                and row.health is Health.RUNNING
            },
            key=int,
        )
        if not running:
            return None
        listed = self._runner(squeue_steps(running), None)
        if listed.returncode != 0:
            raise ObservationError(
                f"squeue --steps failed, the steps running in allocations cannot be seen: "
                f"{message_of(listed)}"
            )
        return parse_squeue_steps(listed.stdout, self._tz)

    def partitions(self) -> tuple[Partition, ...]:
        """One ``sinfo`` call; no retries, like ``observe``: the next pass looks again."""
        result = self._runner(sinfo(), None)
        if result.returncode != 0:
            raise ObservationError(f"sinfo failed, partitions unknown: {message_of(result)}")
        parsed = parse_sinfo(result.stdout)
        if parsed.rejected:
            lines = "; ".join(f"{bad.why}: {bad.line}" for bad in parsed.rejected)
            raise ObservationError(f"sinfo printed lines recon cannot read: {lines}")
        return parsed.partitions

    def submit(self, request: SubmitRequest) -> str:
        """``sbatch --parsable`` with the script on stdin; returns the job id."""
        return self._create(
            argv.sbatch(request),
            request.script,
            request.tag,
            lambda r: parse_submitted(r.stdout),
            env=sbatch_environment(request.environment, os.environ),
        )

    def allocate(self, request: AllocateRequest) -> str:
        """``salloc --no-shell``: returns once granted (or once the runner's timeout ends the
        wait: the allocation then stays queued, carrying its tag, and is found by it)."""
        return self._create(
            argv.salloc(request), None, request.tag, lambda r: parse_granted(r.stderr)
        )

    def cancel(self, job_id: str) -> None:
        """``scancel <id>``: the id sbatch returned ends every het component and array task.

        Cancelling a job that is already over or forgotten is not an error.
        """
        self._with_retries(
            argv.scancel(job_id),
            None,
            outcome=lambda r: True if r.returncode == 0 or is_gone(r) else None,
            before_retry=lambda: None,
        )

    def release(self, job_id: str) -> None:
        self.cancel(job_id)

    def max_array_size(self) -> int:
        """MaxArraySize from one ``scontrol show config``, asked once per adapter: it
        changes only when slurmctld is reconfigured. Raises ObservationError when it
        cannot be read (an array split on a guess would be refused by sbatch)."""
        if self._max_array_size is None:
            result = self._runner(argv.show_config(), None)
            size = parse_max_array_size(result.stdout) if result.returncode == 0 else None
            if size is None:
                raise ObservationError(
                    f"MaxArraySize could not be read from scontrol show config: "
                    f"{message_of(result) if result.returncode else 'no MaxArraySize line'}"
                )
            self._max_array_size = size
        return self._max_array_size

    def containers(self) -> frozenset[str]:
        """One ``srun --help`` (a few milliseconds): pyxis adds its flags to it."""
        result = self._runner(["srun", "--help"], None)
        if result.returncode != 0:
            return frozenset()
        return container_features(result.stdout + result.stderr)

    def start_step(self, request: StepRequest) -> str | None:
        """``srun --jobid=<id> ...`` started detached; its own messages go to
        ``srun-<name>.log`` in the step's log directory. None: the step is not listed
        yet (srun holds it back until the allocation has room, or Slurm is slow)."""
        log = request.log_dir / f"srun-{request.tag.name}.log"
        try:
            env = sbatch_environment(request.environment, os.environ)
            argv = srun(request)
            process = self._spawn(argv, log) if env is None else self._spawn(argv, log, env)
        except OSError as error:
            raise PermanentSchedulerError(f"srun could not be started: {error}") from error
        for _ in range(round(STEP_LISTED_WAIT / STEP_POLL)):
            listed = self._runner(squeue_steps([request.allocation_id]), None)
            found = step_named(listed.stdout, request.allocation_id, request.tag)
            if found is not None:
                return found
            exit_code = process.poll()
            if exit_code is not None:
                return self._ended_step(request, exit_code, log)
            self._sleep(STEP_POLL)
        return None

    def _ended_step(self, request: StepRequest, exit_code: int, log: Path) -> str:
        """srun has exited: the step ran and ended already, or was never made."""
        for _ in range(round(STEP_ACCOUNTED_WAIT / STEP_POLL)):
            accounted = self._runner(sacct_steps(request.allocation_id), None)
            found = step_named(accounted.stdout, request.allocation_id, request.tag)
            if found is not None:
                return found
            # Even when srun failed: a step that failed fast is listed only a moment later.
            self._sleep(STEP_POLL)
        said = log.read_text(errors="replace").strip().splitlines()[-3:] if log.exists() else []
        raise PermanentSchedulerError(
            f"srun exited {exit_code} and started no step in allocation "
            f"{request.allocation_id}: {' / '.join(said) or 'no message'} (see {log})"
        )

    def _create(
        self,
        command: list[str],
        stdin: str | None,
        tag: Tag,
        job_id_of: Callable[[Result], str | None],
        env: Mapping[str, str] | None = None,
    ) -> str:
        """Run a command that makes a job, retrying transient failures without doubling it.

        A transient failure may come after Slurm accepted the job (a timed-out reply), so
        before each retry squeue is asked for a job with this tag submitted since the first
        try; if there is one, it is the job, and it is returned instead of making another.
        """
        # Slurm's submit times have whole seconds.
        first_try = self._clock().astimezone(self._tz).replace(microsecond=0)

        def accepted(result: Result) -> str | None:
            if result.returncode != 0:
                return None
            job_id = job_id_of(result)
            if job_id is None:
                raise SchedulerError(
                    f"{command[0]} succeeded but printed no job id: {message_of(result)}"
                )
            return job_id

        return self._with_retries(
            command,
            stdin,
            outcome=accepted,
            before_retry=lambda: self._job_made_since(tag, first_try),
            env=env,
        )

    def _with_retries(
        self,
        command: list[str],
        stdin: str | None,
        *,
        outcome: Callable[[Result], T | None],
        before_retry: Callable[[], T | None],
        env: Mapping[str, str] | None = None,
    ) -> T:
        """Run ``command`` until ``outcome`` accepts its result, it fails for good, or the
        attempts run out, sleeping ``first_delay``, then twice that, and so on, in between.
        ``before_retry`` may settle the matter before a retry (a job found already made)."""
        last: TransientSchedulerError | None = None
        for attempt in range(self._attempts):
            if attempt:
                self._sleep(self._first_delay * 2 ** (attempt - 1))
                settled = before_retry()
                if settled is not None:
                    return settled
            # A runner is called with an environment only when one is asked for, so a
            # runner written for commands without one serves every other command.
            result = (
                self._runner(command, stdin) if env is None else self._runner(command, stdin, env)
            )
            answer = outcome(result)
            if answer is not None:
                return answer
            error = failure(result)
            if not isinstance(error, TransientSchedulerError):
                raise error
            last = error
        assert last is not None
        raise TransientSchedulerError(f"gave up after {self._attempts} attempts: {last}")

    def _job_made_since(self, tag: Tag, since: datetime) -> str | None:
        """The id of a job carrying ``tag`` submitted at or after ``since``, per squeue."""
        live = self._runner(argv.squeue(), None)
        if live.returncode != 0:
            return None
        for record in parse_squeue(live.stdout, self._tz).records:
            if record.tag == tag and record.submit is not None and record.submit >= since:
                return record.top_id
        return None


def _top_id(job_id: str) -> str:
    """The id sbatch returned: 12 of 12.3 (a step), 123_4 (an array task), 4+1 (a het
    component)."""
    return job_id.partition(".")[0].partition("_")[0].partition("+")[0]


def sbatch_environment(
    environment: Mapping[str, str] | None, environ: Mapping[str, str]
) -> dict[str, str] | None:
    """What sbatch runs with, and so what the job starts from (``scheduler/jobenv``): the
    request's environment and the variables sbatch needs to find the cluster; None: the
    submitter's own (the runner's default)."""
    if environment is None:
        return None
    found = {name: environ[name] for name in SLURM_PASSED if name in environ}
    return {**environment, **found}
