"""The two file primitives the local backend's state rests on: flocks and atomic writes.

Why flock: the kernel drops it when its holder dies, however it dies, so a killed recon
or supervisor never leaves a lock that someone must delete by hand. A flock belongs to
the open file, not the process: a lock taken on a file descriptor that a child inherits
stays held by the child after the parent closes its copy. The dispatcher uses that to
hand a job's "alive" lock to the job's supervisor with no moment in which it is free.

Why rename: readers take no lock, and ``os.replace`` is atomic, so a reader sees a whole
file or none. No fsync: these files only matter while the machine stays up (a crash of
the machine ends every local job with it).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

JsonObject = dict[str, Any]


def write_atomic(path: Path, data: str | bytes, mode: int = 0o644) -> None:
    """Write ``path`` whole or not at all, as far as any reader can tell."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    payload = data.encode() if isinstance(data, str) else data
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as stream:
        stream.write(payload)
    os.replace(temporary, path)


def write_json(path: Path, value: JsonObject, mode: int = 0o644) -> None:
    write_atomic(path, json.dumps(value, sort_keys=True), mode)


def read_json(path: str | Path) -> JsonObject | None:
    """The object in ``path``, or None when there is no such file."""
    try:
        with open(path, "rb") as stream:
            text = stream.read()
    except FileNotFoundError:
        return None
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"{path} holds no JSON object")
    return value


@contextlib.contextmanager
def flocked(path: Path, *, blocking: bool = True) -> Iterator[bool]:
    """Hold an exclusive flock on ``path`` for the block; yields False (and holds nothing)
    when ``blocking`` is False and another holds it."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        yield True
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def hold(path: Path) -> int:
    """An open descriptor holding an exclusive flock on ``path``; the caller closes it
    (or passes it to a child, who then holds the lock)."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BaseException:
        os.close(fd)
        raise
    return fd


def is_held(path: Path) -> bool:
    """Whether some process holds an exclusive flock on ``path``.

    Asks with a shared lock, so two processes asking at once never see each other as
    the holder.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)
    return False
