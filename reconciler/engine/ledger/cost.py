"""What a project's jobs cost, split by how it was spent, and what recon saved. Pure.

Made from the journal's records alone (each job's ``usage``, journalled when it was
settled: ``scheduler/usage``), so it works offline, long after sacct's window; which
spec of each run is current and which runs are sweeps' members are arguments.

How each job is counted (GPU-hours and CPU-hours held, ``JobUsage``):
- a run's batch job: by how it ended. ``current``: the newest success of the run that
  ran its command, at the spec the run has now, and the skipped successes after it;
  ``superseded``: every other success (an older spec or commit, or rerun since);
  ``failed``: failed attempts and the retries that failed (a job that saved its
  checkpoint is none: it counts with the success that resumed from it, or as
  ``running`` while the run resumes); ``cancelled``: torn down,
  pruned, replaced or cancelled while it ran or waited (a job recon cancelled counts
  here whatever its health: a het job torn down after one half failed, say).
- an allocation's job: what it held, split into ``idle`` (held with no step running)
  and ``allocation work`` (the rest: its runs' steps and its setup). A run that ran as
  a step inside it is shown on its run's line, and counted once, in the allocation's.
- queue wait: wall hours from submission to start, summed; no resources are held.
- a job still running: its usage so far, when the cluster was asked (``live``, read
  from the observation: ``running_usage``), ``running`` for a run's job, idle and work
  so far for an allocation's; without it, or while it waits in the queue, it is counted
  once it has ended.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

from reconciler.desired.matrix import sweep_of
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.forecast import HOUR, ran_its_command
from reconciler.engine.plan.sizes import Sizes
from reconciler.scheduler.base import Observation
from reconciler.scheduler.states import Health
from reconciler.scheduler.usage import JobUsage, usage_of, with_shards_valued
from reconciler.state.records import EndingKind, SubmissionRecord


class Spent(StrEnum):
    """How a job's hours were spent: the columns of ``recon cost``."""

    CURRENT = "current"
    SUPERSEDED = "superseded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    IDLE = "idle"  # an allocation held with no step running
    ALLOCATION_WORK = "allocation_work"  # an allocation's held time its steps used
    RUNNING = "running"  # a run's job still running: held so far


@dataclass
class Hours:
    """GPU-hours and CPU-hours held, by how they were spent, and queue wait."""

    gpu: dict[Spent, float] = field(default_factory=dict)
    cpu: dict[Spent, float] = field(default_factory=dict)
    wait_h: float = 0.0
    jobs: int = 0

    def add(self, spent: Spent, gpu_h: float, cpu_h: float) -> None:
        self.gpu[spent] = self.gpu.get(spent, 0.0) + gpu_h
        self.cpu[spent] = self.cpu.get(spent, 0.0) + cpu_h

    def take(self, other: Hours) -> None:
        for spent, hours in other.gpu.items():
            self.gpu[spent] = self.gpu.get(spent, 0.0) + hours
        for spent, hours in other.cpu.items():
            self.cpu[spent] = self.cpu.get(spent, 0.0) + hours
        self.wait_h += other.wait_h
        self.jobs += other.jobs

    @property
    def gpu_h(self) -> float:
        return sum(self.gpu.values())

    @property
    def cpu_h(self) -> float:
        return sum(self.cpu.values())


class Saving(StrEnum):
    SKIPPED = "skipped"  # a rerun whose job skipped its command: inputs unchanged
    IDLE_RELEASE = "idle_release"  # an allocation released after idle_release
    TEARDOWN = "teardown"  # a het component or coupled partner torn down early
    # a run torn down with its coupled partner, held back until the partner runs again
    # and then submitted with it, instead of run again alone
    COUPLED_WAIT = "coupled_wait"


