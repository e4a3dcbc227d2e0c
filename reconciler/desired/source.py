"""Where spec files come from: a git commit (the default) or the work tree (`--worktree`).

Both sides list files with a git blob id, so the parse cache keys on content alone: the
same blob read from a commit or from disk is parsed once.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterable
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple, Protocol

from reconciler.errors import RepoError

if TYPE_CHECKING:
    import git

PROJECT_FILE = "recon.yaml"
_LINK_MODE = "120000"  # git's mode for a symbolic link
# One entry of `git ls-tree -r -z` that is a file (not a submodule's commit): its mode,
# blob id and path, found in the whole listing at once rather than split line by line.
_LS_TREE_BLOB = re.compile(r"(\d+) blob ([0-9a-f]+)\t([^\x00]*)\x00")
_MAX_HOPS = 8


class SpecSource(Protocol):
    """A read-only view of the repo's files at one point in its history."""

    root: Path
    commit: str | None  # None when reading the work tree

    def paths(self) -> list[str]:
        """Every file, as a repo-relative posix path."""
        ...

    def blob_id(self, path: str) -> str: ...

    def read(self, path: str) -> bytes: ...

    def read_many(self, paths: list[str]) -> dict[str, bytes]: ...

    def target(self, path: str) -> str | None:
        """The file whose content ``path`` holds: ``path`` itself, or for a symbolic link
        the file it leads to inside the project; None for a link that leads outside the
        project or to nothing (such content is not in the commit, so it has no version)."""
        ...


def blob_id(content: bytes) -> str:
    """The id git gives a blob with this content (`git hash-object`)."""
    return hashlib.sha1(b"blob %d\x00" % len(content) + content).hexdigest()


def open_repo(path: Path, offer_worktree: bool = True) -> git.Repo:
    """The git repository holding `path`; the project may be a folder inside it.
    `offer_worktree`: whether the command has --worktree to suggest."""
    import git  # gitpython: for snapshots and watch; reading specs needs only git itself

    try:
        return git.Repo(path, search_parent_directories=True)
    except (git.InvalidGitRepositoryError, git.NoSuchPathError):
        raise RepoError(_not_a_repo(path, offer_worktree)) from None


def _not_a_repo(path: Path, offer_worktree: bool = True) -> str:
    instead = ", or use --worktree" if offer_worktree else ""
    return (
        f"{path} is not inside a git repository: recon reads specs from commits "
        f"(run `git init` and commit{instead})"
    )


