"""A job's supervisor: runs its script to the end, records how it ended, dispatches.

Started detached by a dispatch pass (see ``processes``), holding the job's alive lock for
its whole life, it:

1. opens the job's log files where its ``#SBATCH --output/--error`` said (as sbatch
   would, truncating), and starts the script in a process group of its own, pinned to
   the cores its dispatch handed it, with the GPUs handed it in ``CUDA_VISIBLE_DEVICES``;
2. waits for it, ending the group when the job is cancelled or passes its time limit:
   SIGTERM, then SIGKILL after ``KILL_WAIT`` seconds if anything is left (Slurm's
   KillWait), and SIGKILL to whatever the script left behind once it exits, as Slurm
   ends a batch job's stray processes. Before the time limit it sends the job's
   ``--signal`` warning, once; past its ``--mem`` (read every ``MEMORY_POLL`` seconds,
   see ``memory``) it kills the group at once, as the kernel kills a process over its
   cgroup's memory, and the job reads OUT_OF_MEMORY; what the script's processes used
   (peak memory, CPU time) is read from the kernel's accounting of them once it is
   reaped (``_used``);
3. under the store's lock, writes ``ended.json`` and runs a dispatch pass, which starts
   the jobs that waited for these CPUs or this job, or cancels the ones that cannot run.

It needs nobody else alive: recon may be long gone. If the supervisor itself is killed,
its lock drops and readers report the job NODE_FAIL (``SupervisorLost``).
"""

from __future__ import annotations

import contextlib
import os
import resource
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path

from reconciler.scheduler.local.decide import Ending
from reconciler.scheduler.local.directives import WarningSignal
from reconciler.scheduler.local.dispatch import dispatch_locked
from reconciler.scheduler.local.environment import gpu_environment
from reconciler.scheduler.local.memory import group_resident_bytes
from reconciler.scheduler.local.processes import (
    restore_default_signals,
    signal_group,
    start_script,
)
from reconciler.scheduler.local.store import JobSpec, Store

KILL_WAIT = 10.0  # seconds from SIGTERM to SIGKILL
POLL = 0.2  # seconds between looks for a cancel or the time limit
# Seconds between looks at the job's resident memory: a scan of /proc, dearer than a
# look at the clock. Slurm samples every JobAcctGatherFrequency (the dev cluster: 2 s).
MEMORY_POLL = 1.0
_LOG_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_TRUNC


def main(argv: list[str]) -> int:
    """``<store root> <job id> <alive lock fd>``: the fd stays open until this exits."""
    root, job_id = Path(argv[0]), int(argv[1])
    restore_default_signals()
    store = Store(root)
    spec = store.spec(job_id)
    if spec is None:
        print(f"no local job {job_id} in {root}", file=sys.stderr)
        return 1
    try:
        ending = supervise(store, spec)
    except Exception:
        import traceback  # only here: every job start would pay for it

        # Recorded as a failure rather than left to read as lost: the reason is here.
        traceback.print_exc()
        ending = Ending(datetime.now(UTC), exit_code=1)
    with store.locked():
        store.write_ended(job_id, ending)
        dispatch_locked(store)
    return 0


def supervise(store: Store, spec: JobSpec) -> Ending:
    if store.is_cancelled(spec.job_id):
        return Ending(datetime.now(UTC), exit_code=0)
    try:
        stdout, stderr = _open_logs(spec)
    except OSError as error:
        # sbatch's job would fail the same way, before its script runs.
        print(f"cannot open the job's log files: {error}", file=sys.stderr)
        return Ending(datetime.now(UTC), exit_code=1)
    grant = store.grant(spec.job_id)
    env = store.environment(spec.job_id, os.environ)
    if spec.gpus:
        env.update(gpu_environment(grant.gpus))
    try:
        process = start_script(
            store.job_dir(spec.job_id) / "script", spec.workdir, env, stdout, stderr, grant.cores
        )
    except OSError as error:
        os.write(stderr, f"recon local: cannot start the batch script: {error}\n".encode())
        return Ending(datetime.now(UTC), exit_code=1)
    finally:
        os.close(stdout)
        if stderr != stdout:
            os.close(stderr)
    store.write_pids(spec.job_id, os.getpid(), process.pid)
    returncode, limit = _wait(store, spec, process)
    signal_group(process.pid, signal.SIGKILL)
    peak_memory_mb, cpu_time_s = _used()
    return Ending(
        datetime.now(UTC),
        exit_code=max(returncode, 0),
        signal=max(-returncode, 0),
        timed_out=limit is Limit.TIME,
        out_of_memory=limit is Limit.MEMORY,
        peak_memory_mb=peak_memory_mb,
        cpu_time_s=cpu_time_s,
    )


