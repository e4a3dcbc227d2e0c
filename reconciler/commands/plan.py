"""`recon plan`: what apply would do (live), or the spec diff between two commits."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path
from typing import Annotated

import typer

from reconciler.commands.common import (
    EXIT_CHANGES,
    DownstreamOption,
    Format,
    FormatOption,
    RevisionOption,
    TargetsArgument,
    WorktreeOption,
    err_console,
    split_arguments,
)


def plan(
    arguments: TargetsArgument = None,
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            help="Only diff the specs against this revision (e.g. origin/main); no cluster.",
        ),
    ] = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    downstream: DownstreamOption = False,
    output_format: FormatOption = Format.text,
    out: Annotated[
        Path | None, typer.Option("--out", "-out", help="Save the plan for `recon apply FILE`.")
    ] = None,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 0 for no changes, 2 for changes, 1 on error."
        ),
    ] = False,
) -> None:
    """Show what apply would do. Never submits, cancels or runs anything.

    With --against REV: the spec diff from REV to HEAD, for PR CI (no cluster needed).
    """
    # The engine is imported when a command runs: `recon --help` stays quick.
    from reconciler.engine import planfile
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.report import plan as plan_report

    repo, targets = split_arguments(arguments)
    if against is not None:
        _plan_against(repo, against, rev, worktree, output_format, detailed_exitcode)
        return
    result = look_once(Request(repo, rev, worktree, tuple(targets), downstream)).plan
    sys.stdout.write(plan_report.RENDERERS[output_format.value](result))
    if out is not None:
        planfile.save(result, out)
        err_console.print(f"Saved the plan to {out}; `recon apply {out}` carries it out.")
    if detailed_exitcode and (result.has_changes or result.waiting_unseen):
        # Runs waiting for jobs the scheduler does not show are not "no changes": the
        # cluster is not known to match, and a later pass may submit them again.
        raise typer.Exit(EXIT_CHANGES)


def _plan_against(
    repo: Path,
    against: str,
    rev: str | None,
    worktree: bool,
    output_format: Format,
    detailed_exitcode: bool,
) -> None:
    from reconciler.engine.specdiff import diff
    from reconciler.errors import NoProjectError
    from reconciler.report import specdiff as specdiff_report
    from reconciler.spec.loader import load_desired, open_source

    head = load_desired(open_source(repo, rev, worktree))
    try:
        base = load_desired(open_source(repo, against))
    except NoProjectError:
        # The change that brings recon into the repo: everything is new.
        base = replace(head, commit=None, runs={}, allocations={}, upstreams={})
    result = diff(base, head)
    sys.stdout.write(specdiff_report.RENDERERS[output_format.value](result))
    if detailed_exitcode and result.has_changes:
        raise typer.Exit(EXIT_CHANGES)