class CommitSource:
    """The files of the project folder `root` at one commit, paths relative to `root`.

    Plain git commands, no library: one `git rev-parse` finds the repository and the
    commit, one `git ls-tree` lists the files with their blob ids and one `git cat-file
    --batch` reads those the parse cache lacks (`plan --against` does all this twice,
    and importing gitpython cost more than the commands).
    """

    def __init__(self, root: Path, revision: str = "HEAD") -> None:
        self.root = root.resolve()
        # A revision starting with "-" would be read as an option; git names none so.
        wanted = () if revision.startswith("-") else ("--verify", "-q", f"{revision}^{{commit}}")
        found = _git(root, "rev-parse", "--show-toplevel", "--git-dir", *wanted)
        lines = found.stdout.splitlines()
        if len(lines) < 2:
            if "not a git repository" in found.stderr:
                raise RepoError(_not_a_repo(root))
            raise RepoError(f"git rev-parse failed in {root}: {found.stderr.strip()}")
        top = Path(lines[0]).resolve()
        self._git_dir = self.root / lines[1]  # relative to `root` unless absolute
        try:
            prefix = self.root.relative_to(top).as_posix()
        except ValueError:
            raise RepoError(f"{root} is not inside the work tree of {top}") from None
        self._prefix = "" if prefix == "." else prefix + "/"
        if len(lines) < 3:
            if _git(root, "rev-parse", "--verify", "-q", "HEAD^{commit}").returncode != 0:
                raise RepoError(
                    f"the git repository {top} has no commits yet: recon reads specs from "
                    "commits; commit recon.yaml and the specs (`git add -A && git commit`), "
                    "or use --worktree"
                )
            raise RepoError(
                f"revision {revision!r} not found in {root}: name a commit, branch or tag "
                "(for PR CI, fetch it first, e.g. `git fetch origin main`)"
            )
        self.commit: str | None = lines[2]
        self._links: set[str] = set()
        self._blobs = self._list()

    def _list(self) -> dict[str, str]:
        scope = [self._prefix] if self._prefix else []
        assert self.commit is not None
        listed = _git(self.root, "ls-tree", "-r", "-z", "--full-tree", self.commit, "--", *scope)
        if listed.returncode != 0:
            raise RepoError(f"git ls-tree failed in {self.root}: {listed.stderr.strip()}")
        result: dict[str, str] = {}
        cut = len(self._prefix)
        for mode, blob, path in _LS_TREE_BLOB.findall(listed.stdout):
            if path.startswith(self._prefix):
                result[path[cut:]] = blob
                if mode == _LINK_MODE:
                    self._links.add(path[cut:])
        return result

    def target(self, path: str) -> str | None:
        """A committed link holds its target's path as its blob; followed inside the
        project (and no further than ``_MAX_HOPS`` links, which also ends a loop)."""
        for _ in range(_MAX_HOPS):
            if path not in self._links:
                return path if path in self._blobs else None
            pointed = self.read(path).decode(errors="replace")
            if pointed.startswith("/"):
                return None
            path = os.path.normpath(os.path.join(os.path.dirname(path), pointed))
            if path.startswith("../") or path == "..":
                return None
        return None

    def paths(self) -> list[str]:
        return list(self._blobs)

    @property
    def has_links(self) -> bool:
        return bool(self._links)

    def plain_files(self) -> dict[str, str]:
        """Every committed file that is no symbolic link -> its blob id."""
        if not self._links:
            return self._blobs
        return {path: blob for path, blob in self._blobs.items() if path not in self._links}

    def blob_id(self, path: str) -> str:
        return self._blobs[path]

    def read(self, path: str) -> bytes:
        return self.read_many([path])[path]

    def read_many(self, paths: list[str]) -> dict[str, bytes]:
        """All of `paths` through ONE `git cat-file --batch`: a round trip per blob costs
        about 0.2 ms, which is two seconds for a sweep of 10,000 files."""
        if not paths:
            return {}
        request = "".join(self._blobs[path] + "\n" for path in paths).encode()
        output = subprocess.run(
            ["git", "cat-file", "--batch"],
            cwd=self._git_dir,
            input=request,
            capture_output=True,
            check=False,
        )
        if output.returncode != 0:
            raise RepoError(f"git cat-file failed: {output.stderr.decode(errors='replace')}")
        return dict(zip(paths, _batch_contents(output.stdout, len(paths)), strict=True))


@lru_cache(maxsize=64)
def committed_blobs(root: Path, commit: str) -> dict[str, str | None] | None:
    """Every file of the project folder `root` at `commit` (relative to `root`) -> its git
    blob id, from one `git ls-tree`; None for a symbolic link (its blob is the link's
    text, not its target's content). None when git cannot list the commit (gone after a
    rebase and a gc). Cached: a commit never changes."""
    listed = _git(root, "ls-tree", "-r", "-z", commit)
    if listed.returncode != 0:
        return None
    return {
        path: None if mode == _LINK_MODE else blob
        for mode, blob, path in _LS_TREE_BLOB.findall(listed.stdout)
    }


