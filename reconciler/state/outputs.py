"""The version of an output (or an external input) on disk, as the planner compares them.

An output is a file or a directory. Its version is a sha256 over one record per entry, in
sorted order, so the same tree always gives the same digest:

- ``fingerprint``: for each file its relative path, size and mtime (ns). Cheap (one
  ``lstat`` per file, no reads) and it changes whenever a file is rewritten, even with
  the same bytes. It cannot see a rewrite that keeps the size within one tick of the
  filesystem's clock, nor a tool that restores mtimes.
- ``content``: for each file its relative path and the sha256 of its bytes. A rerun that
  writes byte-identical files yields the same digest, which is what stops it from making
  every downstream run stale. A single file's content digest is the plain sha256 of its
  bytes, the same as ``sha256sum`` prints. A file's sha256 is remembered for the life of
  the process while its inode, size, mtime and ctime stay the same, so ``recon watch``
  does not read unchanged outputs again on every pass.

Directories, empty ones included, and symlinks are part of the record too: a symlink
inside an output is recorded by its target text and never followed, so a version never
depends on data outside the tree and a link loop cannot hang the walk. The output path
itself may be a symlink (``data -> /scratch/...``): that one is followed, it is the
path the user named. A directory named ``.recon-run`` or ``.recon`` is skipped at any
depth (``runfolder.NOT_OUTPUTS``): recon keeps its manifest there (``.recon`` in earlier
releases, and the state directory's default name), and a manifest written beside an
output must not change that output's version.

Missing (None) and unreadable (``OutputError``) are different answers: a missing output
makes its run rerun, an unreadable one is reported, since nothing is known about it.
"""

from __future__ import annotations

import hashlib
import os
import stat
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from reconciler.desired.desired import Desired
from reconciler.desired.models import HashKind
from reconciler.errors import OutputError
from reconciler.scheduler.runfolder import NOT_OUTPUTS
from reconciler.state.paths import external_path, run_path
from reconciler.state.records import gathered_digest

StrPath = str | os.PathLike[str]

# Content digests of files seen unchanged, by (dev, ino, size, mtime, ctime).
_DIGESTS: dict[tuple[int, int, int, int, int], str] = {}
_DIGESTS_KEPT = 200_000  # about 30 MB; cleared whole when full, the simplest bound
_SETTLED_NS = 2_000_000_000  # generous beside clock ticks and a file server's clock skew


class OutputVersion(BaseModel):
    """What an output is now: equal versions mean the same data, as far as ``kind`` sees."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: HashKind
    digest: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256, hex")
    files: int = Field(ge=0, description="regular files in the output")
    bytes: int = Field(ge=0, description="their total size")
    directory: bool = Field(False, description="a directory, not a single file")


def gathered(versions: Mapping[str, OutputVersion | None]) -> OutputVersion:
    """``gathered_digest`` as a version: the members' files and bytes added up."""
    present = [version for version in versions.values() if version is not None]
    return OutputVersion(
        kind=present[0].kind if present else "fingerprint",
        digest=gathered_digest({name: v.digest if v else None for name, v in versions.items()}),
        files=sum(version.files for version in present),
        bytes=sum(version.bytes for version in present),
        directory=True,
    )


def version_of(path: StrPath, how: HashKind, marker: StrPath | None = None) -> OutputVersion | None:
    """The output's version, or None when it is missing: ``path`` does not exist, or a
    ``marker`` is declared and does not exist (the job has not said it is complete)."""
    if marker is not None and _stat(marker) is None:
        return None
    if (top := _stat(path)) is None:
        return None
    if stat.S_ISREG(top.st_mode):
        try:
            return _file_version(path, top, how)
        except _Gone:
            return None
    records = hashlib.sha256()
    files = size = 0
    if stat.S_ISDIR(top.st_mode):
        for entry in _walk(path, ""):
            try:
                records.update(_record(entry, how))
            except _Gone:
                continue  # removed while we walked: the next pass sees what is left
            if entry.st is not None:
                files += 1
                size += entry.st.st_size
    else:  # a fifo or device named as an output: present, with nothing to hash
        records.update(b"O\0\0")
    return OutputVersion(
        kind=how,
        digest=records.hexdigest(),
        files=files,
        bytes=size,
        directory=stat.S_ISDIR(top.st_mode),
    )


