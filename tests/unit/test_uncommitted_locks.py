"""Looking for uncommitted edits never writes the repository's index.

`git status` refreshes the index's stat data when a tracked file's times changed, and to do
so takes index.lock: a person's `git add` or `git commit` at that moment fails with
"index.lock: File exists". recon asks on every apply and on a watch's passes, beside people
committing, so it asks without the optional locks."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from reconciler.desired.source import uncommitted


def _git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@example.org", *args],
        cwd=root, check=True, capture_output=True,
    )  # fmt: skip


def test_uncommitted_edits_are_listed_without_writing_the_index(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    tracked = tmp_path / "train.yaml"
    tracked.write_text("command: python3 train.py\n")
    _git(tmp_path, "add", "train.yaml")
    _git(tmp_path, "commit", "-qm", "a run")
    index = tmp_path / ".git" / "index"
    # The same bytes, newer times: the index's stat data is stale, which status refreshes.
    later = index.stat().st_mtime_ns + 5_000_000_000
    os.utime(tracked, ns=(later, later))
    before = (index.read_bytes(), index.stat().st_mtime_ns)

    assert uncommitted(tmp_path) == []
    assert (index.read_bytes(), index.stat().st_mtime_ns) == before

    tracked.write_text("command: python3 train.py --epochs 3\n")
    assert uncommitted(tmp_path) == ["train.yaml"]
    assert index.read_bytes() == before[0]