def _used() -> tuple[float, float]:
    """The peak resident memory (MiB) of the largest of the script's processes and the
    CPU time (user and system) of all of them, from ``getrusage(RUSAGE_CHILDREN)``.

    The supervisor's one child is the script, so once it is reaped the kernel's figures
    for this process's children are the script's and every process it waited for: the
    same figures as Slurm's MaxRSS (the largest task's peak) and TotalCPU, measured
    exactly at the end rather than sampled (a gatherer polling /proc misses a short peak
    and a process that ended between two looks). A process the script left running is
    not counted: it was never waited for."""
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    per_mib = 1024 * 1024 if sys.platform == "darwin" else 1024  # ru_maxrss: bytes, or KiB
    return used.ru_maxrss / per_mib, used.ru_utime + used.ru_stime


class Limit(Enum):
    """Which of its limits ended a job."""

    TIME = "time"
    MEMORY = "memory"


def _open_logs(spec: JobSpec) -> tuple[int, int]:
    stdout = os.open(spec.stdout, _LOG_FLAGS, 0o644)
    if spec.stderr is None or spec.stderr == spec.stdout:
        return stdout, stdout
    try:
        return stdout, os.open(spec.stderr, _LOG_FLAGS, 0o644)
    except OSError:
        os.close(stdout)
        raise


def _wait(
    store: Store, spec: JobSpec, process: subprocess.Popen[bytes]
) -> tuple[int, Limit | None]:
    """The script's return code, and which limit ended it, if one did."""
    group = process.pid
    started = time.monotonic()
    stopping_since: float | None = None
    ended_by: Limit | None = None
    warn_at = _warning_time(spec)
    memory = spec.memory_limit
    next_memory_look = started + MEMORY_POLL
    while True:
        try:
            return process.wait(POLL), ended_by
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if stopping_since is not None:
            if now - stopping_since >= KILL_WAIT:
                signal_group(group, signal.SIGKILL)
            continue
        if warn_at is not None and spec.warning is not None and now - started >= warn_at:
            _warn(group, spec.warning)
            warn_at = None
        # A cancel sends SIGTERM itself; this catches one made while the script was
        # being started, and starts the clock to SIGKILL.
        if store.is_cancelled(spec.job_id):
            signal_group(group, signal.SIGTERM)
            stopping_since = now
        elif _past(spec.time_limit, now - started):
            signal_group(group, signal.SIGTERM)
            stopping_since, ended_by = now, Limit.TIME
        elif memory is not None and now >= next_memory_look:
            next_memory_look = now + MEMORY_POLL
            held = group_resident_bytes(group)
            if held is not None and held > memory:
                _tell_job(spec, f"holds {held >> 20} MiB, over its --mem of {memory >> 20} MiB")
                signal_group(group, signal.SIGKILL)
                stopping_since, ended_by = now, Limit.MEMORY


def _tell_job(spec: JobSpec, what: str) -> None:
    """A line in the job's error log, where slurmstepd writes why it ended a job."""
    line = f"recon local: error: job {spec.job_id} {what}: killed\n"
    with contextlib.suppress(OSError), open(spec.stderr or spec.stdout, "a") as log:
        log.write(line)


def _warning_time(spec: JobSpec) -> float | None:
    """Seconds after the start when the --signal warning is due; None: never. As on
    Slurm, a warning needs a time limit, and a lead longer than the limit warns at once."""
    if spec.warning is None or spec.time_limit is None:
        return None
    return max(spec.time_limit - spec.warning.lead.total_seconds(), 0.0)


def _warn(group: int, warning: WarningSignal) -> None:
    if warning.batch_only:
        with contextlib.suppress(ProcessLookupError):
            os.kill(group, warning.signum)  # the script's own pid is its group's id
    else:
        signal_group(group, warning.signum)


def _past(limit: float | None, elapsed: float) -> bool:
    return limit is not None and elapsed >= limit
