"""One apply at a time per project: an flock on ``<state_dir>/lock``.

Why flock (through filelock's FileLock): the kernel releases it when the holding process
dies, however it dies, so a SIGKILLed or OOM-killed apply never leaves a lock behind that
someone must delete by hand; the next apply takes it over at once.

While the lock is held, ``<state_dir>/lock.info`` names the holder (pid, host, purpose,
start time), only so that a process that gives up waiting can say who is in its way. It is
not itself a lock: after a crash it is stale until the next holder overwrites it.

Not re-entrant: a process that asks again for a lock it already holds waits for itself
and gets LockedError. The engine takes the lock once, around a whole apply.
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from reconciler.errors import LockedError, StateDirError

LOCK_FILE = "lock"
INFO_FILE = "lock.info"


@dataclass(frozen=True)
class _Holder:
    pid: int
    host: str
    purpose: str
    since: datetime


@contextmanager
def project_lock(
    state_dir: Path, timeout: float, purpose: str = "apply", *, project: str | None = None
) -> Iterator[None]:
    """Hold the project's lock for the ``with`` block, or raise LockedError.

    ``timeout`` is in seconds: 0 tries once, a negative value waits for ever. ``project``
    only names the project in the error message.
    """
    state_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(state_dir / LOCK_FILE)
    try:
        lock.acquire(timeout=timeout)
    except Timeout:
        raise LockedError(_locked_message(state_dir, timeout, project)) from None
    except OSError as error:
        raise _cannot_write(state_dir / LOCK_FILE, error, purpose) from None
    info = state_dir / INFO_FILE
    try:
        holder = _Holder(os.getpid(), socket.gethostname(), purpose, datetime.now(UTC))
        try:
            _write_holder(info, holder)
        except OSError as error:
            raise _cannot_write(info, error, purpose) from None
        yield
    finally:
        # Before the release: once released, the file may already be the next holder's.
        info.unlink(missing_ok=True)
        lock.release()


def _cannot_write(path: Path, error: OSError, purpose: str) -> StateDirError:
    """Which file of the state directory could not be written, and what to do."""
    return StateDirError(
        f"cannot write {path} ({error.strerror or error}): {purpose} writes its lock, journal "
        f"and snapshots in the state directory {path.parent}; make it writable, or set "
        "state_dir in recon.yaml to a folder you can write (plan and status only read it)"
    )


def _write_holder(info: Path, holder: _Holder) -> None:
    # Write and rename, so a waiter that gives up never reads half a file.
    text = json.dumps(
        {
            "pid": holder.pid,
            "host": holder.host,
            "purpose": holder.purpose,
            "since": holder.since.isoformat(),
        }
    )
    scratch = info.with_name(f"{info.name}.{holder.pid}")
    scratch.write_text(text, encoding="utf-8")
    os.replace(scratch, info)


def _read_holder(info: Path) -> _Holder | None:
    """The holder named in ``info``; None if it is missing or unreadable (just released,
    or the holder has not written it yet)."""
    try:
        data = json.loads(info.read_text(encoding="utf-8"))
        return _Holder(
            pid=int(data["pid"]),
            host=str(data["host"]),
            purpose=str(data["purpose"]),
            since=datetime.fromisoformat(data["since"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _locked_message(state_dir: Path, timeout: float, project: str | None) -> str:
    holder = _read_holder(state_dir / INFO_FILE)
    if holder is None:
        who = "another recon process"
    else:
        who = (
            f"another recon {holder.purpose} (pid {holder.pid} on {holder.host},"
            f" since {_clock(holder.since)})"
        )
    whose = f"project {project}" if project else "the project"
    waited = "did not wait (lock timeout 0)" if timeout == 0 else f"waited {timeout:g}s"
    return (
        f"{who} holds the lock of {whose} ({state_dir / LOCK_FILE}); {waited}."
        " Try again later or raise --lock-timeout."
    )


def _clock(since: datetime) -> str:
    """The holder's start in this machine's local time; the date only if not today."""
    local = since.astimezone()
    if local.date() == datetime.now().astimezone().date():
        return local.strftime("%H:%M:%S")
    return local.strftime("%Y-%m-%d %H:%M:%S")
