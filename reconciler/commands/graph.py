"""`recon graph`: the run graph, with each run's sync and health where a scheduler is seen."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from reconciler.commands.common import (
    RepoArgument,
    RevisionOption,
    SchedulerOption,
    WorktreeOption,
    chosen,
    note_uncommitted,
    warn,
)

# Beyond this many nodes a diagram is unreadable anyway: the rest are counted.
DEFAULT_LIMIT = 200


class GraphFormat(StrEnum):
    mermaid = "mermaid"
    dot = "dot"
    json = "json"
    svg = "svg"


def graph(
    repo: RepoArgument = Path("."),
    output_format: Annotated[
        GraphFormat,
        typer.Option("--format", help="mermaid (GitHub and GitLab render it), dot, json or svg."),
    ] = GraphFormat.mermaid,
    offline: Annotated[
        bool, typer.Option("--offline", help="The specs only: no scheduler, no states.")
    ] = False,
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, metavar="N", help="At most N nodes; the rest counted."),
    ] = DEFAULT_LIMIT,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    scheduler: SchedulerOption = None,
) -> None:
    """The runs and allocations and what depends on what; each run's sync and health.

    PROJECT is the folder holding recon.yaml (default: the current folder). Looks at the
    cluster like `recon status` (changing nothing) unless --offline; then it needs none.
    Nodes are coloured by sync, a failed run red (docs/web.md, the legend); the label
    says what the next apply would do.

    \b
    Examples:
      recon graph                              mermaid, with states
      recon graph --offline --format dot | dot -Tsvg > runs.svg
    """
    # The engine is imported when a command runs: `recon --help` stays quick.
    from reconciler.desired.loader import load_desired, open_source
    from reconciler.engine.ledger.status import run_statuses
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.report.graph import RENDERERS, graph_of

    if offline:
        desired = warn(load_desired(open_source(repo, rev, worktree)))
        note_uncommitted(desired, rev, "graph")
        drawn = graph_of(desired)
    else:
        seen = look_once(Request(repo, rev, worktree, scheduler=chosen(scheduler)))
        desired = warn(seen.desired)
        note_uncommitted(desired, rev, "graph")
        rows = run_statuses(desired, seen.plan, seen.observation, seen.records)
        drawn = graph_of(desired, seen.plan, rows)
    sys.stdout.write(RENDERERS[output_format.value](drawn.limited(limit)))