class WorktreeSource:
    """The files on disk, uncommitted changes included (`--worktree`)."""

    def __init__(self, root: Path, skip_dirs: Iterable[str] = ()) -> None:
        self.root = root
        self.commit: str | None = None
        # Version control, state and run outputs are never specs, and output trees can
        # be huge: pruning them keeps the walk short.
        self._skip = {".git", *skip_dirs}

    def paths(self) -> list[str]:
        result: list[str] = []
        for dirpath, dirnames, filenames in os.walk(self.root):
            relative_dir = Path(dirpath).relative_to(self.root).as_posix()
            prefix = "" if relative_dir == "." else f"{relative_dir}/"
            dirnames[:] = [
                d for d in dirnames if d not in self._skip and prefix + d not in self._skip
            ]
            result.extend(prefix + name for name in filenames)
        return result

    def blob_id(self, path: str) -> str:
        return blob_id(self.read(path))

    def read_many(self, paths: list[str]) -> dict[str, bytes]:
        return {path: self.read(path) for path in paths}

    def target(self, path: str) -> str | None:
        """On disk a link is followed wherever it leads: the edits are what is planned."""
        return path if (self.root / path).is_file() else None

    def read(self, path: str) -> bytes:
        try:
            return (self.root / path).read_bytes()
        except OSError as error:
            raise RepoError(f"cannot read {path}: {error.strerror}") from None


