"""The one place the dev cluster runs external commands."""

from __future__ import annotations

import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.errors import DevClusterError


@dataclass(frozen=True)
class Completed:
    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def run(
    argv: Sequence[str],
    *,
    check: bool = True,
    input: str | None = None,
    timeout: float = 60,
    env: dict[str, str] | None = None,
) -> Completed:
    """Run a command to completion and return its exit code and output.

    Output goes to temporary files, not pipes: a daemon that forks into the background
    keeps the inherited descriptors open, and reading a pipe would then never see EOF.
    """
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            proc = subprocess.run(
                list(argv),
                input=input.encode() if input is not None else None,
                stdin=None if input is not None else subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                timeout=timeout,
                env=env,
                check=False,
            )
        except FileNotFoundError as error:
            raise DevClusterError(f"{argv[0]}: command not found") from error
        except subprocess.TimeoutExpired as error:
            raise DevClusterError(f"`{' '.join(argv)}` did not finish in {timeout:g} s") from error
        out.seek(0)
        err.seek(0)
        done = Completed(
            tuple(argv),
            proc.returncode,
            out.read().decode(errors="replace"),
            err.read().decode(errors="replace"),
        )
    if check and not done.ok:
        detail = (done.stderr.strip() or done.stdout.strip())[-2000:]
        raise DevClusterError(
            f"`{' '.join(argv)}` failed with exit code {done.returncode}"
            + (f":\n{detail}" if detail else "")
        )
    return done


def run_attached(argv: Sequence[str], *, env: dict[str, str] | None = None) -> int:
    """Run a command with our standard streams, so its output shows as it comes; return
    its exit code. For long commands a person watches (a bring-up, a test run)."""
    try:
        return subprocess.run(list(argv), env=env, check=False).returncode
    except FileNotFoundError as error:
        raise DevClusterError(f"{argv[0]}: command not found") from error
