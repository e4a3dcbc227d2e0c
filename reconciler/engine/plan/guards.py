"""What holds a whole plan back unless a person confirms it: prunes that look like an
accident (engine/plan/prune.py) and a GPU-hour budget overrun (engine/plan/holds.py). A
plan carries them in ``Plan.holds``; apply carries out nothing of a held plan."""

from __future__ import annotations

from enum import StrEnum
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class PruneCause(StrEnum):
    """Why a plan's prunes are held back (engine/plan/prune.py)."""

    EMPTY = "empty"  # the commit declares nothing, and they would cancel live jobs
    OVER_LIMIT = "over-limit"  # more than one job, and more than recon.yaml's prune_limit


class PruneGuard(BaseModel):
    """A plan whose prunes would cancel live jobs of a commit that declares nothing, or
    more than one job and more than its `prune_limit` allows. Unless confirmed
    (`--allow-prune-all`), apply carries out
    nothing of such a plan: like Argo CD's automated sync, which refuses to prune every
    resource of an application unless `allowEmpty` is set."""

    model_config = _FROZEN

    cause: PruneCause
    cancels: int = Field(description="the live jobs the prunes would cancel")
    live: int = Field(description="the project's live jobs before the plan")
    limit: str = Field(description="recon.yaml's prune_limit, as written")
    allowed: int = Field(description="how many jobs the limit allows one pass to cancel")
    runs: tuple[str, ...] = Field(description="the runs and allocations that left the specs")
    confirmed: bool = Field(False, description="--allow-prune-all was given")


class BudgetGuard(BaseModel):
    """A plan whose submissions are forecast to take more GPU-hours than recon.yaml's
    `budget` allows (engine/plan/holds.py). Unless confirmed (`--allow-over-budget`),
    apply carries out nothing of it; running jobs are never cancelled by it."""

    model_config = _FROZEN

    gpu_hours: float = Field(description="the budget, as written")
    per: Literal["commit", "day"]
    forecast: float = Field(description="GPU-hours the plan's submissions are forecast to take")
    spent: float = Field(0.0, description="per day: GPU-hours the project's jobs held today")
    runs: tuple[str, ...] = Field(description="the GPU runs the plan submits")
    unforecast: tuple[str, ...] = Field(
        (), description="GPU runs with neither a last duration nor a time limit: counted 0"
    )
    confirmed: bool = Field(False, description="--allow-over-budget was given")
