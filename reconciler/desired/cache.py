"""Spec files' parse results cached by git blob id, so unchanged files are never re-parsed.

One file in the state directory, written with `marshal`: it holds only plain tuples,
strings and numbers (document summaries and raw documents, see `summary.py`), which
loads about ten times faster than pickled models. The cache is only ever a shortcut: a
missing, stale or unreadable cache means a full parse, never an error. Its stamp holds
recon's version and the project settings, since defaults go into every hash.

It also remembers the last commits whose specs passed every project-wide check (unique
names, inputs that resolve, no shared output file, no cycle): those checks depend on the
commit's files alone, so a commit loaded again (both sides of `plan --against`, a plan
after a plan) skips them, as an unchanged file skips its parse.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from reconciler import __version__
from reconciler.desired.models import Project
from reconciler.desired.summary import DocumentSummary
from reconciler.errors import SpecIssue

# Bumped when what is stored changes, the wording of stored problems included, and when
# a check comes to find what it did not: remembered files and commits would skip it.
_FORMAT = 14
_FILE_NAME = "spec-cache.marshal"
# How many commits known to pass the project-wide checks are remembered, newest kept.
_CHECKED_KEPT = 32


@dataclass(frozen=True)
class FileResult:
    """What one spec file holds: its valid documents, its own problems, and the names of
    the documents those problems made invalid (a reference to one is no problem of its
    own: the document's is reported, once)."""

    documents: tuple[DocumentSummary, ...]
    issues: tuple[SpecIssue, ...]
    invalid: tuple[str, ...] = ()

    def to_plain(self) -> tuple[Any, ...]:
        return (
            tuple(summary.to_plain() for summary in self.documents),
            tuple((i.file, i.line, i.field, i.message) for i in self.issues),
            self.invalid,
        )

    @classmethod
    def from_plain(cls, plain: tuple[Any, ...]) -> FileResult:
        documents, issues, invalid = plain
        return cls(
            tuple(map(DocumentSummary.from_plain, documents)),
            tuple(SpecIssue(*issue) for issue in issues) if issues else (),
            tuple(invalid),
        )


class ParseCache:
    def __init__(self, directory: Path | None, project: Project) -> None:
        self.stamp = _stamp(project)
        self.path = _path(directory)
        self.entries: dict[tuple[str, str], tuple[Any, ...]] = {}
        # The commits (with the project folder) whose specs passed every project-wide
        # check, oldest first.
        self.checked: dict[str, None] = {}
        self._read()
        self.dirty = False
        # Results decoded from `entries` in this process, by (file, blob): a second load
        # through the same cache (``SharedCache``) neither parses nor decodes them again.
        self.decoded: dict[tuple[str, str], FileResult] = {}

    def serves(self, directory: Path | None, project: Project) -> bool:
        """Whether this is the cache a load of `project` from `directory` would open."""
        return self.path == _path(directory) and self.stamp == _stamp(project)

    def _read(self) -> None:
        if self.path is None or not self.path.exists():
            return
        try:
            stamp, entries, checked = marshal.loads(self.path.read_bytes())
        except Exception:  # any damage to a cache is a cache miss, nothing more
            return
        if stamp == self.stamp and isinstance(entries, dict) and isinstance(checked, dict):
            self.entries, self.checked = entries, checked

    def passed_checks(self, key: str) -> bool:
        """Whether the commit ``key`` names passed every project-wide check before."""
        return key in self.checked

    def note_passed_checks(self, key: str) -> None:
        if key in self.checked:
            return
        self.checked[key] = None
        while len(self.checked) > _CHECKED_KEPT:
            del self.checked[next(iter(self.checked))]
        self.dirty = True

    def get(self, file: str, blob: str) -> FileResult | None:
        # The path is part of the key: messages and locations name the file.
        key = (file, blob)
        if (known := self.decoded.get(key)) is not None:
            return known
        plain = self.entries.get(key)
        if plain is None:
            return None
        try:
            result = FileResult.from_plain(plain)
        except (TypeError, ValueError, IndexError):
            return None
        self.decoded[key] = result
        return result

    def put(self, file: str, blob: str, result: FileResult) -> None:
        try:
            plain = result.to_plain()
        except ValueError:
            return  # holds a value marshal cannot store (a YAML timestamp): parse each time
        self.put_plain(file, blob, plain)
        self.decoded[(file, blob)] = result

    def put_plain(self, file: str, blob: str, plain: tuple[Any, ...]) -> None:
        """A result already in plain form (from a worker process): stored as it is."""
        self.entries[(file, blob)] = plain
        self.dirty = True

    def keep_only(self, live: Mapping[str, str]) -> None:
        """Forget files no longer in the tree (`live`: its files' blobs), so the cache does
        not grow forever.

        Two revisions are often loaded side by side (`plan --against`), so entries go only
        once they outnumber the live ones twice over.
        """
        if len(self.entries) <= 2 * len(live):
            return
        stale = set(self.entries) - set(live.items())
        for key in stale:
            del self.entries[key]
            self.decoded.pop(key, None)
        self.dirty = self.dirty or bool(stale)

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        try:
            data = marshal.dumps((self.stamp, self.entries, self.checked))
        except ValueError:  # an entry marshal cannot store: no cache this time
            self.dirty = False
            return
        with contextlib.suppress(OSError):  # a read-only state dir only costs speed
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".spec-cache.")
            with os.fdopen(handle, "wb") as stream:
                stream.write(data)
            os.replace(temporary, self.path)
        self.dirty = False


@dataclass
class SharedCache:
    """One parse cache for several loads in one process: `plan --against` reads two
    commits that share most files, and the second load then reads the cache file, parses
    and decodes only what differs."""

    cache: ParseCache | None = None

    def open(self, directory: Path | None, project: Project) -> ParseCache:
        if self.cache is None or not self.cache.serves(directory, project):
            self.cache = ParseCache(directory, project)
        return self.cache


def _stamp(project: Project) -> str:
    return f"{_FORMAT}/{__version__}/{project.model_dump_json()}"


def _path(directory: Path | None) -> Path | None:
    return directory / _FILE_NAME if directory is not None else None
