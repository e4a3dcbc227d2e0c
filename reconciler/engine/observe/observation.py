"""What the scheduler reports in a pass, over which window, and what runs must fit.

A pass reads recon.yaml (which scheduler, where the state is) and the journal first,
then asks the scheduler (squeue, sacct, sinfo) in a thread while the spec files load
(``load_while_observing``): on a cluster the answers take about as long as loading
10,000 runs. The journal is read before the observation starts, never after: a job
submitted in between then shows as a journalled job not seen yet, which the planner
waits for, instead of an unknown job.
"""

from __future__ import annotations

from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta

from reconciler.desired.desired import Desired
from reconciler.desired.loader import load_desired
from reconciler.desired.source import SpecSource
from reconciler.engine.observe.journal import JournalState
from reconciler.engine.plan.assemble import check_targets
from reconciler.engine.plan.fit import Fit, FitChecker, MachineFit
from reconciler.errors import ObservationError
from reconciler.scheduler.base import (
    JOURNAL_CLOCK_MARGIN,
    Observation,
    Scheduler,
    StepScheduler,
)
from reconciler.scheduler.partitions import Partition
from reconciler.scheduler.select import Choice, select_scheduler
from reconciler.state.paths import state_dir
from reconciler.state.records import SetupRecord, SubmissionRecord, SubmissionStatus

# How far back sacct is asked (``observation_window``): from the oldest job the journal
# still needs to see end, less JOURNAL_CLOCK_MARGIN (scheduler/base.py: the journal's
# stamps are this machine's, sacct's times slurmctld's; it covers too the jobs an apply
# elsewhere records while this pass reads); never more than _MAX_WINDOW back. With no journal (a new
# project, or a lost journal) _NO_JOURNAL_WINDOW back, so recent jobs are found and
# adopted.
_NO_JOURNAL_WINDOW = timedelta(days=2)
_MAX_WINDOW = timedelta(days=30)


@dataclass(frozen=True)
class Observed:
    """What the scheduler reported in one pass: the jobs of the window (all projects',
    cut to this deployment's by ``seen.see``), and the partitions runs must fit."""

    jobs: Observation
    fit: Fit | None
    partitions: tuple[Partition, ...] | None = None  # what fit was made from

    def same_as(self, other: Observed) -> bool:
        """The same jobs and partitions, whenever each was taken."""
        jobs = self.jobs.model_copy(update={"taken_at": other.jobs.taken_at})
        return jobs == other.jobs and self.partitions == other.partitions


def observe(scheduler: Scheduler, journal: JournalState, now: datetime) -> Observed:
    """One squeue and sacct (or the local store) over the journal's window, then one sinfo."""
    found = scheduler.observe(observation_window(journal.records, journal.setups, now))
    partitions = partitions_of(scheduler)
    return Observed(found, fit_for(scheduler, partitions), partitions)


@dataclass(frozen=True)
class Opened:
    """A pass's start: the commit to load and the project's settings, read from
    recon.yaml alone (``where`` holds no runs yet: it tells the state directory, the
    journal and the scheduler, which the observation needs before the specs load)."""

    source: SpecSource
    where: Desired


def load_specs(opened: Opened) -> Desired:
    """The runs, sweeps and allocations at the opened commit (recon.yaml read already)."""
    return load_desired(opened.source, project=opened.where.project)


def load_while_observing(
    opened: Opened,
    scheduler: Scheduler,
    journal: JournalState,
    now: datetime,
    named: Sequence[str] = (),
) -> tuple[Desired, Observed]:
    """The desired state, loaded while the scheduler is asked in a thread.

    The thread ends before this returns or raises: a spec error is told once the
    observation is over (no squeue or sacct is left running), and before any error of
    the observation's, as when the observation came after the load. So is a name in
    ``named`` (the runs the command line names) that is no run of the project: a typo is
    told as such even where the cluster cannot be seen. An error of the observation's
    is raised here as it was raised there.

    The two share nothing: Slurm's observation runs commands and parses their output;
    the local backend's reads its store and may run a dispatch pass, which writes only
    that store, under its own lock. The load writes only the parse cache. Only the
    observation's thread uses the scheduler until it is joined."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="recon-observe") as pool:
        observing = pool.submit(observe, scheduler, journal, now)
        desired = load_specs(opened)  # on an error, leaving `with` waits for the thread
        check_targets(desired, named)
        return desired, observing.result()


def scheduler_for(desired: Desired, choice: Choice | None = None) -> Scheduler:
    project = desired.project.project
    settings = desired.project
    return select_scheduler(
        choice or settings.scheduler, state_dir(desired), project, settings.local.gpus
    )


def observation_window(
    records: Sequence[SubmissionRecord], setups: Sequence[SetupRecord], now: datetime
) -> datetime:
    """Where sacct's window starts: at the oldest job the journal still needs settled.

    sacct -S (and the local backend alike) lists every job that was queued or running at
    any time since the start, so a job submitted after the start is seen, however long
    ago it ended. The jobs recon still needs to see are those whose end the journal has
    not recorded: each was submitted after its record was written (the intent goes in
    before sbatch), so the window starts at the oldest such record. A job the journal
    settled is not read again: its outcome comes from the journal. Settled jobs of 10,000
    runs are then not read, parsed or combined on every pass.

    A record adopted with no intent before it (a lost journal) was written after its job
    was submitted, at an unknown time: while such a job is unsettled the window reaches
    back as far as it goes (30 days). With no records at all, two days back.
    """
    if not records and not setups:
        return now - _NO_JOURNAL_WINDOW
    oldest = [now]
    for record in records:
        if record.final_health is not None or record.status is SubmissionStatus.REFUSED:
            continue
        if record.status is SubmissionStatus.ADOPTED and not record.spec_fields:
            # Found by its tag with no intent of its own (Journal.record_adopted): its job
            # was submitted who knows when.
            oldest.append(now - _MAX_WINDOW)
        else:
            oldest.append(record.created_at)  # an intent (maybe sent), or a job not settled
    oldest += [setup.created_at for setup in setups if setup.final_health is None]
    return max(min(oldest) - JOURNAL_CLOCK_MARGIN, now - _MAX_WINDOW)


def array_size_for(scheduler: Scheduler, desired: Desired) -> int | None:
    """The scheduler's MaxArraySize when the project has sweeps (read once per pass, and
    again by apply from the same scheduler object, which keeps it); None when it has
    none, or when it cannot be read (the plan then does not say how arrays split)."""
    if not desired.sweeps:
        return None
    try:
        return scheduler.max_array_size()
    except ObservationError:
        return None


def partitions_of(scheduler: Scheduler) -> tuple[Partition, ...] | None:
    """The cluster's partitions, read once per pass (one sinfo); None when the shapes
    cannot be read."""
    try:
        return tuple(scheduler.partitions())
    except ObservationError:
        return None


def fit_for(scheduler: Scheduler, partitions: tuple[Partition, ...] | None) -> Fit | None:
    """What runs must fit: the local backend ignores partition names, so only the
    machine's CPUs are checked there. None when the partitions are unknown: a partial
    answer would refuse runs that fit."""
    if partitions is None:
        return None
    return MachineFit.of(partitions) if scheduler.name == "local" else FitChecker(partitions)


def containers_for(scheduler: Scheduler, desired: Desired) -> frozenset[str] | None:
    """What the cluster offers containers in steps (pyxis: the image, and which options),
    asked once per pass and only when an allocation wants a container; None when not
    asked."""
    wanted = any(desired.allocations[name].spec.container for name in desired.allocations)
    if not wanted or not isinstance(scheduler, StepScheduler):
        return None
    return scheduler.containers()
