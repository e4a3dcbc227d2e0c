"""What one job held, and for how long, from the scheduler's own records. Pure.

A job's usage is read from the rows a pass already has (sacct's ``ElapsedRaw``,
``TimelimitRaw``, ``AllocTRES``, ``Submit``, ``Start``, ``End``; the local backend's own
records): no call of its own. Settling writes it into the job's journal record once the
job has ended, so ``recon cost`` reads the journal alone, long after sacct's window.

How the figures are made, for every kind of job alike:
- held: each component (a het component, an array task, the job itself; a run that ran
  as a step of an allocation: its step) holds its ``AllocTRES`` for its ``ElapsedRaw``;
  GPU-seconds and CPU-seconds are the sums over components of count times seconds, a
  MIG slice counted at its share of a GPU (``Held.gpu_equivalents``); GPU shards are
  summed apart, as shard-seconds.
- queue wait: from submission to start (or to the end, for a job that never started),
  the longest of its components': wall time, no resources held.
- idle (allocations only): the time the allocation was held with no step of its own
  running (Slurm's ``batch``, ``extern`` and ``interactive`` steps are not work), times
  what it held.
- held when cancelled: what the components that ended ``CANCELLED`` held (a cancel ends
  every component still running; one that had failed or completed before keeps its own
  state), so a teardown's saving counts what the cancel freed, not what had ended already.
- a job still running: the same figures so far (``ElapsedRaw`` as sacct printed it), an
  allocation's idle time up to then; ``ended`` stays None.
- what it used, for right-sizing (``engine/plan/sizes``): its peak memory, the most any
  one of its steps held (sacct's ``MaxRSS``: the largest task's, per node as ``--mem``
  asks), and its CPU time, user and system (``TotalCPU``), each component's the larger of
  its own row's and its steps' sum (Slurm fills the job's row from its steps, the local
  backend the job's alone). Both are None where nothing measured them: with no
  accounting gatherer (``JobAcctGatherType=jobacct_gather/none``) sacct prints no MaxRSS
  on any row and a TotalCPU of 00:00:00 whatever ran, so a job none of whose rows has a
  MaxRSS has neither.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any

from reconciler.scheduler.base import OWN_STEPS, JobRecord, ObservedJob
from reconciler.scheduler.states import Health


@dataclass(frozen=True, slots=True, kw_only=True)
class JobUsage:
    """What one job held and waited, in seconds; the journal keeps it as JSON."""

    submitted: datetime | None = None
    started: datetime | None = None
    ended: datetime | None = None
    elapsed_s: float = 0.0  # wall time the longest of its components ran
    wait_s: float = 0.0  # queue wait, wall time
    gpus: int = 0  # held at once, summed over its components
    cpus: int = 0
    gpu_s: float = 0.0  # GPU-seconds held (a MIG slice: its share of a GPU, docs/cost.md)
    shard_s: float = 0.0  # GPU-shard-seconds held (gres/shard), not in gpu_s
    cpu_s: float = 0.0
    idle_s: float = 0.0  # an allocation's time held with no step running
    idle_gpu_s: float = 0.0
    idle_cpu_s: float = 0.0
    time_limit_s: float | None = None  # the job's own limit, when it has one
    # GPUs and CPUs of the components that ended cancelled (still held when cancelled);
    # None on usage journalled before recon recorded it
    cancelled_gpus: int | None = None
    cancelled_cpus: int | None = None
    # What it used (right-sizing): the memory it held on one node (``--mem``; the largest
    # component's), its peak (the largest step's MaxRSS) and its CPU time; None on usage
    # journalled before recon read them, and where nothing measured them (see the
    # module's docstring)
    node_memory_mb: float | None = None
    peak_memory_mb: float | None = None
    cpu_time_s: float | None = None

    def to_json(self) -> dict[str, Any]:
        # Field by field, not dataclasses.asdict: that deep-copies every value, and a pass
        # that settles 10,000 jobs spent 1.5 s in it (every field here is a number or None)
        data = {key: getattr(self, key) for key in _FIELDS}
        for key in _TIMES:
            data[key] = None if data[key] is None else data[key].isoformat()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> JobUsage:
        """What ``to_json`` wrote (the journal reads 30,000 of them for `recon cost`)."""
        values = dict(data)
        for key in _TIMES:
            if (text := values.get(key)) is not None:
                values[key] = datetime.fromisoformat(text)
        return cls(**values)


_TIMES = ("submitted", "started", "ended")
_FIELDS = tuple(field.name for field in fields(JobUsage))


def with_shards_valued(usage: JobUsage, shards_per_gpu: float) -> JobUsage:
    """``usage`` with its GPU shards counted in its GPU-seconds, each at 1/shards_per_gpu
    of a GPU (docs/cost.md), idle ones in its idle GPU-seconds alike."""
    if not usage.shard_s:
        return usage
    gpu_s = usage.shard_s / shards_per_gpu
    idle = usage.idle_s / usage.elapsed_s if usage.elapsed_s else 0.0
    return replace(
        usage,
        gpu_s=usage.gpu_s + gpu_s,
        idle_gpu_s=usage.idle_gpu_s + gpu_s * idle,
        shard_s=0.0,
    )


def usage_of(job: ObservedJob, *, allocation: bool = False) -> JobUsage | None:
    """What ``job`` held, from its rows; None when no row says it (a scheduler that
    reports no accounting, or rows from before recon read it). ``allocation``: the job
    is an allocation's, whose time with no step running is idle."""
    parts = job.components or job.rows  # a run inside an allocation is its step's row
    if all(row.held is None and row.elapsed is None for row in parts):
        return None
    cancelled = [row for row in parts if row.health is Health.CANCELLED]
    elapsed = [_elapsed(row) for row in parts]
    peak, cpu_time = _used(job, parts)
    gpus = sum(row.held.gpus for row in parts if row.held is not None)
    cpus = sum(row.held.cpus for row in parts if row.held is not None)
    gpu_s = sum(
        s * row.held.gpu_equivalents for s, row in zip(elapsed, parts, strict=True) if row.held
    )
    shard_s = sum(s * row.held.shards for s, row in zip(elapsed, parts, strict=True) if row.held)
    cpu_s = sum(s * row.held.cpus for s, row in zip(elapsed, parts, strict=True) if row.held)
    usage = JobUsage(
        submitted=min((row.submit for row in parts if row.submit), default=None),
        started=min((row.start for row in parts if row.start), default=None),
        ended=max((row.end for row in parts if row.end), default=None),
        elapsed_s=max(elapsed, default=0.0),
        wait_s=max((_wait(row) for row in parts), default=0.0),
        gpus=gpus,
        cpus=cpus,
        gpu_s=gpu_s,
        cpu_s=cpu_s,
        shard_s=shard_s,
        time_limit_s=max(
            (row.time_limit.total_seconds() for row in parts if row.time_limit), default=None
        ),
        cancelled_gpus=sum(row.held.gpus for row in cancelled if row.held is not None),
        cancelled_cpus=sum(row.held.cpus for row in cancelled if row.held is not None),
        node_memory_mb=max(
            (row.held.memory_mb / max(row.held.nodes, 1) for row in parts if row.held),
            default=None,
        ),
        peak_memory_mb=peak,
        cpu_time_s=cpu_time,
    )
    if not allocation or usage.started is None:
        return usage
    # a running allocation: idle up to the moment its ElapsedRaw was read
    until = usage.ended or usage.started + timedelta(seconds=usage.elapsed_s)
    work = [row for row in job.steps if row.step not in OWN_STEPS]
    idle = max(usage.elapsed_s - _busy(work, usage.started, until), 0.0)
    share = idle / usage.elapsed_s if usage.elapsed_s else 0.0
    return JobUsage(
        **{
            **{key: getattr(usage, key) for key in JobUsage.__dataclass_fields__},
            "idle_s": idle,
            "idle_gpu_s": usage.gpu_s * share,
            "idle_cpu_s": usage.cpu_s * share,
        }
    )