def uncommitted(root: Path, skip_dirs: Iterable[str] = ()) -> list[str]:
    """Files of the project folder `root` that differ from HEAD: changed, staged, new
    (untracked and not ignored) or deleted, relative to `root`; `skip_dirs` (relative to
    `root`: the state and runs folders) left out. Empty when git cannot say."""
    excluded = [f":(exclude){d.strip('/')}" for d in skip_dirs if d and not os.path.isabs(d)]
    try:
        # --no-optional-locks: git status refreshes the index's stat data when it can,
        # taking index.lock, and a person's `git add` or `git commit` at that moment fails
        # ("index.lock: File exists"); a reader of the repository never writes its index.
        output = subprocess.run(
            ["git", "--no-optional-locks", "status", "--porcelain", "-z",
             "--untracked-files=normal", "--", ".", *excluded],
            cwd=root, capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return []
    entries = output.split("\0")
    paths: list[str] = []
    index = 0
    while index < len(entries):
        entry = entries[index]
        index += 1
        if len(entry) < 4:
            continue
        if entry[0] in "RC":  # a rename or copy: the next entry is the old path
            index += 1
        paths.append(entry[3:])
    # git prints paths relative to the repository's top, not to `root`.
    top = _top_level(root)
    return [os.path.relpath(top / path, root) if top is not None else path for path in paths]


def _top_level(root: Path) -> Path | None:
    try:
        output = subprocess.run(
            ["git", "rev-parse", "--show-toplevel"],
            cwd=root, capture_output=True, text=True, check=True, timeout=30,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(output.strip())


@lru_cache(maxsize=256)
def _glob_regex(pattern: str) -> re.Pattern[str]:
    """`**/` matches any number of directories, `*` and `?` stay within one."""
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        if pattern.startswith("**/", index):
            parts.append("(?:.*/)?")
            index += 3
        elif pattern.startswith("**", index):
            parts.append(".*")
            index += 2
        elif pattern[index] == "*":
            parts.append("[^/]*")
            index += 1
        elif pattern[index] == "?":
            parts.append("[^/]")
            index += 1
        else:
            parts.append(re.escape(pattern[index]))
            index += 1
    return re.compile("".join(parts) + r"\Z")


def matching(paths: Iterable[str], patterns: Iterable[str]) -> list[str]:
    return sorted(filter(_globs_regex(tuple(patterns)).match, paths))


def matches_some(paths: Iterable[str], pattern: str) -> bool:
    """Whether the pattern matches any of the paths: stops at the first."""
    match = _glob_regex(pattern).match
    return any(match(path) for path in paths)


@lru_cache(maxsize=64)
def _globs_regex(patterns: tuple[str, ...]) -> re.Pattern[str]:
    """Any of the patterns, as one regex: one match per path, however many patterns."""
    if not patterns:
        return re.compile(r"(?!)")  # matches nothing
    return re.compile("|".join(f"(?:{_glob_regex(pattern).pattern})" for pattern in patterns))


def _git(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """A git command's outcome, its output as text (paths are UTF-8 in git's listings)."""
    try:
        return subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            encoding="utf-8",
            errors="surrogateescape",
            check=False,
        )
    except OSError as error:
        raise RepoError(f"cannot run git: {error.strerror}") from None


def commit_of(root: Path, revision: str = "HEAD") -> str | None:
    """The full id of the commit ``revision`` names now; None when it names none."""
    found = _git(root, "rev-parse", "--verify", "-q", f"{revision}^{{commit}}")
    return found.stdout.strip() if found.returncode == 0 else None


def commits_since(root: Path, since: str, revision: str = "HEAD") -> list[str] | None:
    """``since`` and every commit after it up to ``revision`` (``git rev-list``), full
    ids; None when ``since`` names no commit of the repository."""
    found = _git(root, "rev-parse", "--verify", "-q", f"{since}^{{commit}}")
    if found.returncode != 0:
        return None
    first = found.stdout.strip()
    later = _git(root, "rev-list", f"{first}..{revision}")
    if later.returncode != 0:
        raise RepoError(f"git rev-list {first}..{revision} failed: {later.stderr.strip()}")
    return [first, *later.stdout.split()]


class FileChange(NamedTuple):
    """One file that differs between two commits (``changed_files``)."""

    path: str  # relative to the project folder
    status: str  # git's letter: M modified, A added, D deleted, T type changed
    old_mode: str
    new_mode: str
    old_blob: str
    new_blob: str


# One entry of `git diff-tree -r -z` (raw format): modes, blob ids and status, then the
# path after a NUL.
_DIFF_TREE_ENTRY = re.compile(r":(\d+) (\d+) ([0-9a-f]+) ([0-9a-f]+) ([A-Z])\d*\x00([^\x00]*)\x00")


def changed_files(root: Path, old: str, new: str) -> list[FileChange] | None:
    """The files of the project folder `root` that differ between commits `old` and
    `new` (no rename detection: a move is a deletion and an addition); None when git
    cannot compare them (a commit gone after a rebase and a gc)."""
    listed = _git(root, "diff-tree", "-r", "-z", "--no-renames", "--relative", old, new)
    if listed.returncode != 0:
        return None
    return [
        FileChange(path, status, old_mode, new_mode, old_blob, new_blob)
        for old_mode, new_mode, old_blob, new_blob, status, path in _DIFF_TREE_ENTRY.findall(
            listed.stdout
        )
    ]


def read_blobs(root: Path, blobs: list[str]) -> list[bytes]:
    """The content of each blob, through one `git cat-file --batch` run in `root`."""
    if not blobs:
        return []
    request = "".join(blob + "\n" for blob in blobs).encode()
    output = subprocess.run(
        ["git", "cat-file", "--batch"], cwd=root, input=request, capture_output=True, check=False
    )
    if output.returncode != 0:
        raise RepoError(f"git cat-file failed: {output.stderr.decode(errors='replace')}")
    return _batch_contents(output.stdout, len(blobs))


def _batch_contents(data: bytes, count: int) -> list[bytes]:
    """The contents `git cat-file --batch` wrote, in the order asked."""
    contents: list[bytes] = []
    offset = 0
    for _ in range(count):
        header_end = data.index(b"\n", offset)
        header = data[offset:header_end].split()
        if len(header) < 3 or header[1] == b"missing":
            raise RepoError(f"git cat-file: {data[offset:header_end].decode(errors='replace')}")
        size = int(header[2])
        contents.append(data[header_end + 1 : header_end + 1 + size])
        offset = header_end + 1 + size + 1  # the content is followed by a newline
    return contents
