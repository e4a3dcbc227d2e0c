"""The files the web view reads, and only inside the directories it may serve from.

Every route names a run, a job or a static file by name, never by path; the path is then
built here and resolved (symlinks followed) and must still lie inside an allowed
directory, so neither `..`, an absolute path, an encoded one nor a symlink in a run
directory pointing elsewhere reaches a file outside.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

# Enough of a log to see how a job ended, without sending gigabytes to a browser.
TAIL_BYTES = 64 * 1024
TAIL_LINES = 200


def confined(path: Path, roots: Iterable[Path]) -> Path | None:
    """The path with symlinks resolved, if it exists and lies inside one of the roots
    (absolute and normalised, taken as they are: a root that is itself a symlink to
    elsewhere holds nothing); else None."""
    try:
        real = path.resolve(strict=True)
    except (OSError, RuntimeError):  # missing, or a symlink loop
        return None
    return real if any(real.is_relative_to(root) for root in roots) else None


def tail(path: Path, roots: Iterable[Path]) -> str | None:
    """The last lines of a text file inside the roots; None when it is not there (or
    not allowed: the page says the same, and says nothing of what lies outside)."""
    real = confined(path, roots)
    if real is None or not real.is_file():
        return None
    try:
        with open(real, "rb") as stream:
            size = stream.seek(0, os.SEEK_END)
            stream.seek(max(0, size - TAIL_BYTES))
            data = stream.read(TAIL_BYTES)
    except OSError:
        return None
    lines = data.decode("utf-8", errors="replace").splitlines()
    if size > TAIL_BYTES:
        lines = lines[1:]  # the first is likely cut
    return "\n".join(lines[-TAIL_LINES:])
