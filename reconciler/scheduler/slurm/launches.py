"""The step launchers (``srun --jobid=<id> --job-name=<tag>``) running on this host.

A step srun holds back until its allocation has room (a GPU run while the allocation's
GPUs are busy) is listed neither by squeue nor by sacct: only its srun process shows it.
srun is started detached by recon on the host it runs on, so that host's process table
is where to look. ``launch_of`` reads one command line (pure); ``running_launches``
reads the process table.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from reconciler.scheduler.base import Launch
from reconciler.scheduler.tag import Tag

PROC = Path("/proc")


def launch_of(argv: Sequence[str]) -> Launch | None:
    """The step an ``srun`` command line launches, when recon made it (a tag as its name)."""
    if not argv or os.path.basename(argv[0]) != "srun":
        return None
    options = dict(arg.partition("=")[::2] for arg in argv[1:] if arg.startswith("--"))
    allocation_id = options.get("--jobid", "")
    tag = Tag.parse(options.get("--job-name", ""))
    if tag is None or not allocation_id.isdigit():
        return None
    return Launch(allocation_id=allocation_id, tag=tag)


def running_launches(proc: Path = PROC) -> tuple[Launch, ...] | None:
    """recon's step launchers among this user's processes; None when the process table
    cannot be read (then a held-back step cannot be told from a lost one)."""
    uid = os.geteuid()
    try:
        entries = [entry for entry in proc.iterdir() if entry.name.isdigit()]
    except OSError:
        return None
    found = []
    for entry in entries:
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if not argv[0].endswith(b"srun") or entry.stat().st_uid != uid:
                continue
        except OSError:  # it ended while we looked
            continue
        launch = launch_of([part.decode(errors="replace") for part in argv if part])
        if launch is not None:
            found.append(launch)
    return tuple(found)