# One line each, said with its number: how the saving is estimated.
SAVING_WORDS: dict[Saving, str] = {
    Saving.SKIPPED: "reruns that skipped their command (inputs unchanged), each valued at "
    "the run's last job that ran it, less what the skipping job held",
    Saving.IDLE_RELEASE: "allocations released after idle_release, each valued at what it "
    "held times the time left to its limit, which Slurm would have kept it for",
    Saving.TEARDOWN: "jobs torn down when a coupled part failed, each valued at what its "
    "components still running held when torn down times the time the run's last success ran "
    "beyond it (none counted without one)",
    Saving.COUPLED_WAIT: "runs torn down with a coupled partner and held back until it ran "
    "again, then submitted with it instead of alone, each valued at what its torn-down job "
    "held times the shorter of the time it was held back (to the next submission of it or a "
    "partner, or to now) and the run's last successful duration (none counted without one)",
}


@dataclass
class Saved:
    gpu_h: float = 0.0
    cpu_h: float = 0.0
    jobs: int = 0


@dataclass
class Ledger:
    """A project's cost, by run, sweep, allocation and commit, and what recon saved."""

    project: Hours = field(default_factory=Hours)
    runs: dict[str, Hours] = field(default_factory=dict)
    # run -> the step id it last ran as, when it ran inside an allocation's job
    in_allocation: dict[str, str] = field(default_factory=dict)
    sweeps: dict[str, Hours] = field(default_factory=dict)
    allocations: dict[str, Hours] = field(default_factory=dict)
    commits: dict[str, Hours] = field(default_factory=dict)  # in order of first job
    saved: dict[Saving, Saved] = field(default_factory=dict)
    unknown: int = 0  # ended jobs with no usage recorded (before recon read it)
    unknown_gone: int = 0  # of those, the ones the scheduler was asked for and had no record of
    running: int = 0  # jobs not ended yet, not counted: counted once they have
    running_counted: int = 0  # jobs not ended yet, counted as held so far (``live``)
    # what the cluster added to the journal (``engine/accounting``), for the report to say
    looked_at: datetime | None = None  # when running jobs were read; None: not asked
    not_reached: str | None = None  # why the cluster was not asked, or did not answer
    backfilled: int = 0  # jobs settled before recon read usage, back-filled just now
    # run -> how long its newest success that ran its command ran (``last_durations``):
    # what `recon cost --format json` exports for plans made without the journal
    last_durations: dict[str, float] = field(default_factory=dict)
    # sizes suggested from what the jobs used (``sizes.suggest``); None: not asked
    sizes: Sizes | None = None
    # GPU shard-hours held but not counted as GPU-hours (the cluster's shards per GPU
    # not known), and why not; 0: none, or counted
    shard_h: float = 0.0
    shards_unvalued: str | None = None


