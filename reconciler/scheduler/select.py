"""`scheduler: auto | slurm | local`: which backend a project's plans and applies use.

``auto`` is Slurm where ``sbatch`` is on PATH and answers (``sbatch --version`` exits 0
within a few seconds: a broken or half-installed client does not count), and the local
backend everywhere else. ``slurm`` and ``local`` force one.

The local backend hands out this machine's CPUs; ``RECON_LOCAL_CPUS`` sets another count
(for a small machine whose jobs ask more CPUs than it has: they would otherwise wait
PENDING for ever, as on a Slurm cluster without a node big enough). Its GPUs are those
``RECON_LOCAL_GPUS`` declares, else recon.yaml's ``local.gpus``, else those
``nvidia-smi -L`` lists (``local/gpus``).
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Literal

from reconciler.errors import ReconError
from reconciler.scheduler.base import Scheduler

Choice = Literal["auto", "slurm", "local"]

SBATCH_ANSWER_SECONDS = 5.0
CPUS_VARIABLE = "RECON_LOCAL_CPUS"


def slurm_available() -> bool:
    """``sbatch`` is on PATH and ``sbatch --version`` exits 0 within a few seconds."""
    sbatch = shutil.which("sbatch")
    if sbatch is None:
        return False
    try:
        result = subprocess.run(
            [sbatch, "--version"],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=SBATCH_ANSWER_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return result.returncode == 0


def select_scheduler(
    choice: Choice,
    state_dir: Path,
    project: str | None = None,
    gpus: tuple[str, ...] | None = None,
) -> Scheduler:
    """The backend for ``choice``; a local one keeps its jobs under ``state_dir``. With
    ``project``, Slurm's history is read for that project's jobs only. ``gpus`` is what
    recon.yaml's ``local.gpus`` declares (``RECON_LOCAL_GPUS`` overrides it)."""
    if choice == "slurm" or (choice == "auto" and slurm_available()):
        from reconciler.scheduler.slurm.adapter import SlurmScheduler

        return SlurmScheduler(project=project)
    from reconciler.scheduler.local import LocalScheduler
    from reconciler.scheduler.local.gpus import GpuDeclarationError, machine_gpus

    try:
        devices = machine_gpus(os.environ, gpus)
    except GpuDeclarationError as error:
        raise ReconError(str(error)) from None
    return LocalScheduler(state_dir, cpus=_local_cpus(), gpus=devices)


def _local_cpus() -> int | None:
    text = os.environ.get(CPUS_VARIABLE)
    if text is None or not text.strip():
        return None
    if not text.strip().isdigit() or int(text) < 1:
        raise ReconError(f"{CPUS_VARIABLE}={text!r}: give a whole number of CPUs, at least 1")
    return int(text)
