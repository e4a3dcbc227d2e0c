"""The git side of `recon watch`: which commit is the branch's tip, which files to watch
for it to move, and a fast-forward from its remote.

All through git itself (`rev-parse`, `fetch`, `update-ref`, `merge --ff-only`), never by
reading ref files: refs may be loose or packed, and a linked work tree keeps HEAD in its
own git dir but the branches in the common one.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import git

from reconciler.desired.source import open_repo
from reconciler.errors import RepoError

FETCH_TIMEOUT_SECONDS = 120


@dataclass(frozen=True)
class PullResult:
    """What a pull did, for the log: `moved` from `old` to `new`, or why not."""

    moved: bool
    old: str
    new: str
    why: str = ""

    @property
    def up_to_date(self) -> bool:
        """The branch was where its upstream is: nothing to pull."""
        return self.new == self.old


class BranchRefs:
    """One branch of the repo holding the project (or HEAD, with branch None)."""

    def __init__(self, root: Path, branch: str | None) -> None:
        self.repo = open_repo(root, offer_worktree=False)  # watch follows commits only
        self.branch = branch
        self.git_dir = Path(self.repo.git_dir)
        self.common_dir = Path(self.repo.common_dir)
        self.tip()  # a typo in --branch fails at start, not at the first pass

    def _ref(self) -> str:
        return "HEAD" if self.branch is None else f"refs/heads/{self.branch}"

    def _run(self, *args: str, timeout: int | None = None) -> str:
        try:
            out: str = self.repo.git.execute(
                ["git", *args], kill_after_timeout=timeout, with_extended_output=False
            )
        except git.GitCommandError as error:
            stderr = str(error.stderr).strip() or str(error)
            command = next((arg for arg in args if not arg.startswith("-")), args[0])
            raise RepoError(f"git {command} failed in {self.repo.working_dir}: {stderr}") from None
        return out.strip()

    def tip(self) -> str:
        """The commit the branch (or HEAD) points at now."""
        try:
            return self._run("rev-parse", "--verify", "--quiet", f"{self._ref()}^{{commit}}")
        except RepoError:
            what = "HEAD" if self.branch is None else f"branch {self.branch!r}"
            raise RepoError(
                f"{what} not found in {self.repo.working_dir}: name a local branch "
                "(`git branch --list` shows them)"
            ) from None

    def current_branch(self) -> str | None:
        """The branch checked out in this work tree; None on a detached HEAD."""
        try:
            return self._run("symbolic-ref", "--quiet", "--short", "HEAD") or None
        except RepoError:
            return None

    def watched_dirs(self) -> list[Path]:
        """The folders whose entries change when the tip may have moved: HEAD and
        packed-refs live in the git dirs, the branch's loose ref in refs/heads/...

        Folders, not the files: git replaces a ref by renaming a lock file over it, and
        a watch on the old file would see it deleted and nothing after."""
        branch = self.branch or self.current_branch()
        dirs = [self.git_dir, self.common_dir]
        if branch is not None:
            dirs.append((self.common_dir / "refs" / "heads" / branch).parent)
        unique = dict.fromkeys(d.resolve() for d in dirs)
        return [d for d in unique if d.is_dir()]

    def is_ref_change(self, path: str) -> bool:
        """Whether a changed file is a ref (not a lock file, the index, a log...)."""
        changed = Path(path)
        if changed.name.endswith(".lock"):
            return False
        if changed.name in ("HEAD", "packed-refs"):
            return True
        heads = (self.common_dir / "refs" / "heads").resolve()
        return changed.is_relative_to(heads)

    def pull(self) -> PullResult:
        """Fetch the branch's upstream and fast-forward the branch to it.

        Never a merge: a branch that has diverged stays where it is. Never touching a
        work tree with changes: when the branch is checked out there, it moves only if
        the work tree is clean (recon reads commits, so nothing waits for the files)."""
        branch = self.branch or self.current_branch()
        if branch is None:
            raise RepoError("HEAD is detached: name the branch to pull with --branch")
        remote = self._config(f"branch.{branch}.remote") or "origin"
        self._run("fetch", "--quiet", remote, timeout=FETCH_TIMEOUT_SECONDS)
        old = self._run("rev-parse", "--verify", f"refs/heads/{branch}")
        new = self._upstream(branch, remote)
        if new == old:
            return PullResult(False, old, new, "up to date")
        if not self._is_ancestor(old, new):
            return PullResult(False, old, new, "diverged from its upstream: not merging")
        if self.current_branch() == branch:
            # without taking index.lock, which a person's commit at that moment needs
            if self._run("--no-optional-locks", "status", "--porcelain", "--untracked-files=no"):
                return PullResult(False, old, new, "the work tree has changes: not touching it")
            self._run("merge", "--ff-only", "--quiet", new)
        else:
            # With the old value: git refuses if the branch moved since we looked.
            message = "recon watch: fast-forward"
            self._run("update-ref", "-m", message, f"refs/heads/{branch}", new, old)
        return PullResult(True, old, new)

    def _config(self, key: str) -> str | None:
        try:
            return self._run("config", "--get", key) or None
        except RepoError:
            return None

    def _upstream(self, branch: str, remote: str) -> str:
        for name in (f"{branch}@{{upstream}}", f"refs/remotes/{remote}/{branch}"):
            try:
                return self._run("rev-parse", "--verify", "--quiet", f"{name}^{{commit}}")
            except RepoError:
                continue
        raise RepoError(f"branch {branch!r} has no upstream on {remote!r} to pull from")

    def _is_ancestor(self, old: str, new: str) -> bool:
        try:
            self._run("merge-base", "--is-ancestor", old, new)
        except RepoError:
            return False
        return True