def ledger(
    records: Sequence[SubmissionRecord],
    current_specs: Mapping[str, str],
    *,
    cancel_causes: Mapping[str, str] | None = None,
    since: datetime | None = None,
    commits: Collection[str] | None = None,
    names: Collection[str] = (),
    live: Mapping[str, JobUsage] | None = None,
    partners: Mapping[str, Sequence[str]] | None = None,
    now: datetime | None = None,
    shards_per_gpu: float | None = None,
) -> Ledger:
    """The cost of ``records`` (one project's, oldest first). ``current_specs``: run ->
    its spec hash now (a run not in it left the repo: its successes are superseded).
    ``since``: only jobs submitted then or later; ``commits``: only jobs submitted for
    these commits; ``names``: only these runs and allocations (a sweep's name: its
    members). ``cancel_causes``: job id -> why recon cancelled it (``Cause`` values).
    ``live``: job id -> what each job not ended yet has held so far (``running_usage``);
    None when the cluster was not asked. ``partners``: run -> the runs coupled with it
    (``coupled_with``, both ways), for the coupled wait's saving, which ``now`` ends for
    a partner not run again yet (None: such a wait is not counted). ``shards_per_gpu``:
    the cluster's, so that GPU shards held count in GPU-hours (each 1/shards_per_gpu of a
    GPU); None: they are not, and ``Ledger.shard_h`` says how many were held."""
    causes = cancel_causes or {}
    commits = None if commits is None else set(commits)
    names = set(names)
    current, resuming = _current(records, current_specs)
    usages = {
        record.id: usage
        for record in records
        if record.usage_json is not None and (usage := record.usage) is not None
    }
    book = Ledger()
    if shards_per_gpu is not None:
        usages = {key: with_shards_valued(u, shards_per_gpu) for key, u in usages.items()}
        live = live and {key: with_shards_valued(u, shards_per_gpu) for key, u in live.items()}
    else:
        book.shard_h = sum(usage.shard_s for usage in usages.values()) / HOUR
    last_ran = _last_ran(records, usages)
    submitted: dict[str, list[datetime]] = {}  # made when a coupled wait needs it
    for record in records:
        if not in_scope(record, since, commits, names):
            continue
        if record.job_id is None:
            continue  # only intended, or refused: no job
        if record.final_health is None:
            so_far = None if live is None else live.get(record.job_id)
            if so_far is None:
                book.running += 1
            else:
                book.running_counted += 1
                _book(book, record, _hours(record, so_far, current=False, ended_by_recon=False))
            continue
        usage = usages.get(record.id)
        if usage is None:
            book.unknown += 1
            book.unknown_gone += record.usage_sought
            continue
        if ran_its_command(record):
            book.last_durations[record.name] = usage.elapsed_s  # the newest wins
        cause = causes.get(record.job_id)
        hours = _hours(record, usage, record.id in current, cause is not None)
        if record.id in resuming and cause is None:  # work the run goes on from
            hours = _hours(record, usage, current=False, ended_by_recon=False, resuming=True)
        _book(book, record, hours)
        _save(book, record, usage, cause, last_ran)
        if cause == Cause.PARTNER_FAILED and record.id in last_ran:
            submitted = submitted or _submissions(records)
            names = (record.name, *(partners or {}).get(record.name, ()))
            later = sorted(at for name in names for at in submitted.get(name, ()))
            _held_back(book, usage, last_ran[record.id], later, now)
    return book


def _submissions(records: Sequence[SubmissionRecord]) -> dict[str, list[datetime]]:
    """run -> when each of its jobs was submitted (its intent written)."""
    submitted: dict[str, list[datetime]] = {}
    for record in records:
        if record.job_id is not None:
            submitted.setdefault(record.name, []).append(record.created_at)
    return submitted


def _held_back(
    book: Ledger,
    torn: JobUsage,
    earlier: JobUsage,
    submitted: Sequence[datetime],
    now: datetime | None,
) -> None:
    """A run torn down with its coupled partner waits (blocked) until the partner runs
    again, and is then submitted with it: without that rule it would have been submitted
    again at once, alone, holding what its torn-down job held while the partner stayed
    down. Valued conservatively: for no longer than the run's last success ran."""
    if torn.ended is None or torn.cancelled_gpus is None or torn.cancelled_cpus is None:
        return
    ended = torn.ended
    until = next((at for at in submitted if at > ended), now)
    if until is None:
        return  # the partner is still down and the ledger was not told when now is
    alone = min(max((until - ended).total_seconds(), 0.0), earlier.elapsed_s)
    if torn.time_limit_s is not None:
        alone = min(alone, torn.time_limit_s)
    _saved(book, Saving.COUPLED_WAIT, alone * torn.cancelled_gpus, alone * torn.cancelled_cpus)


def running_usage(
    observation: Observation, records: Iterable[SubmissionRecord]
) -> dict[str, JobUsage]:
    """job id -> what each job of ``records`` that has not ended in the journal has held
    so far, from the rows an observation already holds (sacct's ``ElapsedRaw`` and
    ``AllocTRES`` of a running job): no call of its own. A job sacct has no accounting of
    yet (queued, or started a moment ago) is left out."""
    open_jobs = {
        (record.job_id, record.kind, record.name)
        for record in records
        if record.job_id is not None and record.final_health is None
    }
    found: dict[str, JobUsage] = {}
    for job in observation.jobs:
        if (job.job_id, job.tag.kind, job.tag.name) not in open_jobs:
            continue
        usage = usage_of(job, allocation=job.tag.kind == "alloc")
        if usage is not None and usage.started is not None:
            found[job.job_id] = usage
    return found


