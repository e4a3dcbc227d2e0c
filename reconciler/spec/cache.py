"""Parsed, validated spec files cached by git blob id, so unchanged files are never re-parsed.

The cache is one pickle in the state directory. It is only ever a shortcut: a missing,
stale or unreadable cache means a full parse, never an error. The key includes recon's
version and a format number, since pickled models only fit the code that made them.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import tempfile
from dataclasses import dataclass
from pathlib import Path

from reconciler import __version__
from reconciler.errors import SpecIssue
from reconciler.spec.documents import ParsedDocument

_FORMAT = 1
_FILE_NAME = "spec-cache.pickle"


@dataclass(frozen=True)
class FileResult:
    """What one spec file holds: its valid documents and its own problems."""

    documents: tuple[ParsedDocument, ...]
    issues: tuple[SpecIssue, ...]


class ParseCache:
    def __init__(self, directory: Path | None) -> None:
        self.path = directory / _FILE_NAME if directory is not None else None
        self.entries: dict[tuple[str, str], FileResult] = self._read()
        self.dirty = False

    def _read(self) -> dict[tuple[str, str], FileResult]:
        if self.path is None or not self.path.exists():
            return {}
        try:
            with self.path.open("rb") as stream:
                stamp, entries = pickle.load(stream)
        except Exception:  # any damage to a cache is a cache miss, nothing more
            return {}
        return entries if stamp == (_FORMAT, __version__) and isinstance(entries, dict) else {}

    def get(self, file: str, blob: str) -> FileResult | None:
        # The path is part of the key: messages and locations name the file.
        return self.entries.get((file, blob))

    def put(self, file: str, blob: str, result: FileResult) -> None:
        self.entries[(file, blob)] = result
        self.dirty = True

    def keep_only(self, live: set[tuple[str, str]]) -> None:
        """Forget files no longer in the tree, so the cache does not grow forever.

        Two revisions are often loaded side by side (`plan --against`), so entries go only
        once they outnumber the live ones twice over.
        """
        if len(self.entries) <= 2 * len(live):
            return
        stale = set(self.entries) - live
        for key in stale:
            del self.entries[key]
        self.dirty = self.dirty or bool(stale)

    def save(self) -> None:
        if self.path is None or not self.dirty:
            return
        with contextlib.suppress(OSError):  # a read-only state dir only costs speed
            self.path.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".spec-cache.")
            with os.fdopen(handle, "wb") as stream:
                pickle.dump(((_FORMAT, __version__), self.entries), stream, protocol=5)
            os.replace(temporary, self.path)
        self.dirty = False