@dataclass(frozen=True)
class Listing:
    """A folder as a job can check it with coreutils: each file's sha256 (``file ->
    digest``, absolute paths) and each entry below it as ``find -printf '%y %p'`` prints
    it (``f path``, ``d path``)."""

    files: dict[str, str]
    entries: tuple[str, ...]


def content_listing(folder: StrPath, version: str) -> Listing | None:
    """The folder's listing, read in the same walk as its `content` version; None unless
    that version is ``version`` (what was read before is what is listed) and every entry
    is a file or folder whose path a checksum line can hold as it is (a symlink's target
    and names with a line break or backslash cannot be checked that way)."""
    top = os.fspath(folder)
    records = hashlib.sha256()
    files: dict[str, str] = {}
    entries: list[str] = []
    for entry in _walk(top, ""):
        path = os.path.join(top, entry.relative)
        if entry.kind not in "FD" or any(c in path for c in "\n\r\\"):
            return None
        try:
            record = _record(entry, "content")
        except _Gone:
            return None
        records.update(record)
        if entry.st is not None:
            files[path] = record.split(b"\0")[2].decode()
        entries.append(f"{entry.kind.lower()} {path}")
    if records.hexdigest() != version:
        return None
    return Listing(files, tuple(sorted(entries, key=os.fsencode)))


# ``(run, output) -> version`` as one pass found them: its judgement of finished jobs and
# its plan look at the same outputs (a sweep's shared dataset once per reader), and each
# is looked at once per pass.
OutputsSeen = dict[tuple[str, str], OutputVersion | None]


def observe_outputs(
    desired: Desired,
    runs: Iterable[str],
    seen_this_pass: OutputsSeen | None = None,
    moving: Mapping[str, str] | None = None,
) -> dict[tuple[str, str], OutputVersion | None]:
    """``(run, output) -> version`` for every declared output of the given runs.
    `seen_this_pass`: versions already found in this pass, taken as they are, and
    where the ones found now are added. `moving`: a renamed run whose folder is still
    under its old name (``engine/plan/moves``) -> that folder, where its outputs are."""
    moving = moving or {}
    known = seen_this_pass if seen_this_pass is not None else {}
    seen: dict[tuple[str, HashKind, str | None], OutputVersion | None] = {}
    versions: dict[tuple[str, str], OutputVersion | None] = {}
    for name in runs:
        run = desired.runs[name]
        # Plain strings, not Path: pathlib's joins would take longer than the stats.
        directory = run_path(desired, run)
        if name in moving:
            directory = os.path.join(desired.root, moving[name])
        for output_name, output in run.outputs.items():
            if (name, output_name) in known:
                versions[(name, output_name)] = known[(name, output_name)]
                continue
            marker = os.path.join(directory, output.marker) if output.marker else None
            key = (os.path.join(directory, output.path), output.hash, marker)
            # Two runs may name the same path (a shared dataset): look at it once.
            if key not in seen:
                seen[key] = version_of(*key)
            versions[(name, output_name)] = known[(name, output_name)] = seen[key]
    return versions


def observe_inputs(
    desired: Desired, runs: Iterable[str], how: HashKind = "fingerprint"
) -> dict[tuple[str, str], OutputVersion | None]:
    """``(run, input) -> version`` for every external ``path:`` input of the given runs.

    Inputs that are another run's output are not here: their version is that output's,
    from ``observe_outputs``. External inputs declare no hash kind; the cheap fingerprint
    is the default, since they are often large reference data.
    """
    seen: dict[Path, OutputVersion | None] = {}
    versions: dict[tuple[str, str], OutputVersion | None] = {}
    for name in runs:
        for input_name, spec_input in desired.runs[name].inputs.items():
            path = external_path(desired, spec_input)
            if path is None:
                continue
            if path not in seen:
                seen[path] = version_of(path, how)
            versions[(name, input_name)] = seen[path]
    return versions