def in_scope(
    record: SubmissionRecord,
    since: datetime | None,
    commits: Collection[str] | None,
    names: Collection[str],
) -> bool:
    """Whether ``ledger`` counts the record: submitted ``since`` or for one of
    ``commits``, of one of ``names`` (a sweep's name: its members); None or empty: any."""
    if since is not None and record.created_at < since:
        return False
    if commits is not None and record.commit not in commits:
        return False
    return not names or record.name in names or sweep_of(record.name) in names


def _current(
    records: Sequence[SubmissionRecord], specs: Mapping[str, str]
) -> tuple[set[int], set[int]]:
    """The records whose success is current: per run, the newest success that ran its
    command at the run's spec now, the jobs that saved a checkpoint it resumed from
    (work towards it, not waste), and the skips after it; then the jobs that saved a
    checkpoint the run has not finished from yet (``resuming``)."""
    current: dict[str, list[int]] = {}
    saved: dict[str, list[int]] = {}  # run -> its checkpointed jobs since its last success
    for record in records:
        if record.kind != "run":
            continue
        if record.ending is EndingKind.CHECKPOINTED:
            saved.setdefault(record.name, []).append(record.id)
            continue
        if record.final_health is not Health.SUCCEEDED:
            continue
        resumed = saved.pop(record.name, [])
        if specs.get(record.name) != record.spec_hash:
            current.pop(record.name, None)  # a success of another spec: none current yet
            continue
        if record.skipped and record.name in current:
            current[record.name].append(record.id)
        else:
            current[record.name] = [*resumed, record.id]
    resuming = {record_id for ids in saved.values() for record_id in ids}
    return {record_id for ids in current.values() for record_id in ids}, resuming


def _last_ran(
    records: Iterable[SubmissionRecord], usages: Mapping[int, JobUsage | None]
) -> dict[int, JobUsage]:
    """record id -> the usage of its run's last success before it that ran its command
    (what a skipped or torn-down job is valued at)."""
    last: dict[str, JobUsage] = {}
    before: dict[int, JobUsage] = {}
    for record in records:
        if record.name in last:
            before[record.id] = last[record.name]
        ran = record.final_health is Health.SUCCEEDED and not record.skipped
        if ran and (usage := usages.get(record.id)) is not None:
            last[record.name] = usage
    return before


def _hours(
    record: SubmissionRecord,
    usage: JobUsage,
    current: bool,
    ended_by_recon: bool,
    *,
    resuming: bool = False,
) -> Hours:
    hours = Hours(wait_h=usage.wait_s / HOUR, jobs=1)
    if record.kind == "alloc":
        hours.add(Spent.IDLE, usage.idle_gpu_s / HOUR, usage.idle_cpu_s / HOUR)
        busy_gpu = (usage.gpu_s - usage.idle_gpu_s) / HOUR
        hours.add(Spent.ALLOCATION_WORK, busy_gpu, (usage.cpu_s - usage.idle_cpu_s) / HOUR)
        return hours
    if record.final_health is None or resuming:  # still running (or resuming): held so far
        hours.add(Spent.RUNNING, usage.gpu_s / HOUR, usage.cpu_s / HOUR)
        return hours
    spent = {
        Health.SUCCEEDED: Spent.CURRENT if current else Spent.SUPERSEDED,
        Health.FAILED: Spent.FAILED,
    }.get(record.final_health, Spent.CANCELLED)
    if record.ending is EndingKind.CHECKPOINTED:  # work its run's success went on from
        spent = Spent.CURRENT if current else Spent.SUPERSEDED
    if ended_by_recon and spent is not Spent.CURRENT:
        spent = Spent.CANCELLED  # torn down, pruned or replaced: recon's doing, not the run's
    hours.add(spent, usage.gpu_s / HOUR, usage.cpu_s / HOUR)
    return hours


