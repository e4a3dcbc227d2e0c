"""Rolling back a job's publishing of its staged outputs, when the job ended before it
was done (killed between two renames, say).

A job's script publishes its staged outputs once its command succeeded and wrote them
all (``scheduler/render._publishing_lines``): it writes a marker listing each output and
whether it had a published version, keeps each published one aside (``previous_path``),
renames each staged one onto its published path, and removes the marker, then what it
kept aside. A marker left by a job that has ended means that job did not finish
publishing; the job failed (it was killed, or a rename failed), so what it published is
undone: each output kept aside goes back to its published path, and a new output put
where there was none goes back to its staging path. The outputs are then exactly as
before the job, the same files (same inodes, same modification times), so their versions
are unchanged. Done by the next apply pass before it looks at outputs; a pass killed
halfway through does it again.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import Iterable
from pathlib import Path

from reconciler.scheduler.runfolder import previous_path, publishing_dir, staging_path


def roll_back_ended(run_dirs: Iterable[Path]) -> list[Path]:
    """Roll back every publishing marker in these runs' folders, which must have no job
    alive; the markers rolled back."""
    done = []
    for run_dir in run_dirs:
        folder = publishing_dir(run_dir)
        try:
            markers = sorted(folder.iterdir())
        except FileNotFoundError:
            continue
        for marker in markers:
            if marker.name.endswith(".new"):
                marker.unlink(missing_ok=True)  # written before any rename: nothing to undo
                continue
            roll_back(marker)
            done.append(marker)
    return done


def roll_back(marker: Path) -> None:
    """Undo what the job that wrote ``marker`` published, then remove the marker."""
    for entry in marker.read_text().split("\0"):  # a path may hold a line break
        had, _, published = entry.partition(" ")
        if published:
            _restore(published, had == "1")
    marker.unlink()


def _restore(published: str, had: bool) -> None:
    staging, previous = Path(staging_path(published)), Path(previous_path(published))
    target = Path(published)
    if had and not os.path.lexists(previous):
        return  # not kept aside yet: the published output was never touched
    if had and os.path.lexists(target) and _same(target, previous):
        previous.unlink()  # a file kept aside by a hard link, not replaced yet
    else:
        if os.path.lexists(target):
            _remove(staging)
            staging.parent.mkdir(parents=True, exist_ok=True)
            os.rename(target, staging)  # the job's new output, back where it wrote it
        if had:
            os.rename(previous, target)
    _tidy(previous.parent)


def _same(one: Path, other: Path) -> bool:
    """Whether two paths are one file (a hard link kept aside, not replaced yet)."""
    return os.path.samestat(os.lstat(one), os.lstat(other))


def _is_folder(path: Path) -> bool:
    return path.is_dir() and not path.is_symlink()


def _remove(path: Path) -> None:
    if _is_folder(path):
        shutil.rmtree(path)
    elif os.path.lexists(path):
        path.unlink()


def _tidy(folder: Path) -> None:
    with contextlib.suppress(OSError):  # not empty, or gone
        folder.rmdir()

