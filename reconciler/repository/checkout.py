"""Where a run's command executes: a read-only snapshot of the commit it was planned from.

Jobs must run the code of the commit recon planned, not whatever the work tree holds
when the job starts hours later. One snapshot per commit under the state directory
(`checkouts/<sha>/`), extracted once with `git archive`, reused by every run of it.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from reconciler.desired.source import open_repo
from reconciler.errors import RepoError

if TYPE_CHECKING:
    import git  # imported by open_repo when a pass needs a snapshot: a plan never does


def code_dir(root: Path, commit: str | None, state_dir: Path) -> Path:
    """The folder commands run in: the project folder inside the commit's snapshot, or the
    project folder itself when planning from the work tree (`--worktree`). Extracts the
    snapshot the first time."""
    path = snapshot_path(root, commit, state_dir)
    if commit is not None:
        snapshot = state_dir / "checkouts" / commit
        if not snapshot.exists():
            _extract(open_repo(root), commit, snapshot)
    return path


def snapshot_path(root: Path, commit: str | None, state_dir: Path) -> Path:
    """Where `code_dir` is (or would be), without extracting anything."""
    if commit is None:
        return root.resolve()
    repo = open_repo(root)
    top = Path(repo.working_tree_dir or root).resolve()
    return state_dir / "checkouts" / commit / root.resolve().relative_to(top)


def _extract(repo: git.Repo, commit: str, snapshot: Path) -> None:
    import git

    snapshot.parent.mkdir(parents=True, exist_ok=True)
    # Extract beside the target, then rename: a crash never leaves a half snapshot that
    # later passes would take as complete.
    staging = Path(tempfile.mkdtemp(prefix=f".{commit[:12]}.", dir=snapshot.parent))
    try:
        archive = io.BytesIO()
        repo.archive(archive, treeish=commit, format="tar")
        archive.seek(0)
        with tarfile.open(fileobj=archive) as tar:
            if hasattr(tarfile, "tar_filter"):
                # "tar", not "data": symbolic links are extracted as links wherever they
                # point (`data -> /scratch/...`), as `git checkout` makes them; files are
                # still never written outside the snapshot, and git trees hold nothing else.
                tar.extractall(staging, filter="tar")
            else:
                # Pythons before 3.11.4 have no filters (Debian 12's is 3.11.2): git
                # archive writes the tree's own relative paths only, so there is nothing
                # to filter out.
                tar.extractall(staging)
        try:
            os.rename(staging, snapshot)
        except OSError:
            if not snapshot.exists():  # another apply won the race: its copy is the same
                raise
    except (git.GitCommandError, tarfile.TarError, OSError) as error:
        raise RepoError(f"cannot snapshot commit {commit[:12]} into {snapshot}: {error}") from None
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def remote_url(root: Path) -> str | None:
    """Where the repo's commits can be found by others (`origin`, else the first remote),
    for provenance; None for a repo without remotes."""
    try:
        remotes = open_repo(root).remotes
    except RepoError:
        return None
    chosen = next((r for r in remotes if r.name == "origin"), remotes[0] if remotes else None)
    if chosen is None:
        return None
    urls = list(chosen.urls)
    return str(urls[0]) if urls else None
