"""The programs outside Python that tests call, and machines without some of them.

A test passes or fails the same on every machine, whatever else that machine has:
- a program a test needs is installed by the test itself when it is missing, from
  Debian's packages, as root (as on a fresh CI machine); the test fails, never skips,
  when it cannot be had (`installed`);
- a test that means "this program is not here" runs with a PATH that cannot find it,
  whatever /usr/bin holds (`path_without`), and a file a script looks for at a fixed
  path is hidden from that script alone (`hiding`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest


def installed(program: str, *packages: str) -> str:
    """The path of ``program``, its Debian packages (``packages``, by default one named
    like it) installed first when it is missing."""
    found = shutil.which(program)
    if found is not None:
        return found
    apt_install(*(packages or (program,)), why=f"{program} is missing")
    found = shutil.which(program)
    if found is None:
        pytest.fail(f"{program} is still missing after apt-get install {' '.join(packages)}")
    return found


def apt_install(*packages: str, why: str) -> None:
    """Debian's ``packages``, installed with apt-get as root; a failed test otherwise.
    apt's index is brought up to date only when the first try fails: on a machine set up
    a moment ago it may be missing or old."""
    command = " ".join(packages)
    if os.geteuid() != 0:
        pytest.fail(f"{why}: sudo apt-get install -y {command} (as root the tests install it)")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    install = ["apt-get", "install", "-y", "--no-install-recommends", *packages]
    if subprocess.run(install, env=env, capture_output=True, check=False).returncode == 0:
        return
    subprocess.run(["apt-get", "update"], env=env, capture_output=True, check=False)
    done = subprocess.run(install, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.fail(f"{why}, and apt-get install {command} failed:\n{done.stderr}")


def path_without(folder: Path, hidden: Iterable[str], path: str | None = None) -> str:
    """A PATH of one new ``folder`` holding a link to every program that ``path`` (this
    process's PATH by default) finds, the ``hidden`` names left out: none of them is
    found on it, whichever folder of the machine holds one."""
    left_out = set(hidden)
    folder.mkdir(parents=True, exist_ok=True)
    for directory in (path if path is not None else os.environ["PATH"]).split(os.pathsep):
        if not Path(directory).is_dir():
            continue
        for program in sorted(Path(directory).iterdir()):
            link = folder / program.name
            if program.name in left_out or os.path.lexists(link):
                continue
            if program.is_file() and os.access(program, os.X_OK):
                link.symlink_to(program)
    return str(folder)


def hiding(paths: Sequence[str], argv: Sequence[str]) -> list[str]:
    """``argv`` run in a mount namespace of its own where each of ``paths`` that exists
    reads as an empty, non-executable file (/dev/null bound over it), so a script that
    looks for it at that fixed path finds nothing; the rest of the machine is unchanged.
    Needs root, or user namespaces (``--map-root-user``), and a root directory that is a
    mount point; with nothing to hide (a chroot made for tests, where neither holds),
    ``argv`` runs as it is."""
    present = [path for path in paths if os.path.lexists(path)]
    if not present:
        return list(argv)
    privilege = [] if os.geteuid() == 0 else ["--map-root-user"]
    # $1 says how many paths follow; the rest is the command.
    bind_then_run = (
        'n=$1; shift; while [ "$n" -gt 0 ]; do '
        'mount --bind /dev/null "$1" || exit 125; shift; n=$((n - 1)); done; exec "$@"'
    )
    return [
        "unshare", "--mount", "--propagation", "private", *privilege,
        "sh", "-c", bind_then_run, "hiding", str(len(present)), *present, *argv,
    ]  # fmt: skip