def _book(book: Ledger, record: SubmissionRecord, hours: Hours) -> None:
    inside = record.job_id is not None and "." in record.job_id  # a step of an allocation
    if record.kind == "alloc":
        book.allocations.setdefault(record.name, Hours()).take(hours)
    else:
        book.runs.setdefault(record.name, Hours()).take(hours)
        if (sweep := sweep_of(record.name)) is not None:
            book.sweeps.setdefault(sweep, Hours()).take(hours)
        if inside:
            book.in_allocation[record.name] = record.job_id or ""
    if inside:
        # held within its allocation's job, which counts it: only its wait is the project's
        book.project.wait_h += hours.wait_h
        book.project.jobs += 1
    else:
        book.project.take(hours)
        book.commits.setdefault(record.commit or "unknown", Hours()).take(hours)


def _save(
    book: Ledger,
    record: SubmissionRecord,
    usage: JobUsage,
    cause: str | None,
    last_ran: Mapping[int, JobUsage],
) -> None:
    earlier = last_ran.get(record.id)
    if record.final_health is Health.SUCCEEDED and record.skipped:
        if earlier is not None:
            _saved(book, Saving.SKIPPED, earlier.gpu_s - usage.gpu_s, earlier.cpu_s - usage.cpu_s)
    elif cause == Cause.IDLE and record.kind == "alloc" and usage.time_limit_s is not None:
        left = max(usage.time_limit_s - usage.elapsed_s, 0.0)
        _saved(book, Saving.IDLE_RELEASE, left * usage.gpus, left * usage.cpus)
    elif cause in (Cause.COMPONENT_FAILED, Cause.PARTNER_FAILED) and earlier is not None:
        if usage.cancelled_gpus is None or usage.cancelled_cpus is None:
            return  # journalled before recon recorded what the cancel freed: not counted
        beyond = max(earlier.elapsed_s - usage.elapsed_s, 0.0)
        if usage.time_limit_s is not None:
            beyond = min(beyond, max(usage.time_limit_s - usage.elapsed_s, 0.0))
        # only what was still held: a component that had failed already freed its own
        _saved(book, Saving.TEARDOWN, beyond * usage.cancelled_gpus, beyond * usage.cancelled_cpus)


def _saved(book: Ledger, kind: Saving, gpu_s: float, cpu_s: float) -> None:
    saved = book.saved.setdefault(kind, Saved())
    saved.gpu_h += max(gpu_s, 0.0) / HOUR
    saved.cpu_h += max(cpu_s, 0.0) / HOUR
    saved.jobs += 1


# -- hours as jobs end: what `recon watch --metrics-addr` counts ---------------------------

# How a job ended, for counters that only grow: a success is not later "superseded" there.
OUTCOMES = ("succeeded", "failed", "cancelled", "alloc_idle", "alloc_work")


def hours_by_outcome(
    kind: str, job_id: str, health: Health, usage: JobUsage
) -> dict[str, tuple[float, float]]:
    """outcome -> (GPU-hours, CPU-hours) of one job that ended ``health``. A run that ran
    as a step of an allocation (``12.3``) counts nothing: its allocation's job holds it."""
    if kind == "alloc":
        return {
            "alloc_idle": (usage.idle_gpu_s / HOUR, usage.idle_cpu_s / HOUR),
            "alloc_work": (
                (usage.gpu_s - usage.idle_gpu_s) / HOUR,
                (usage.cpu_s - usage.idle_cpu_s) / HOUR,
            ),
        }
    if "." in job_id:
        return {}
    outcome = {Health.SUCCEEDED: "succeeded", Health.FAILED: "failed"}.get(health, "cancelled")
    return {outcome: (usage.gpu_s / HOUR, usage.cpu_s / HOUR)}
