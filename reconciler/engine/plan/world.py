"""The world at a pass, as the planner reads it: every fact a plan is made from, in one
frozen value, and what the request asks of the plan. Pure values.

engine/observe makes the world (``observe.seen.see``: the journal read, the scheduler
asked, finished jobs judged, the files looked at); ``assemble.planned`` plans it. They
live here, beside the planner, so the planner takes them without importing anything
that reads (engine/observe reads the journal, the files and the scheduler).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from reconciler.desired.desired import Desired
from reconciler.engine.plan.actions import Move
from reconciler.engine.plan.fit import Fit
from reconciler.engine.plan.inputs import FileState
from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.state.records import SetupRecord, SubmissionRecord


@dataclass(frozen=True, kw_only=True)
class World:
    """What a plan is made from at ``now``.

    ``records`` and ``setups`` are the journal's as they read once the pass's judgement
    of finished jobs is recorded (engine/observe/endings.py); ``observation`` is this
    deployment's jobs only, ``elsewhere`` the live jobs of the project other deployments
    own (only named in a note, never acted on). ``scheduler``: its name. ``files``: the
    versions on disk of outputs and external inputs; ``fit``: what runs must fit (None:
    the partitions are unknown); ``containers``: what the cluster offers containers
    (``Container.features``: pyxis), None when not looked at; ``max_array_size``: the
    scheduler's, where a sweep's job arrays split (``arrays.place``); ``code_at``: the
    committed files' blob ids at the commits of journal records that carry no code
    versions (``PlanInputs.code_at``); ``cancelled``: the jobs recon itself cancelled,
    none of them a failed attempt; ``moves``: the renames not made yet (``moves.pending``).
    """

    desired: Desired
    observation: Observation
    records: Sequence[SubmissionRecord]
    now: datetime
    scheduler: str
    elsewhere: Sequence[ObservedJob] = ()
    setups: Sequence[SetupRecord] = ()
    files: FileState = field(default_factory=FileState)
    fit: Fit | None = None
    containers: frozenset[str] | None = None
    max_array_size: int | None = None
    code_at: Mapping[str, Mapping[str, str | None]] | None = None
    cancelled: frozenset[str] = frozenset()
    moves: Sequence[Move] = ()


class Asked(Protocol):
    """What a request asks of the plan (engine/reconcile.Request is one). A sweep's name
    among ``targets`` or ``replace`` stands for its members."""

    @property
    def targets(self) -> Sequence[str]: ...
    @property
    def downstream(self) -> bool: ...  # the targets' downstream runs too
    @property
    def replace(self) -> Sequence[str]: ...  # runs to submit anew though nothing changed
    @property
    def allow_prune_all(self) -> bool: ...  # a person confirmed prunes the guard holds
    @property
    def allow_over_budget(self) -> bool: ...  # a person confirmed a plan over budget


@dataclass(frozen=True)
class Asking:
    """A request of the plan alone: every run, nothing confirmed, unless told."""

    targets: Sequence[str] = ()
    downstream: bool = False
    replace: Sequence[str] = ()
    allow_prune_all: bool = False
    allow_over_budget: bool = False


EVERY_RUN = Asking()
