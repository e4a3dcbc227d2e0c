"""`recon status`: each run's sync status and health."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from reconciler.commands.common import (
    Format,
    RevisionOption,
    TargetsArgument,
    WorktreeOption,
    console,
    split_arguments,
)


def status(
    arguments: TargetsArgument = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    output_format: Annotated[
        Format, typer.Option("--format", help="text or json (markdown: as text).")
    ] = Format.text,
) -> None:
    """Each run's sync status (current, outdated, missing, never run) and health, and
    each allocation's job, time left, steps and history (text only)."""
    # The engine is imported when a command runs: `recon --help` stays quick.
    from reconciler.engine.reconcile import Request, look_once, read_events
    from reconciler.engine.status import allocation_statuses, run_statuses
    from reconciler.report import status as status_report

    repo, targets = split_arguments(arguments)
    seen = look_once(Request(repo, rev, worktree, tuple(targets)))
    desired, current, observation, records = seen.desired, seen.plan, seen.observation, seen.records
    notes: dict[str, str] = {}
    for event in read_events(desired):  # newest first: the first per run wins
        if event.name is not None:
            notes.setdefault(event.name, f"{event.kind}: {event.message}")
    rows = run_statuses(desired, current, observation, records, notes)
    if output_format is Format.json:
        sys.stdout.write(json.dumps([row.model_dump(mode="json") for row in rows], indent=2) + "\n")
        return
    console.print(status_report.as_table(current, rows))
    held = allocation_statuses(desired, current, observation, records)
    if held:
        console.print(status_report.allocations_table(held))
