"""Sizes suggested from what the jobs used: memory, time and CPUs per run and sweep. Pure.

Made from the journal's records alone (each job's ``usage``: what it held, its peak
memory and CPU time, ``scheduler/usage``), as the cost ledger is; it reads no spec and
never edits one. The rule, one for every resource (docs/cost.md says it with examples):

- the jobs: a run's last ``LAST`` successes that ran their command (a rerun that skipped
  it used nothing) and whose usage holds what they used; a sweep pools its members'. No
  suggestion from fewer than ``FEWEST`` (one job's needs are an anecdote);
- needed: the most any of them used: peak memory (the largest step's MaxRSS), elapsed
  time, and busy CPUs (CPU time over elapsed time, the average number of CPUs kept busy);
- suggested: needed times ``MARGIN`` (1.5: half as much again), rounded up to a step
  (memory to 128 MiB, time to a whole minute, CPUs to a whole CPU), at least one step;
- against what the newest of those jobs held (``AllocTRES``: memory per node, CPUs over
  all nodes) and its time limit: ``lower`` when the suggestion is below it, ``raise`` when
  a job used more than it held (nothing enforced the limit), ``keep`` otherwise; memory
  a job held none of (the local backend books none) is compared with ``asked_memory``,
  the spec's, when given.

What asking so would have saved, over the same jobs, each figure for what it is:
- CPU-hours and memory GiB-hours held beyond the suggestion: what was held less what
  would have been, times each job's elapsed time (lowered resources only);
- GPU-hours reserved beyond the suggested time limit: each job's GPUs times its limit
  less the suggested one. The scheduler plans by limits: those hours were promised to the
  job and could not be planned for others' jobs (backfill), though the GPUs idled once
  it ended;
- queue wait: the wait those jobs had. A smaller request starts no later and often
  sooner under backfill, but by how much the cluster's queue decides: the figure is what
  is at stake, not an estimate.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from reconciler.desired.matrix import sweep_of
from reconciler.scheduler.states import Health
from reconciler.scheduler.usage import JobUsage
from reconciler.state.records import SubmissionRecord

LAST = 5  # successes a suggestion is made from, the newest
FEWEST = 3  # no suggestion from fewer
MARGIN = 1.5  # suggested: the most used times this
MEMORY_STEP_MB = 128.0  # memory is suggested in steps of this
TIME_STEP_S = 60.0  # time limits are whole minutes in Slurm
HOUR = 3600.0


class Change(StrEnum):
    """What a suggestion says of what the jobs held."""

    LOWER = "lower"  # the suggestion is below what they held
    RAISE = "raise"  # a job used more than it held (nothing enforced the limit)
    KEEP = "keep"  # the suggestion is at or above what they held, none used more


@dataclass(frozen=True)
class Suggested:
    """One resource: what the jobs held, the most they used, and the suggestion. Units:
    memory MiB per node, time seconds, CPUs over all nodes. ``held`` None: unknown (no
    time limit, or memory no one booked)."""

    held: float | None
    needed: float
    suggested: float

    @property
    def change(self) -> Change:
        if self.held is None or self.suggested == self.held:
            return Change.KEEP
        if self.needed > self.held:
            return Change.RAISE
        return Change.LOWER if self.suggested < self.held else Change.KEEP


@dataclass(frozen=True)
class Suggestion:
    """The sizes suggested for one run or sweep, and what asking so would have saved."""

    name: str
    jobs: int  # the successes it is made from
    memory: Suggested
    time: Suggested
    cpus: Suggested
    saved_cpu_h: float  # CPU-hours held beyond the suggestion
    saved_memory_gib_h: float  # memory GiB-hours held beyond it (per node)
    reserved_gpu_h: float  # GPU-hours reserved by time limits beyond the suggested one
    wait_h: float  # the queue wait those jobs had: what a smaller request puts at stake


@dataclass(frozen=True)
class Sizes:
    """Suggestions for runs (outside sweeps) and sweeps, by name; ``too_few``: runs and
    sweeps with some measured successes, fewer than ``FEWEST``."""

    runs: dict[str, Suggestion]
    sweeps: dict[str, Suggestion]
    too_few: tuple[str, ...] = ()

    @property
    def any(self) -> bool:
        return bool(self.runs or self.sweeps or self.too_few)


def suggest(
    records: Iterable[SubmissionRecord],
    *,
    names: Collection[str] = (),
    asked_memory: Mapping[str, float] | None = None,
) -> Sizes:
    """Sizes for every run and sweep of ``records`` (one project's, oldest first) with
    enough measured successes; ``names``: only these runs and sweeps. ``asked_memory``:
    run -> the memory per node (MiB) its spec asks now, for jobs that held none."""
    chosen = set(names)
    jobs: dict[str, list[JobUsage]] = {}  # run -> its measured successes, newest last
    for record in records:
        usage = _measured(record)
        if usage is not None and (not chosen or {record.name, sweep_of(record.name)} & chosen):
            jobs.setdefault(record.name, []).append(usage)
    asked = asked_memory or {}
    runs: dict[str, Suggestion] = {}
    pooled: dict[str, list[tuple[JobUsage, float | None]]] = {}
    for name, used in jobs.items():
        last = [(usage, asked.get(name)) for usage in used[-LAST:]]
        if (sweep := sweep_of(name)) is not None:
            pooled.setdefault(sweep, []).extend(last)
        elif len(last) >= FEWEST:
            runs[name] = _suggestion(name, last)
    sweeps = {name: _suggestion(name, last) for name, last in pooled.items() if len(last) >= FEWEST}
    few = {sweep_of(name) or name for name in jobs} - set(runs) - set(sweeps)
    return Sizes(dict(sorted(runs.items())), dict(sorted(sweeps.items())), tuple(sorted(few)))


def _measured(record: SubmissionRecord) -> JobUsage | None:
    """The usage of a run's success that ran its command and whose peak memory and CPU
    time were measured; None for any other record."""
    if (
        record.kind != "run"
        or record.final_health is not Health.SUCCEEDED
        or record.skipped
        or record.usage_json is None
    ):
        return None
    usage = record.usage
    if usage is None or usage.peak_memory_mb is None or usage.cpu_time_s is None:
        return None
    return usage


def _suggestion(name: str, jobs: Sequence[tuple[JobUsage, float | None]]) -> Suggestion:
    newest, spec_memory = jobs[-1]
    memory = _suggested(
        newest.node_memory_mb or spec_memory,
        max(usage.peak_memory_mb or 0.0 for usage, _ in jobs),
        MEMORY_STEP_MB,
    )
    time = _suggested(newest.time_limit_s, max(usage.elapsed_s for usage, _ in jobs), TIME_STEP_S)
    cpus = _suggested(float(newest.cpus) or None, max(_busy(usage) for usage, _ in jobs), 1.0)
    saved_cpu = saved_memory = reserved = 0.0
    for usage, asked in jobs:
        held_memory = usage.node_memory_mb or asked
        if memory.change is Change.LOWER and held_memory:
            saved_memory += max(held_memory - memory.suggested, 0.0) / 1024 * usage.elapsed_s
        if cpus.change is Change.LOWER:
            saved_cpu += max(usage.cpus - cpus.suggested, 0.0) * usage.elapsed_s
        if time.change is Change.LOWER and usage.time_limit_s is not None:
            reserved += usage.gpus * max(usage.time_limit_s - time.suggested, 0.0)
    return Suggestion(
        name=name,
        jobs=len(jobs),
        memory=memory,
        time=time,
        cpus=cpus,
        saved_cpu_h=saved_cpu / HOUR,
        saved_memory_gib_h=saved_memory / HOUR,
        reserved_gpu_h=reserved / HOUR,
        wait_h=sum(usage.wait_s for usage, _ in jobs) / HOUR,
    )


def _suggested(held: float | None, needed: float, step: float) -> Suggested:
    """``needed`` times the margin, rounded up to ``step``, at least one step."""
    # round() first: 1.5 x 1024 MiB is 1536 exactly, not one float step above it
    steps = math.ceil(round(needed * MARGIN / step, 9))
    return Suggested(held, needed, max(steps, 1) * step)


def _busy(usage: JobUsage) -> float:
    """The CPUs it kept busy on average: its CPU time over its elapsed time."""
    return (usage.cpu_time_s or 0.0) / usage.elapsed_s if usage.elapsed_s else 0.0
