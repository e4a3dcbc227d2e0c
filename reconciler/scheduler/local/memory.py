"""How much memory a local job's processes hold: the resident set of its process group.

The supervisor enforces a job's ``--mem`` by reading this every ``MEMORY_POLL`` seconds
and ending the job when it is over, as Slurm's own ``jobacct_gather/linux`` with
``JobAcctGatherParams=OverMemoryKill`` does on a node without cgroups. The other ways
were weighed: ``RLIMIT_AS`` caps address space, which CUDA, the JVM and threaded Python
reserve in gigabytes they never touch, so it ends healthy jobs, and it binds each process
on its own, not the job; Linux ignores ``RLIMIT_RSS``; a memory cgroup needs root or a
delegated systemd slice. Resident pages shared by several processes count once per
process, as Slurm counts them (without ``UsePss``).

Linux only: where there is no ``/proc`` (macOS) the size is unknown and memory is not
enforced. A process that leaves the job's process group (``setsid``) is not counted.
Standard library only: the supervisor imports it.
"""

from __future__ import annotations

import os
from pathlib import Path

_PROC = Path("/proc")
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def parse_stat(text: bytes) -> tuple[int, int]:
    """(process group, resident pages) from one ``/proc/<pid>/stat`` line (proc(5)).

    The command name (field 2) may hold spaces and parentheses: fields are counted from
    the last ``)``. Field 3 is the state, 5 the process group, 24 the resident set."""
    fields = text[text.rindex(b")") + 2 :].split()
    return int(fields[2]), int(fields[21])


def group_resident_bytes(group: int, proc: Path = _PROC) -> int | None:
    """Resident bytes of every process in process group ``group``; None without /proc."""
    try:
        pids = os.listdir(proc)
    except OSError:
        return None
    total = 0
    for pid in pids:
        if not pid.isdigit():
            continue
        try:
            # Plain strings and one read: pathlib's joins and opens cost more than the
            # read itself, and this runs once a second for every limited job.
            fd = os.open(f"{proc}/{pid}/stat", os.O_RDONLY)
        except OSError:  # it exited since the listing
            continue
        try:
            stat = os.read(fd, 4096)
        except OSError:
            continue
        finally:
            os.close(fd)
        pgrp, pages = parse_stat(stat)
        if pgrp == group:
            total += pages * _PAGE
    return total
