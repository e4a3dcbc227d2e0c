"""Find, start and stop the dev cluster's daemons on this machine."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from reconciler.devcluster.daemons import Daemon
from reconciler.devcluster.runner import run
from reconciler.errors import DevClusterError


def pids_of(daemon: Daemon) -> tuple[int, ...]:
    """Live processes that are this daemon. Zombies have an empty cmdline and never match.

    Only processes under this process's own root directory count: the dev cluster of a
    Debian 13 root (rootfs.py) runs the same programs, chrooted, on the same machine, and
    each cluster must find only its own daemons."""
    found = []
    here = _root_identity("/")
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            raw = (entry / "cmdline").read_bytes()
        except OSError:  # exited while we looked
            continue
        argv = tuple(part.decode(errors="replace") for part in raw.split(b"\0") if part)
        if daemon.matches(argv) and _under_root(entry, here):
            found.append(int(entry.name))
    return tuple(sorted(found))


def _root_identity(path: str | Path) -> tuple[int, int]:
    """The (device, inode) of a directory; of a process's root for /proc/<pid>/root,
    which the kernel resolves even across chroots."""
    found = os.stat(path)
    return (found.st_dev, found.st_ino)


def _under_root(process: Path, here: tuple[int, int]) -> bool:
    try:
        return _root_identity(process / "root") == here
    except PermissionError:
        # Only root may look at another user's process root: for anyone else (a `status`
        # without sudo) a daemon of the right name counts, as it always did.
        return True
    except OSError:  # exited while we looked
        return False


def is_running(daemon: Daemon) -> bool:
    return bool(pids_of(daemon))


def start(daemon: Daemon) -> None:
    done = run(daemon.start, check=False, timeout=60)
    if not done.ok:
        output = (done.stderr.strip() or done.stdout.strip())[-1000:]
        raise DevClusterError(
            f"{daemon.name} did not start (exit code {done.returncode})"
            + (f": {output}" if output else "")
            + "\n"
            + log_tail(daemon.log)
        )


def stop(daemon: Daemon, *, timeout: float = 30) -> None:
    """SIGTERM (each daemon shuts down cleanly on it), then SIGKILL whatever remains."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for pid in pids_of(daemon):
            with contextlib.suppress(ProcessLookupError):  # exited meanwhile
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not is_running(daemon):
                return
            time.sleep(0.2)
    if is_running(daemon):
        raise DevClusterError(f"{daemon.name} survived SIGKILL: pids {pids_of(daemon)}")


def log_tail(log: Path, lines: int = 20) -> str:
    """The last lines of a daemon's log, for error messages that show the actual cause."""
    try:
        text = log.read_text(errors="replace")
    except OSError as error:
        return f"(no log at {log}: {error.strerror})"
    tail = text.splitlines()[-lines:]
    return f"last {len(tail)} lines of {log}:\n" + "\n".join(f"  {line}" for line in tail)
