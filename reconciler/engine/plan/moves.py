"""Runs renamed in a commit (`renamed_from`): which records, jobs and folders a plan moves.

Terraform's `moved` blocks, for runs. A run that says `renamed_from: old` is the old
run, under a new name, when its spec is otherwise unchanged: the hash it would have
under the old name (``desired.former_identity``: the old name, the old default folder,
inputs naming renamed runs by their old names) is the hash of the old name's records or
jobs. Then the move carries them over, with no job: the journal's records and a live job
of the old name are the new name's (``state.records.Renames``), and the old run's
folder becomes the new one's. A run that reads a renamed run's output moves too, to its
new hash (its input names the new run), keeping its name. A spec changed besides the
name moves nothing: the run is new, as without `renamed_from`.

Pure: what the journal and the scheduler said come in as values; nothing here looks at
the disk (the applier renames the folder, and refuses when the new one exists).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from reconciler.desired.desired import Desired, former_identity, run_workdir
from reconciler.engine.plan.actions import Action, ActionKind, Cause, Move, SyncStatus
from reconciler.scheduler.base import ObservedJob
from reconciler.state.records import Rename, Renames, SubmissionRecord


def pending(
    desired: Desired, records: Sequence[SubmissionRecord], jobs: Iterable[ObservedJob]
) -> tuple[Move, ...]:
    """The moves the journal and the scheduler have not seen made: a run whose former
    identity differs from its own, with records or jobs under that former identity.
    Once made, the records read under the new name and nothing is pending: idempotent."""
    if not desired.renamed:
        return ()
    known = {(r.name, r.spec_hash) for r in records if r.kind == "run"}
    live: dict[tuple[str, str], list[str]] = {}
    for job in jobs:
        if job.tag.kind != "run":
            continue
        known.add((job.tag.name, job.tag.spec_hash))
        if not job.finished:
            live.setdefault((job.tag.name, job.tag.spec_hash), []).append(job.job_id)
    runs_dir = desired.project.runs_dir
    moves = []
    for name in desired.runs:
        former = former_identity(desired, name)
        run = desired.runs[name]
        if former is None or former == (name, run.spec_hash) or former not in known:
            continue
        old, old_hash = former
        old_dir = new_dir = None
        if old != name and run.workdir == run_workdir(None, runs_dir, name):
            old_dir, new_dir = run_workdir(None, runs_dir, old), run.workdir
        moves.append(
            Move(
                old=old,
                old_hash=old_hash,
                new=name,
                new_hash=run.spec_hash,
                old_dir=old_dir,
                new_dir=new_dir,
                live_jobs=tuple(live.get(former, ())),
            )
        )
    return tuple(moves)


def renames_of(done: Iterable[Rename], moves: Iterable[Move]) -> Renames:
    """The renames the journal holds, and those the plan makes, in that order."""
    return Renames([*done, *(rename_of(move) for move in moves)])


def rename_of(move: Move) -> Rename:
    return Rename("run", move.old, move.old_hash, move.new, move.new_hash)


def actions(moves: Iterable[Move]) -> list[Action]:
    """A `moved` action for each run renamed: `old -> new`, no job."""
    return [
        Action(
            kind=ActionKind.MOVED,
            target=move.new,
            cause=Cause.RENAMED,
            reason=f"{move.old} -> {move.new}: records, outputs and manifest carried over"
            + (f", job {', '.join(move.live_jobs)} adopted" if move.live_jobs else "")
            + ", no job",
            spec_hash=move.new_hash,
            job_ids=move.live_jobs,
            details=(f"folder {move.old_dir} -> {move.new_dir}",) if move.old_dir else (),
            sync=SyncStatus.CURRENT,
        )
        for move in moves
        if move.renamed
    ]
