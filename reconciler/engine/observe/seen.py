"""The world at a pass: observed, judged and gathered for the planner (``see``).

What `recon plan`, `recon status`, `recon apply` and `recon watch` plan is made here, the
same way for each: the observation cut to this deployment's jobs, the same judgement of
finished jobs (engine/observe/endings.py), the same files and code versions. Reads only:
what writes (apply's roll-back of half-published outputs) is handed in by the caller.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from reconciler.desired.desired import Desired
from reconciler.engine.observe import endings as judging
from reconciler.engine.observe.arrays import read_maps
from reconciler.engine.observe.endings import Ending
from reconciler.engine.observe.files import code_at, file_state
from reconciler.engine.observe.journal import JournalState
from reconciler.engine.observe.observation import (
    Observed,
    array_size_for,
    containers_for,
    observe,
)
from reconciler.engine.plan import moves as plan_moves
from reconciler.engine.plan.actions import Move
from reconciler.engine.plan.identity import split_by_owner
from reconciler.engine.plan.world import World
from reconciler.scheduler.base import Observation, Scheduler
from reconciler.state.outputs import OutputsSeen
from reconciler.state.paths import deployment
from reconciler.state.records import Renames, SetupRecord, SubmissionRecord

# What an apply's pass writes before it judges: the publishing that ended jobs left half
# done, rolled back (engine/apply/settle.roll_back_publishing)
RollBack = Callable[[Desired, Observation, Sequence[SubmissionRecord]], object]


@dataclass(frozen=True)
class Seen:
    """The world the planner plans, and beside it what judging it found: the endings and
    setup changes apply records (``world.records`` and ``world.setups`` read as they will
    once recorded), the scheduler's whole answer (every deployment's jobs, the
    partitions, which a watch compares the next pass's with: engine/steady.py), and the
    renames the jobs were told apart by (the journal's and the pending moves')."""

    world: World
    endings: Sequence[Ending]
    setup_changes: Sequence[SetupRecord]
    observed: Observed
    renames: Renames


def see(
    desired: Desired,
    scheduler: Scheduler,
    journal: JournalState,
    now: datetime,
    observed: Observed | None = None,
    *,
    roll_back: RollBack | None = None,
) -> Seen:
    """Observe the cluster (unless ``observed`` already) and the filesystem, and judge
    finished jobs. Reads only; ``roll_back`` (apply's passes) is called with this
    deployment's jobs before anything is judged."""
    observed = observed or observe(scheduler, journal, now)
    found = observed.jobs
    project, place = desired.project.project, deployment(desired)
    maps = read_maps(found, project, place, plan_moves.moved_folders(desired))
    done = plan_moves.renames_of(journal.renames, ())
    moves: tuple[Move, ...] = ()
    if desired.renamed:  # runs renamed: the moves not made yet, judged on what is known
        known = split_by_owner(found, project, place, journal.records, maps, done)
        moves = plan_moves.pending(desired, journal.records, known.own.jobs)
    renames = plan_moves.renames_of(journal.renames, moves)
    journalled = renames.records(journal.records) if moves else journal.records
    journal_setups = renames.setups(journal.setups) if moves else journal.setups
    share = split_by_owner(found, project, place, journalled, maps, renames)
    if roll_back is not None:
        roll_back(desired, share.own, journalled)
    outputs_seen: OutputsSeen = {}  # each output looked at once in this pass
    # A job of a run whose folder has not moved yet is judged once it has: its outputs
    # are still under the old name (a pass cut short after the rename finds them moved).
    moving = {
        move.new: move.old_run_dir
        for move in moves
        if move.old_run_dir is not None and os.path.lexists(desired.root / move.old_run_dir)
    }
    judged = _without_runs(share.own, moving) if moving else share.own
    endings = judging.judge(desired, judged, journalled, outputs_seen)
    records = judging.as_recorded(journalled, endings)
    setup_changes = judging.judge_setups(share.own, journal_setups)
    setups = judging.with_setups(journal_setups, setup_changes)
    files = file_state(desired, records, share.own, outputs_seen, moving)
    if moves:  # a run gathering a renamed sweep: the version it read, under the new names
        moves = plan_moves.with_gathered(desired, moves, files.outputs)
        records = plan_moves.carried_inputs(moves).records(records)
    world = World(
        desired=desired,
        observation=share.own,
        records=records,
        now=now,
        scheduler=scheduler.name,
        elsewhere=share.elsewhere,
        setups=setups,
        files=files,
        fit=observed.fit,
        containers=containers_for(scheduler, desired),
        max_array_size=array_size_for(scheduler, desired),
        code_at=code_at(desired, records),
        cancelled=journal.cancelled,
        moves=moves,
    )
    return Seen(world, endings, setup_changes, observed, renames)


def _without_runs(observation: Observation, runs: Mapping[str, object]) -> Observation:
    jobs = tuple(job for job in observation.jobs if job.tag.name not in runs)
    return observation.model_copy(update={"jobs": jobs})
