"""The one place recon runs a Slurm command; tests swap it for a recording fake."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

TIMEOUT_SECONDS = 60.0
# Exit statuses the shell uses, so a missing or hung command reads like any other failure.
NOT_FOUND = 127
TIMED_OUT = 124


class Runner(Protocol):
    def __call__(
        self, argv: Sequence[str], stdin: str | None = None
    ) -> subprocess.CompletedProcess[str]: ...


def run(argv: Sequence[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` and return what it did; never raises for the command's own failures."""
    env = {**_own_environment(os.environ), "SLURM_TIME_FORMAT": "standard"}
    try:
        return subprocess.run(
            list(argv),
            input=stdin,
            capture_output=True,
            text=True,
            env=env,
            timeout=TIMEOUT_SECONDS,
            check=False,
        )
    except FileNotFoundError as error:
        return subprocess.CompletedProcess(list(argv), NOT_FOUND, "", f"{argv[0]}: {error}")
    except subprocess.TimeoutExpired:
        message = f"{argv[0]}: timed out after {TIMEOUT_SECONDS:.0f} s"
        return subprocess.CompletedProcess(list(argv), TIMED_OUT, "", message)


class Process(Protocol):
    """A command started and left running: whether it has exited, and how."""

    def poll(self) -> int | None: ...


class Spawner(Protocol):
    def __call__(self, argv: Sequence[str], log: Path) -> Process: ...


def spawn_detached(argv: Sequence[str], log: Path) -> Process:
    """Start ``argv`` in a session of its own, output appended to ``log``, and return at
    once: it outlives recon, its terminal and its process group (a step's srun must live
    as long as the step). Raises OSError when it cannot be started."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=_step_environment(os.environ),
        )


def _step_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """A step's environment: recon's, minus Slurm's input variables (``SLURM_NTASKS``,
    ``SLURM_CPUS_PER_TASK``... left by a job recon itself runs in would reshape the step).
    ``SLURM_CONF`` stays: it says where the cluster is."""
    return {
        key: value
        for key, value in _own_environment(environ).items()
        if not key.startswith(("SLURM_", "SRUN_")) or key == "SLURM_CONF"
    }


def _own_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment minus what would change a command behind recon's back.

    ``SBATCH_*`` and ``SALLOC_*`` outrank a script's ``#SBATCH`` lines (a stray
    ``SBATCH_PARTITION`` would move every job), so the rendered script, which the spec
    hash covers, must be the only source of options. ``SLURM_TIME_FORMAT`` is pinned by
    the caller: another format would break the parsers.
    """
    return {
        key: value for key, value in environ.items() if not key.startswith(("SBATCH_", "SALLOC_"))
    }
