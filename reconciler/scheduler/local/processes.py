"""The one module of the local backend that starts or signals processes.

A job's supervisor must outlive whoever started it (a recon run, or another job's
supervisor) and must never be its child for long: ``sh -c '"$@" &'`` starts it in the
background and exits at once, so the supervisor is reparented to init (no zombie left in
a long-lived ``recon watch``), in a session of its own (no terminal hang-up or Ctrl-C
reaches it). Its alive lock comes in as an inherited descriptor.

The supervisor runs as ``python -I -S``: isolated from the caller's ``PYTHON*`` variables
and without ``site``, which alone costs most of Python's start-up, so a job starts in tens
of milliseconds rather than a tenth of a second. It finds recon by the path of this file.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

# The directory that holds the `reconciler` package, for the supervisor's sys.path.
_IMPORT_ROOT = str(Path(__file__).resolve().parents[3])
_BOOT = (
    "import sys; sys.path.insert(0, sys.argv[1]); "
    "from reconciler.scheduler.local.supervisor import main; sys.exit(main(sys.argv[2:]))"
)


def spawn_supervisor(store_root: Path, job_id: int, alive_fd: int, log: Path) -> None:
    """Start job ``job_id``'s supervisor, detached, holding the lock behind ``alive_fd``."""
    python = sys.executable or "python3"
    argv = [python, "-I", "-S", "-c", _BOOT, _IMPORT_ROOT, str(store_root), str(job_id)]
    with open(log, "ab") as log_stream:
        subprocess.run(
            ["/bin/sh", "-c", '"$@" &', "sh", *argv, str(alive_fd)],
            stdin=subprocess.DEVNULL,
            stdout=log_stream,
            stderr=log_stream,
            pass_fds=(alive_fd,),
            start_new_session=True,
            # The spawner's environment, in memory only: a job's variables passed by name
            # come from it (``Store.environment``), and it is handed on to the supervisors
            # this one starts. The script itself gets only its job's environment.
            env=dict(os.environ),
            check=True,
        )


def start_script(
    script: Path,
    cwd: str,
    env: dict[str, str],
    stdout: int,
    stderr: int,
    cores: tuple[int, ...] = (),
) -> subprocess.Popen[bytes]:
    """Run a batch script in a process group of its own, so cancel can end all it started
    without ending the supervisor that must record the outcome; pinned to ``cores`` when
    there are any, from before it runs, so that every process and thread it starts
    inherits them (the supervisor stays unpinned: the passes it runs hand out cores)."""

    def pin() -> None:
        os.sched_setaffinity(0, cores)

    return subprocess.Popen(
        [str(script)],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=stdout,
        stderr=stderr,
        process_group=0,
        preexec_fn=pin if cores else None,
    )


def signal_group(group: int, signum: int = signal.SIGTERM) -> bool:
    """Send ``signum`` to every process of a group; False when none is left."""
    try:
        os.killpg(group, signum)
    except (ProcessLookupError, PermissionError):  # gone, or the id is someone else's now
        return False
    return True


def restore_default_signals() -> None:
    """Undo what a background start leaves: ``sh`` ignores SIGINT and SIGQUIT in a command
    started with ``&``, and an ignored signal stays ignored across exec, into the script."""
    for signum in (signal.SIGINT, signal.SIGQUIT):
        signal.signal(signum, signal.SIG_DFL)
