"""`scheduler: auto | slurm | local`: which backend a project's plans and applies use."""

from __future__ import annotations

import shutil
from typing import Literal

from reconciler.errors import ReconError
from reconciler.scheduler.base import Scheduler

Choice = Literal["auto", "slurm", "local"]


def slurm_available() -> bool:
    return shutil.which("sbatch") is not None and shutil.which("squeue") is not None


def select_scheduler(choice: Choice) -> Scheduler:
    if choice == "slurm" or (choice == "auto" and slurm_available()):
        from reconciler.scheduler.slurm.adapter import SlurmScheduler

        return SlurmScheduler()
    raise ReconError(
        f"scheduler: {choice}: no Slurm here (sbatch and squeue are not on PATH) and the "
        "local backend is not available in this version; run on a Slurm login node, or "
        "`recon dev-cluster up` for a local Slurm"
    )
