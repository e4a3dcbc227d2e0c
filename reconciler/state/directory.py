"""The state directory: made once, owner-only, and never committed by accident.

It holds the journal, the lock, the commit snapshots jobs run in and the local backend's
jobs (with the environment each runs in): nothing another user should read, and nothing
for `git add -A` to pick up. So it is made mode 0700, a ``.gitignore`` holding ``*`` is
put inside it (as pytest does with its cache), and one owned by another user is refused:
writing there would hand that user recon's journal, or act on their project. One on a
filesystem whose locks do not hold across the hosts that share it is refused too
(``state.filesystem``).
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from reconciler.errors import StateDirError
from reconciler.state.filesystem import check_state_filesystem

IGNORE_FILE = ".gitignore"
IGNORE_ALL = "# recon's state (journal, lock, snapshots, local jobs): never committed.\n*\n"


def prepare_state_dir(directory: Path) -> None:
    """Make ``directory`` (0700) if needed, check that this user owns it, and keep it out
    of git. Raises StateDirError saying what to do."""
    check_state_filesystem(directory)
    try:
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        info = directory.stat()
    except OSError as error:
        raise StateDirError(
            f"cannot make the state directory {directory}: {error.strerror}; check that its "
            "parent exists and is writable, or set state_dir in recon.yaml"
        ) from None
    if not stat.S_ISDIR(info.st_mode):
        raise StateDirError(f"the state directory {directory} is not a directory: {_fix()}")
    if info.st_uid != os.geteuid():
        raise StateDirError(
            f"the state directory {directory} belongs to {_name(info.st_uid)}, not to you "
            f"({_name(os.geteuid())}): it holds another deployment's journal and jobs. "
            f"{_fix()}"
        )
    try:
        if stat.S_IMODE(info.st_mode) & 0o077:
            directory.chmod(0o700)
        ignore = directory / IGNORE_FILE
        if not ignore.exists():
            ignore.write_text(IGNORE_ALL)
    except OSError as error:
        raise StateDirError(
            f"cannot write in the state directory {directory}: {error.strerror}; {_fix()}"
        ) from None


def _fix() -> str:
    return "set state_dir in recon.yaml to a folder of your own (or remove this one)"


def _name(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return f"uid {uid}"