def _used(job: ObservedJob, parts: tuple[JobRecord, ...]) -> tuple[float | None, float | None]:
    """Peak memory (MiB) and CPU time (seconds), None where nothing measured them."""
    rows = job.rows if job.components else parts
    peaks = [row.peak_memory_mb for row in rows if row.peak_memory_mb is not None]
    if not peaks:
        return None, None
    steps: dict[str, float] = {}  # each component's steps' CPU time, summed
    for row in job.steps:
        if row.cpu_time is not None:
            owner = row.job_id.partition(".")[0]
            steps[owner] = steps.get(owner, 0.0) + row.cpu_time.total_seconds()
    cpu = 0.0
    for row in parts:
        own = row.cpu_time.total_seconds() if row.cpu_time is not None else 0.0
        cpu += max(own, steps.get(row.job_id, 0.0))
    return max(peaks), cpu


def _elapsed(row: JobRecord) -> float:
    if row.elapsed is not None:
        return row.elapsed.total_seconds()
    if row.start is not None and row.end is not None:
        return max((row.end - row.start).total_seconds(), 0.0)
    return 0.0


def _wait(row: JobRecord) -> float:
    until = row.start or row.end
    if row.submit is None or until is None:
        return 0.0
    return max((until - row.submit).total_seconds(), 0.0)


def _busy(steps: Iterable[JobRecord], start: datetime, end: datetime) -> float:
    """Seconds in [start, end] with at least one of ``steps`` running (their union)."""
    spans = sorted(
        (max(row.start, start), min(row.end or end, end)) for row in steps if row.start is not None
    )
    busy, reach = timedelta(), start
    for begin, finish in spans:
        begin = max(begin, reach)
        if finish > begin:
            busy += finish - begin
            reach = finish
    return busy.total_seconds()
