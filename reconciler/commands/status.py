"""`recon status`: each run's sync status and health."""

from __future__ import annotations

import json
import os
import sys
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Annotated

import typer

from reconciler.commands.common import (
    Format,
    RevisionOption,
    SchedulerOption,
    TargetsArgument,
    WorktreeOption,
    chosen,
    console,
    note_uncommitted,
    split_arguments,
    warn,
    width,
)

if TYPE_CHECKING:
    from reconciler.desired.desired import Desired
    from reconciler.engine.ledger.status import AllocationStatus, RunStatus


def status(
    arguments: TargetsArgument = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    scheduler: SchedulerOption = None,
    output_format: Annotated[
        Format, typer.Option("--format", help="text or json (markdown: as text).")
    ] = Format.text,
    wide: Annotated[
        bool,
        typer.Option(
            "--wide", help="Every column (last success, outputs, history), nothing shortened."
        ),
    ] = False,
    no_color: Annotated[
        bool, typer.Option("--no-color", help="No colours or bold (as NO_COLOR=1 does).")
    ] = False,
    with_allocations: Annotated[
        bool,
        typer.Option(
            "--allocations",
            help='With --format json: {"runs": [...], "allocations": [...]} instead of the '
            "list of runs alone. (Text always shows allocations.)",
        ),
    ] = False,
) -> None:
    """Each run's sync status and health, and each allocation's job.

    PROJECT is the folder holding recon.yaml (default: the current folder); RUN names a
    run to show (default: all runs). Sync: current, outdated, missing or never run.
    Health: how its last job stands. Allocations: job, time left, steps and history
    (in JSON with --allocations).

    \b
    Examples:
      recon status                       every run of the project in this folder
      recon status train --format json
      recon status --format json --allocations
    """
    # The engine is imported when a command runs: `recon --help` stays quick.
    from reconciler.engine.ledger.status import allocation_statuses, run_statuses
    from reconciler.engine.observe.journal import read_events
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.report import status as status_report

    repo, targets = split_arguments(arguments)
    seen = look_once(Request(repo, rev, worktree, tuple(targets), scheduler=chosen(scheduler)))
    desired, current, observation, records = seen.desired, seen.plan, seen.observation, seen.records
    warn(desired)
    note_uncommitted(desired, rev, "status")
    notes: dict[str, str] = {}
    for event in read_events(desired):  # newest first: the first per run wins
        if event.name is not None:
            notes.setdefault(event.name, f"{event.kind}: {event.message}")
    rows = _with_manifest_commits(
        desired, run_statuses(desired, current, observation, records, notes)
    )
    held = allocation_statuses(desired, current, observation, records)
    if targets:
        rows, held = _named(desired, targets, rows, held)
    if output_format is Format.json:
        runs = [row.model_dump(mode="json") for row in rows]
        # The list of runs alone stays what it always was: consumers index it by run.
        data: object = runs
        if with_allocations:
            data = {"runs": runs, "allocations": [row.model_dump(mode="json") for row in held]}
        sys.stdout.write(json.dumps(data, indent=2) + "\n")
        return
    layout = status_report.Layout(
        width=width(),
        wide=wide,
        styled=console.is_terminal and not console.no_color and not no_color,
        ascii=not _utf8_locale(),
    )
    text = status_report.render(current, rows, held, layout, datetime.now(UTC))
    if layout.styled:
        console.print(text, soft_wrap=True, end="")
    else:
        sys.stdout.write(text.plain)  # plain: rich would only cost time, line by line


def _named(
    desired: Desired,
    targets: list[str],
    rows: list[RunStatus],
    held: list[AllocationStatus],
) -> tuple[list[RunStatus], list[AllocationStatus]]:
    """The runs named (a sweep's members, by value, for a sweep's name), not the runs they
    need, which the look took in too; the allocations named, or that those runs use."""
    from reconciler.desired.matrix import member_order, sweep_of

    shown = [row for row in rows if row.name in targets or sweep_of(row.name) in targets]
    first: dict[str, int] = {}
    for index, row in enumerate(shown):
        first.setdefault(sweep_of(row.name) or row.name, index)
    shown.sort(key=lambda row: (first[sweep_of(row.name) or row.name], member_order(row.name)))
    used = {desired.runs[row.name].allocation for row in shown if row.name in desired.runs}
    return shown, [row for row in held if row.name in targets or row.name in used]


def _with_manifest_commits(desired: Desired, rows: list[RunStatus]) -> list[RunStatus]:
    """A run the journal knows no commit of its success for (adopted after a lost journal)
    takes it from the provenance manifest its last success wrote beside its outputs."""
    from reconciler.engine.plan.actions import SyncStatus
    from reconciler.state.paths import run_dir
    from reconciler.state.provenance import read_manifest

    rows = list(rows)
    for index, row in enumerate(rows):
        if row.last_success_commit is not None or row.sync is SyncStatus.NEVER_RUN:
            continue  # most rows: the manifest is read (and the run's model built) for few
        run = desired.runs.get(row.name)
        if run is None:
            continue
        manifest = read_manifest(run_dir(desired, run))
        if manifest is not None and manifest.commit and manifest.run == row.name:
            rows[index] = row.model_copy(update={"last_success_commit": manifest.commit})
    return rows


def _utf8_locale() -> bool:
    """Whether the locale can show more than ASCII (not LC_ALL=C), as the C library
    decides: the first of LC_ALL, LC_CTYPE and LANG that is set."""
    for variable in ("LC_ALL", "LC_CTYPE", "LANG"):
        value = os.environ.get(variable)
        if value:
            return "utf-8" in value.lower() or "utf8" in value.lower()
    return False
