"""What a job that may rerun compares its inputs with, written beside them before sbatch.

The planner hands apply a ``SkipCheck``: each input an upstream rerun may rewrite, and
the `hash: content` version the run's last success read of it. The job's skip check
(scheduler/render.py ``skip_check_block``) compares those with what is there when it
starts, after its upstreams:

- a single file's content version is its plain sha256, as ``sha256sum`` prints it, so
  the line to check is the journal's version itself: nothing is read, and whatever an
  upstream writes meanwhile cannot leak into it;
- a folder's version is a digest over its entries, which no coreutils tool computes; it
  is listed file by file (sha256) and entry by entry, read in one walk that also yields
  the folder's version, and used only when that is the version the last success read.

Anything that cannot be written that way leaves no check: the job runs its command.
"""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.desired.desired import DesiredRun
from reconciler.engine.plan.actions import SkipCheck
from reconciler.scheduler.render import RenderContext
from reconciler.scheduler.runfolder import SKIP_CHECK_SUFFIXES, skip_check_file
from reconciler.state.outputs import content_listing


def skip_check_files(
    run: DesiredRun, context: RenderContext, check: SkipCheck | None
) -> dict[Path, bytes | None]:
    """Each skip-check file of the run and its content; None: remove it (no check)."""
    files: dict[Path, bytes | None] = {
        skip_check_file(context.run_dir, suffix): None for suffix in SKIP_CHECK_SUFFIXES
    }
    written = _check_texts(context, check) if check is not None else None
    if written is not None:
        for suffix, text in written.items():
            files[skip_check_file(context.run_dir, suffix)] = os.fsencode(text)
    return files


def _check_texts(context: RenderContext, check: SkipCheck) -> dict[str, str] | None:
    sums: list[str] = []
    folders: list[str] = []
    entries: list[str] = []
    for name, version in sorted(check.inputs.items()):
        path = os.fspath(context.input_paths[name])
        if any(c in path for c in "\n\r\\"):
            return None  # sha256sum would escape it
        if not os.path.isdir(path):
            sums.append(f"{version}  {path}\n")  # missing now: the upstream makes it
            continue
        listing = content_listing(path, version)
        if listing is None:
            return None
        sums.extend(f"{digest}  {file}\n" for file, digest in listing.files.items())
        folders.append(path + "\n")
        entries.extend(entry + "\n" for entry in listing.entries)
    if not sums:
        return None  # sha256sum --check fails on an empty list anyway
    texts = {".sha256": "".join(sums)}
    if folders:
        texts[".folders"] = "".join(folders)
        texts[".entries"] = "".join(sorted(entries, key=os.fsencode))
    return texts
