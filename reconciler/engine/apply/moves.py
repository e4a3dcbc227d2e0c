"""A plan's moves carried out: runs, sweeps and allocations renamed (``renamed_from``)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from reconciler.desired.desired import Desired
from reconciler.engine.apply.faults import fault_point
from reconciler.engine.plan.actions import Move, Plan
from reconciler.engine.plan.moves import rename_of
from reconciler.state.journal import Journal
from reconciler.state.moving import move_folder, move_manifest


def move_runs(
    plan: Plan, desired: Desired, journal: Journal, clock: Callable[[], datetime]
) -> list[Move]:
    """The plan's moves, before anything else: each renamed run's folder renamed
    (``state/moving``), its manifest under the new name, then every move journalled in
    one transaction. A folder that cannot be moved stops the apply before any job is
    submitted or cancelled. The moves that renamed something are returned."""
    if not plan.moves:
        return []
    root = desired.root.resolve()
    linked = {move.old_dir for move in plan.moves if move.live_jobs}
    for move in plan.moves:
        if move.old_dir is None or move.new_dir is None:
            continue
        # a sweep's folder is moved with its first member, found moved by the rest
        move_folder(root, move.old_dir, move.new_dir, link=move.old_dir in linked)
        assert move.old_run_dir is not None and move.new_run_dir is not None
        new_run_dir, old_run_dir = root / move.new_run_dir, root / move.old_run_dir
        move_manifest(new_run_dir, move.new, old_run_dir, move.new_hash)
    fault_point("after-move")
    project = desired.project.project
    renames = [rename_of(move) for move in plan.moves]
    journal.record_renames(project, renames, clock())
    return [move for move in plan.moves if move.renamed]
