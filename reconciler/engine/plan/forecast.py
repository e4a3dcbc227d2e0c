"""What the runs a plan or a change will run are expected to cost: what each job of a run
asks for (``Asks``), and how long its last success ran (``last_durations``, from the
journal's records). Pure.

`recon plan` prints it as the plan's expected cost, and the budget guard
(engine/plan/holds.py) holds a plan forecast to take more GPU-hours than the budget. What
the jobs did spend is the ledger's (engine/ledger/cost.py), which the planner never reads.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from reconciler.desired.models import RunResources
from reconciler.desired.resources import mig_fraction
from reconciler.scheduler.states import Health
from reconciler.state.records import SubmissionRecord

HOUR = 3600.0


@dataclass(frozen=True)
class Asks:
    """What one job of a run asks for: GPUs and CPUs over all its nodes and components,
    and its time limit (None: none set)."""

    gpus: int
    cpus: int
    limit_s: float | None
    # Those GPUs in whole GPUs: a MIG slice its share of one (docs/cost.md); None: gpus
    gpu_value: float | None = None

    @classmethod
    def of(cls, resources: RunResources) -> Asks:
        shapes = resources.components or (resources,)
        gpus, worth = 0, 0.0
        for shape in shapes:
            asked = shape.node_gpus
            count = asked.count * (shape.nodes or 1) if asked else 0
            gpus += count
            worth += count * mig_fraction(asked.type if asked else None)
        cpus = sum((s.cpus.count if s.cpus else 1) * (s.nodes or 1) for s in shapes)
        limit = None if resources.time is None else float(resources.time.seconds)
        return cls(gpus, cpus, limit, None if worth == gpus else worth)

    @property
    def gpu_equivalents(self) -> float:
        return self.gpus if self.gpu_value is None else self.gpu_value


@dataclass(frozen=True)
class RunEstimate:
    """One run the change will run: what it asks for and how long its last success ran
    (None: it never succeeded with its usage known)."""

    name: str
    asks: Asks
    last_s: float | None

    @property
    def gpu_h(self) -> float | None:
        return None if self.last_s is None else self.last_s * self.asks.gpu_equivalents / HOUR

    @property
    def cpu_h(self) -> float | None:
        return None if self.last_s is None else self.last_s * self.asks.cpus / HOUR

    @property
    def ceiling_gpu_h(self) -> float | None:
        """Its time limit times its GPUs: the most a job of it can hold."""
        limit = self.asks.limit_s
        return None if limit is None else limit * self.asks.gpu_equivalents / HOUR


@dataclass(frozen=True)
class Expected:
    """The expected GPU-hours and CPU-hours of the runs a plan or change will run.
    ``source``: the file some last durations were read from (a clone with no journal),
    None when the journal said them all."""

    runs: tuple[RunEstimate, ...]
    source: str | None = None

    @property
    def known(self) -> tuple[RunEstimate, ...]:
        return tuple(run for run in self.runs if run.last_s is not None)

    @property
    def unknown(self) -> tuple[RunEstimate, ...]:
        return tuple(run for run in self.runs if run.last_s is None)

    @property
    def gpu_h(self) -> float:
        return sum(run.gpu_h or 0.0 for run in self.known)

    @property
    def cpu_h(self) -> float:
        return sum(run.cpu_h or 0.0 for run in self.known)

    @property
    def ceiling_gpu_h(self) -> float | None:
        """The unknown runs' GPU-hours at most (their time limits); None when one of them
        that asks for GPUs has no limit."""
        ceilings = [run.ceiling_gpu_h for run in self.unknown if run.asks.gpus]
        return None if None in ceilings else sum(c or 0.0 for c in ceilings)


def last_durations(records: Iterable[SubmissionRecord]) -> dict[str, float]:
    """run -> how long its newest success that ran its command ran (its usage's elapsed
    time), from the journal's records, oldest first."""
    durations: dict[str, float] = {}
    for record in records:
        if ran_its_command(record) and (usage := record.usage) is not None:
            durations[record.name] = usage.elapsed_s
    return durations


def ran_its_command(record: SubmissionRecord) -> bool:
    """A run's job that succeeded running its command (not one that skipped it)."""
    return record.kind == "run" and record.final_health is Health.SUCCEEDED and not record.skipped


def expected(
    asks: Mapping[str, Asks],
    durations: Mapping[str, float],
    exported: Mapping[str, float] | None = None,
    source: str | None = None,
) -> Expected:
    """The expected cost of running each run of ``asks`` (run -> what it asks for now),
    from its last successful duration (``durations``, run -> seconds, the journal's);
    ``exported``: those read from ``source`` (`recon cost --format json`'s
    ``last_durations``), for the runs the journal has none of."""
    known = {**(exported or {}), **durations}
    used = source if exported and any(n not in durations and n in exported for n in asks) else None
    return Expected(
        tuple(RunEstimate(name, ask, known.get(name)) for name, ask in asks.items()), used
    )
