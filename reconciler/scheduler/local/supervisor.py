"""A job's supervisor: runs its script to the end, records how it ended, dispatches.

Started detached by a dispatch pass (see ``processes``), holding the job's alive lock for
its whole life, it:

1. opens the job's log files where its ``#SBATCH --output/--error`` said (as sbatch
   would, truncating), and starts the script in a process group of its own;
2. waits for it, ending the group when the job is cancelled or passes its time limit:
   SIGTERM, then SIGKILL after ``KILL_WAIT`` seconds if anything is left (Slurm's
   KillWait), and SIGKILL to whatever the script left behind once it exits, as Slurm
   ends a batch job's stray processes;
   what the script's processes used (peak memory, CPU time) is read from the kernel's
   accounting of them once it is reaped (``_used``);
3. under the store's lock, writes ``ended.json`` and runs a dispatch pass, which starts
   the jobs that waited for these CPUs or this job, or cancels the ones that cannot run.

It needs nobody else alive: recon may be long gone. If the supervisor itself is killed,
its lock drops and readers report the job NODE_FAIL (``SupervisorLost``).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from reconciler.scheduler.local.decide import Ending
from reconciler.scheduler.local.dispatch import dispatch_locked
from reconciler.scheduler.local.processes import (
    restore_default_signals,
    signal_group,
    start_script,
)
from reconciler.scheduler.local.store import JobSpec, Store

KILL_WAIT = 10.0  # seconds from SIGTERM to SIGKILL
POLL = 0.2  # seconds between looks for a cancel or the time limit
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
    try:
        process = start_script(
            store.job_dir(spec.job_id) / "script",
            spec.workdir,
            store.environment(spec.job_id, os.environ),
            stdout,
            stderr,
        )
    except OSError as error:
        os.write(stderr, f"recon local: cannot start the batch script: {error}\n".encode())
        return Ending(datetime.now(UTC), exit_code=1)
    finally:
        os.close(stdout)
        if stderr != stdout:
            os.close(stderr)
    store.write_pids(spec.job_id, os.getpid(), process.pid)
    returncode, timed_out = _wait(store, spec, process)
    signal_group(process.pid, signal.SIGKILL)
    peak_memory_mb, cpu_time_s = _used()
    return Ending(
        datetime.now(UTC),
        exit_code=max(returncode, 0),
        signal=max(-returncode, 0),
        timed_out=timed_out,
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


def _open_logs(spec: JobSpec) -> tuple[int, int]:
    stdout = os.open(spec.stdout, _LOG_FLAGS, 0o644)
    if spec.stderr is None or spec.stderr == spec.stdout:
        return stdout, stdout
    try:
        return stdout, os.open(spec.stderr, _LOG_FLAGS, 0o644)
    except OSError:
        os.close(stdout)
        raise


def _wait(store: Store, spec: JobSpec, process: subprocess.Popen[bytes]) -> tuple[int, bool]:
    """The script's return code, and whether its time limit ended it."""
    group = process.pid
    started = time.monotonic()
    stopping_since: float | None = None
    timed_out = False
    while True:
        try:
            return process.wait(POLL), timed_out
        except subprocess.TimeoutExpired:
            pass
        now = time.monotonic()
        if stopping_since is None:
            # A cancel sends SIGTERM itself; this catches one made while the script was
            # being started, and starts the clock to SIGKILL.
            cancelled = store.is_cancelled(spec.job_id)
            timed_out = not cancelled and _past(spec.time_limit, now - started)
            if cancelled or timed_out:
                signal_group(group, signal.SIGTERM)
                stopping_since = now
        elif now - stopping_since >= KILL_WAIT:
            signal_group(group, signal.SIGKILL)


def _past(limit: float | None, elapsed: float) -> bool:
    return limit is not None and elapsed >= limit