class _Gone(Exception):
    """A path vanished between listing and reading it."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """One thing found under a directory output, as its record needs it."""

    kind: Literal["F", "D", "L", "O"]  # regular file, directory, symlink, anything else
    relative: str
    path: str
    st: os.stat_result | None = None  # for regular files only


def _walk(directory: StrPath, prefix: str) -> Iterator[_Entry]:
    """Every entry below ``directory``, depth first, names sorted at each level."""
    try:
        with os.scandir(directory) as listing:
            entries = sorted(listing, key=lambda e: e.name)
    except FileNotFoundError:
        return
    except OSError as error:
        raise _unreadable(directory, error) from None
    for dirent in entries:
        if dirent.name in NOT_OUTPUTS:
            continue
        relative = f"{prefix}{dirent.name}"
        try:
            st = dirent.stat(follow_symlinks=False)
        except FileNotFoundError:
            continue
        except OSError as error:
            raise _unreadable(dirent.path, error) from None
        if stat.S_ISREG(st.st_mode):
            yield _Entry("F", relative, dirent.path, st)
        elif stat.S_ISDIR(st.st_mode):
            yield _Entry("D", relative, dirent.path)
            yield from _walk(dirent.path, f"{relative}/")
        else:
            yield _Entry("L" if stat.S_ISLNK(st.st_mode) else "O", relative, dirent.path)


def _record(entry: _Entry, how: HashKind) -> bytes:
    """One entry as bytes. Fields are NUL-terminated (no path holds a NUL) and each kind
    has a fixed number of them, so no two different trees give the same stream."""
    fields = [entry.kind.encode(), os.fsencode(entry.relative)]
    if entry.st is not None and how == "fingerprint":
        fields += [str(entry.st.st_size).encode(), str(entry.st.st_mtime_ns).encode()]
    elif entry.st is not None:
        fields.append(_content_sha256(entry.path, entry.st).encode())
    elif entry.kind == "L":
        fields.append(os.fsencode(_readlink(entry.path)))
    return b"\0".join(fields) + b"\0"


def _file_version(path: StrPath, st: os.stat_result, how: HashKind) -> OutputVersion:
    if how == "content":
        digest = _content_sha256(path, st)
    else:
        digest = hashlib.sha256(f"F\0\0{st.st_size}\0{st.st_mtime_ns}\0".encode()).hexdigest()
    return OutputVersion(kind=how, digest=digest, files=1, bytes=st.st_size)


def _content_sha256(path: StrPath, st: os.stat_result) -> str:
    """The file's sha256, read once per process for a file that has not changed since:
    every planning pass looks at every current run's outputs, and reading terabytes again
    each time `recon watch` wakes would be the whole cost of a pass."""
    # ctime cannot be set from user space and moves on every write, so a file with the
    # same device, inode, size, mtime and ctime holds the same bytes...
    key = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)
    if (known := _DIGESTS.get(key)) is not None:
        return known
    try:
        with open(path, "rb") as stream:
            digest = hashlib.file_digest(stream, "sha256").hexdigest()
    except FileNotFoundError:
        raise _Gone from None
    except OSError as error:
        raise _unreadable(path, error) from None
    # ...unless it was written within one tick of the filesystem's clock of being read:
    # a second write in that tick would keep all five. Such a file is read again next
    # time, as git does with its "racily clean" index entries.
    if time.time_ns() - st.st_ctime_ns > _SETTLED_NS:
        if len(_DIGESTS) >= _DIGESTS_KEPT:
            _DIGESTS.clear()
        _DIGESTS[key] = digest
    return digest


def _readlink(path: str) -> str:
    try:
        return os.readlink(path)
    except FileNotFoundError:
        raise _Gone from None


def _stat(path: StrPath) -> os.stat_result | None:
    """The path's status (through a symlink), None when it does not exist."""
    try:
        return os.stat(path)
    except (FileNotFoundError, NotADirectoryError):
        return None
    except OSError as error:
        raise _unreadable(path, error) from None


def _unreadable(path: StrPath, error: OSError) -> OutputError:
    return OutputError(
        f"cannot read {path}: {error.strerror or error}. recon reads every file of an "
        "output to tell whether it is current; fix its permissions and plan again"
    )
