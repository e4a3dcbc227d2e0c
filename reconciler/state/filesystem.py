"""What kind of filesystem the state directory is on, and what that allows.

Labs keep their repositories in home folders on NFS (or Lustre, GPFS, CephFS), where cron
may run on one login node and ``recon watch`` on another. The state directory then holds
one journal and one lock for processes on several hosts, and two of recon's defaults
depend on sharing one kernel:

- The journal's WAL mode keeps its index in shared memory (the ``-shm`` file, mapped by
  every process). Processes on two hosts do not see each other's mappings, so WAL on a
  network filesystem can lose or corrupt transactions; SQLite's documentation says so.
  On a shared filesystem the journal uses SQLite's rollback journal instead
  (``journal_mode=DELETE``), which coordinates through POSIX advisory locks that the
  filesystem carries between hosts.
- The project lock is an ``flock``. NFS (v3 through the lock manager, v4 natively), GPFS,
  CephFS, GFS2 and OCFS2 hold it across hosts; Lustre only when mounted with ``flock``
  (with ``localflock`` each node has a lock of its own, and with neither it fails);
  sshfs never. A lock that only holds on one host would let two hosts' applies submit the
  same run, so those are refused, saying what to do.

The kind is read from ``/proc/self/mountinfo`` (the mount that holds the directory, the
longest mount point above it). ``RECON_STATE_FILESYSTEM`` overrides what is found:
``local`` (every recon command of this project runs on this one host) or ``shared``.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Literal

from reconciler.errors import StateDirError

OVERRIDE_VARIABLE = "RECON_STATE_FILESYSTEM"
MOUNTINFO = Path("/proc/self/mountinfo")

# Filesystems that several hosts mount at once and whose flock holds across them.
SHARED_WITH_LOCKS = frozenset(
    {
        "nfs", "nfs4", "gpfs", "ceph", "fuse.ceph-fuse", "gfs2", "ocfs2", "beegfs",
        "panfs", "cifs", "smb3", "afs", "wekafs", "fuse.weka",
    }
)  # fmt: skip
# Lustre's flock is cluster-wide only with the `flock` mount option.
LUSTRE = "lustre"
# Shared, but no lock is shared between the hosts that mount them.
SHARED_WITHOUT_LOCKS = frozenset({"fuse.sshfs", "sshfs", "fuse.glusterfs", "glusterfs", "9p"})

JournalMode = Literal["wal", "delete"]


@dataclass(frozen=True, slots=True)
class Mount:
    """One line of mountinfo: where, what type, and its options (mount and super)."""

    mount_point: str
    fstype: str
    source: str
    options: frozenset[str]


@dataclass(frozen=True, slots=True)
class StateFilesystem:
    """What the state directory's filesystem allows."""

    fstype: str
    mount_point: str
    shared: bool  # several hosts may use it at once
    problem: str | None = None  # why recon cannot keep its lock and journal there

    @property
    def journal_mode(self) -> JournalMode:
        return "delete" if self.shared else "wal"


def parse_mountinfo(text: str) -> list[Mount]:
    """The mounts of a ``/proc/<pid>/mountinfo`` text (see proc(5)): fields up to a lone
    ``-``, then the type, the source and the super options. Spaces and other bytes in
    paths come escaped as octal (``\\040``)."""
    mounts = []
    for line in text.splitlines():
        fields = line.split(" ")
        try:
            separator = fields.index("-", 6)
            mount_point = _unescape(fields[4])
            options = fields[5].split(",")
            fstype, source, super_options = fields[separator + 1 : separator + 4]
        except (ValueError, IndexError):
            continue  # not a mount line
        mounts.append(
            Mount(
                mount_point,
                fstype,
                _unescape(source),
                frozenset(options + super_options.split(",")),
            )
        )
    return mounts


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda found: chr(int(found.group(1), 8)), field)


def mount_of(path: str, mounts: list[Mount]) -> Mount | None:
    """The mount that holds the absolute, resolved ``path``: the last-mounted of those
    with the longest mount point above it (a later mount over the same point hides the
    earlier one)."""
    best: Mount | None = None
    for mount in mounts:
        point = mount.mount_point.rstrip("/") or "/"
        above = point == "/" or path == point or path.startswith(point + "/")
        if above and (best is None or len(point) >= len(best.mount_point.rstrip("/") or "/")):
            best = mount
    return best


def judge(mount: Mount | None, override: str | None = None) -> StateFilesystem:
    """What a state directory on ``mount`` may do; ``override``: the
    ``RECON_STATE_FILESYSTEM`` variable's value, if set."""
    fstype = mount.fstype if mount is not None else "unknown"
    point = mount.mount_point if mount is not None else "?"
    if override == "local":
        return StateFilesystem(fstype, point, shared=False)
    if override == "shared":
        return StateFilesystem(fstype, point, shared=True)
    if mount is None:
        return StateFilesystem(fstype, point, shared=False)
    if fstype in SHARED_WITH_LOCKS:
        return StateFilesystem(fstype, point, shared=True)
    if fstype == LUSTRE:
        if "flock" in mount.options:
            return StateFilesystem(fstype, point, shared=True)
        how = (
            "localflock: each node has a lock of its own"
            if "localflock" in mount.options
            else ("neither flock nor localflock: it has no flock at all")
        )
        return StateFilesystem(fstype, point, shared=True, problem=f"mounted with {how}")
    if fstype in SHARED_WITHOUT_LOCKS:
        return StateFilesystem(
            fstype, point, shared=True, problem="its locks are not shared between the hosts"
        )
    return StateFilesystem(fstype, point, shared=False)


def state_filesystem(directory: Path) -> StateFilesystem:
    """The filesystem of ``directory`` (or of its nearest existing parent), as judged for a
    state directory. An unreadable mountinfo (not Linux) is taken as a local disk."""
    override = os.environ.get(OVERRIDE_VARIABLE, "").strip().lower() or None
    if override not in (None, "local", "shared"):
        raise StateDirError(
            f"{OVERRIDE_VARIABLE}={override!r} is not understood: set it to 'local' (every "
            "recon command of this project runs on this host) or 'shared', or unset it"
        )
    existing = directory.absolute()
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    return judge(_mount(str(existing.resolve())), override)


@lru_cache(maxsize=64)
def _mount(path: str) -> Mount | None:
    try:
        return mount_of(path, parse_mountinfo(MOUNTINFO.read_text(errors="replace")))
    except OSError:
        return None


def check_state_filesystem(directory: Path) -> StateFilesystem:
    """The directory's filesystem, or StateDirError when recon's lock cannot hold there
    across the hosts that mount it."""
    found = state_filesystem(directory)
    if found.problem is not None:
        raise StateDirError(
            f"the state directory {directory} is on {found.fstype} ({found.mount_point}), "
            f"{found.problem}, so the project's lock would not keep two hosts' applies from "
            "submitting the same run. Set state_dir in recon.yaml to a folder on a "
            "filesystem whose locks hold across hosts (NFS, GPFS, CephFS, Lustre mounted "
            "with flock); or, if every recon command of this project runs on this one "
            f"host, set {OVERRIDE_VARIABLE}=local"
        )
    return found
