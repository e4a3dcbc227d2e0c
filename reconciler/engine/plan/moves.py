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

import posixpath
from collections.abc import Iterable, Mapping, Sequence

from reconciler.desired.desired import Desired, former_allocation, former_identity, run_workdir
from reconciler.engine.plan.actions import Action, ActionKind, Move
from reconciler.engine.plan.causes import Cause
from reconciler.scheduler.base import ObservedJob
from reconciler.state.records import Rename, Renames, SubmissionRecord, gathered_digest


def pending(
    desired: Desired, records: Sequence[SubmissionRecord], jobs: Iterable[ObservedJob]
) -> tuple[Move, ...]:
    """The moves the journal and the scheduler have not seen made: a run whose former
    identity differs from its own, with records or jobs under that former identity.
    Once made, the records read under the new name and nothing is pending: idempotent."""
    if not desired.renamed:
        return ()
    known = {(r.kind, r.name, r.spec_hash) for r in records}
    live: dict[tuple[str, str, str], list[str]] = {}
    for job in jobs:
        key = (job.tag.kind, job.tag.name, job.tag.spec_hash)
        known.add(key)
        if not job.finished:
            live.setdefault(key, []).append(job.job_id)
    runs_dir = desired.project.runs_dir
    moves = []
    for name in desired.runs:
        former = former_identity(desired, name)
        run = desired.runs[name]
        if former is None or former == (name, run.spec_hash) or ("run", *former) not in known:
            continue
        old, old_hash = former
        folders: dict[str, str] = {}
        document = run.member.sweep if run.member is not None else name
        default = run_workdir(None, runs_dir, document)
        if old != name and (run.workdir == default or run.workdir.startswith(default + "/")):
            before = run_workdir(None, runs_dir, desired.renamed[document])
            folders = {
                "old_dir": before,
                "new_dir": default,
                "old_run_dir": before + run.workdir[len(default) :],
                "new_run_dir": run.workdir,
            }
        moves.append(
            Move(
                old=old,
                old_hash=old_hash,
                new=name,
                new_hash=run.spec_hash,
                live_jobs=tuple(live.get(("run", *former), ())),
                **folders,
            )
        )
    for name, allocation in ((n, desired.allocations[n]) for n in desired.allocations):
        held = former_allocation(desired, name)
        if held is None or ("alloc", *held) not in known:
            continue
        moves.append(
            Move(
                kind="alloc",
                old=held[0],
                old_hash=held[1],
                new=name,
                new_hash=allocation.spec_hash,
                live_jobs=tuple(live.get(("alloc", *held), ())),
            )
        )
    return tuple(moves)


def moved_folders(desired: Desired) -> dict[str, str]:
    """The folder of each run or sweep renamed whose folder is named after it: its old
    folder -> its new one, both absolute. A job array of a sweep renamed runs in the old
    one, where its map is looked for first (``observe/arrays.read_maps``)."""
    runs_dir = desired.project.runs_dir
    folders = {}
    for new, old in desired.renamed.items():
        if new in desired.allocations:
            continue  # an allocation has no folder
        sweep = desired.sweeps.get(new)
        one = desired.runs[sweep.members[0] if sweep is not None else new]
        default = run_workdir(None, runs_dir, new)
        if one.workdir != default and not one.workdir.startswith(default + "/"):
            continue  # its own `workdir:`, which stays
        before = posixpath.join(desired.root, run_workdir(None, runs_dir, old))
        after = posixpath.join(desired.root, default)
        folders[posixpath.normpath(before)] = posixpath.normpath(after)
    return folders


def renames_of(done: Iterable[Rename], moves: Iterable[Move]) -> Renames:
    """The renames the journal holds, and those the plan makes, in that order."""
    return Renames([*done, *(rename_of(move) for move in moves)])


def rename_of(move: Move) -> Rename:
    return Rename(move.kind, move.old, move.old_hash, move.new, move.new_hash, move.inputs)


def with_gathered(
    desired: Desired, moves: Sequence[Move], outputs: Mapping[tuple[str, str], str | None]
) -> tuple[Move, ...]:
    """``moves`` with the versions carried of what each run gathers from a renamed sweep
    (``Move.inputs``): the digest of the members' outputs (``outputs``: the pass's
    ``FileState``) under their old names, and under their new ones."""
    renamed = desired.renamed
    found = []
    for move in moves:
        if move.kind != "run":
            found.append(move)
            continue
        run = desired.runs[move.new]
        carried = []
        for name, members in run.gathers.items():
            upstream = run.inputs[name].upstream
            sweep = members[0].partition("[")[0] if members else None
            if upstream is None or sweep not in renamed:
                continue
            assert sweep is not None
            digests = {m: outputs.get((m, upstream[1])) for m in members}
            before = {renamed[sweep] + m[len(sweep) :]: d for m, d in digests.items()}
            old, new = gathered_digest(before), gathered_digest(digests)
            if old != new:
                carried.append((name, old, new))
        found.append(move.model_copy(update={"inputs": tuple(carried)}) if carried else move)
    return tuple(found)


def carried_inputs(moves: Iterable[Move]) -> Renames:
    """The input versions ``moves`` carry, for records already under their new names."""
    return Renames(
        Rename(m.kind, m.new, m.new_hash, m.new, m.new_hash, m.inputs) for m in moves if m.inputs
    )


def actions(moves: Iterable[Move]) -> list[Action]:
    """A `moved` action for each run or allocation renamed: `old -> new`, no job."""
    return [
        Action(
            kind=ActionKind.MOVED,
            target=move.new,
            target_kind=move.kind,
            cause=Cause.RENAMED,
            reason=_reason(move),
            spec_hash=move.new_hash,
            job_ids=move.live_jobs,
            details=(f"folder {move.old_dir} -> {move.new_dir}",) if move.old_dir else (),
        )
        for move in moves
        if move.renamed
    ]


def _reason(move: Move) -> str:
    if move.kind == "alloc":
        return f"{move.old} -> {move.new}: records and setups carried over" + (
            "; its held job adopted, not released" if move.live_jobs else ""
        )
    # a sweep's members said once: `seeds -> trials`, with the members counted
    return (
        f"{_document(move.old)} -> {_document(move.new)}: records, outputs and manifest "
        "carried over, no job" + ("; its live job adopted, not cancelled" if move.live_jobs else "")
    )


def _document(name: str) -> str:
    """A run's name, or a member's sweep's: `seeds` of `seeds[seed=0]`."""
    return name.partition("[")[0]
