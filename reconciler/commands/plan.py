"""`recon plan`: what apply would do (live), or the spec diff between two commits."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from reconciler.commands.common import (
    EXIT_CHANGES,
    AllowOverBudgetOption,
    AllowPruneAllOption,
    DownstreamOption,
    Format,
    FormatOption,
    ReplaceOption,
    RevisionOption,
    SchedulerOption,
    TargetsArgument,
    WorktreeOption,
    chosen,
    err_console,
    note_uncommitted,
    print_plan,
    split_arguments,
    warn,
    width,
    with_file_notes,
)

if TYPE_CHECKING:
    from reconciler.desired.desired import Desired
    from reconciler.engine.plan.actions import Plan
    from reconciler.engine.plan.forecast import Expected
    from reconciler.repository.specdiff import SpecDiff
    from reconciler.state.records import SubmissionRecord


def plan(
    arguments: TargetsArgument = None,
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            metavar="REV",
            help="Only diff the specs against this revision (e.g. origin/main); no cluster.",
        ),
    ] = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    scheduler: SchedulerOption = None,
    downstream: DownstreamOption = False,
    replace: ReplaceOption = None,
    allow_prune_all: AllowPruneAllOption = False,
    allow_over_budget: AllowOverBudgetOption = False,
    output_format: FormatOption = Format.text,
    out: Annotated[
        Path | None,
        typer.Option("--out", "-out", metavar="FILE", help="Save the plan for `recon apply FILE`."),
    ] = None,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 0 for no changes, 2 for changes, 1 on error."
        ),
    ] = False,
    members: Annotated[
        bool,
        typer.Option("--members", help="List each sweep member's action under its sweep's line."),
    ] = False,
    durations: Annotated[
        Path | None,
        typer.Option(
            "--durations",
            envvar="RECON_DURATIONS",
            metavar="FILE",
            help="Last run durations for the expected cost where the journal has none (a "
            "PR's CI): a file `recon cost --format json > FILE` wrote.",
        ),
    ] = None,
) -> None:
    """Show what apply would do; never submits, cancels or runs anything.

    PROJECT is the folder holding recon.yaml (default: the current folder); RUN names a
    run to plan, with the runs it needs (default: all runs). With --against REV: the
    spec diff from REV to HEAD, for PR CI (no cluster needed). With --durations FILE:
    the expected cost of the GPU runs it will run also from the last durations FILE holds
    (for the runs the journal has none of: a fresh clone has no journal).

    \b
    Examples:
      recon plan                         every run, at HEAD
      recon plan train --downstream      train, the runs it needs and those needing it
      recon plan --members               each member of a sweep on a line of its own
      recon plan --against origin/main --format markdown --detailed-exitcode
      recon plan --against origin/main --durations recon-durations.json
    """
    repo, targets = split_arguments(arguments)
    exported = _exported(durations)
    if against is not None:
        _plan_against(repo, against, rev, worktree, output_format, detailed_exitcode, exported)
        return
    # The engine is imported when a command runs, and only the one it needs: `recon
    # --help` and the diff of --against (PR CI, no cluster) stay quick.
    from reconciler.engine.apply import planfile
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.report import cost as cost_report
    from reconciler.report import plan as plan_report

    seen = look_once(
        Request(
            repo,
            rev,
            worktree,
            tuple(targets),
            downstream,
            chosen(scheduler),
            tuple(replace or ()),
            allow_prune_all=allow_prune_all,
            allow_over_budget=allow_over_budget,
        )
    )
    warn(seen.desired)
    note_uncommitted(seen.desired, rev, "plan")
    result = seen.plan
    shown = with_file_notes(seen.desired, result)
    estimate = _expected(seen.desired, _submitted(result), seen.records, exported)
    if output_format is Format.text:
        text = plan_report.as_text(shown, members=members, width=width())
        print_plan(text + cost_report.expected_text(estimate, width()))
    elif output_format is Format.json:
        document = plan_report.document(shown)
        document["expected_cost"] = cost_report.expected_json(estimate)
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    else:
        sys.stdout.write(plan_report.as_markdown(shown, members=members))
        sys.stdout.write(cost_report.expected_markdown(estimate))
    if output_format is Format.markdown:
        # The runs the plan acts on and their neighbours, as GitHub and GitLab draw it.
        from reconciler.engine.ledger.status import run_statuses
        from reconciler.report.graph import graph_of, mermaid_block

        # With each run's health, as `recon graph` draws it: a failed run shows failed.
        rows = run_statuses(seen.desired, result, seen.observation, seen.records)
        drawn = graph_of(seen.desired, result, rows).around_actions(DIAGRAM_LIMIT)
        block = mermaid_block(drawn)
        sys.stdout.write(f"\n{block}" if block else "")
    if out is not None:
        planfile.save(result, out)
        err_console.print(f"Saved the plan to {out}; `recon apply {out}` carries it out.")
    if detailed_exitcode and (result.has_changes or result.waiting_unseen):
        # Runs waiting for jobs the scheduler does not show are not "no changes": the
        # cluster is not known to match, and a later pass may submit them again.
        raise typer.Exit(EXIT_CHANGES)


# A PR comment's diagram shows at most this many runs; the rest are counted.
DIAGRAM_LIMIT = 50


def _plan_against(
    repo: Path,
    against: str,
    rev: str | None,
    worktree: bool,
    output_format: Format,
    detailed_exitcode: bool,
    exported: Exported | None,
) -> None:
    from reconciler.desired.cache import SharedCache
    from reconciler.desired.loader import load_desired, open_source
    from reconciler.errors import NoProjectError
    from reconciler.report import specdiff as specdiff_report
    from reconciler.repository.specdiff import diff

    shared = SharedCache()  # the base commit's unchanged files are not parsed again
    head = load_desired(open_source(repo, rev, worktree), shared=shared)
    try:
        base = load_desired(open_source(repo, against, option="--against"), shared=shared)
    except NoProjectError:
        # The change that brings recon into the repo: everything is new.
        base = replace(head, commit=None, runs={}, allocations={}, upstreams={}, sweeps={})
    result = diff(base, head)
    runs = _changed_runs(result, head)
    # Text and markdown say the cost only of a change that runs GPU runs: a diff with
    # none does not read the journal or load what valuing needs (its start-up is its time).
    if output_format is not Format.json and not any(_asks_gpus(head, name) for name in runs):
        sys.stdout.write(specdiff_report.RENDERERS[output_format.value](result))
        if detailed_exitcode and result.has_changes:
            raise typer.Exit(EXIT_CHANGES)
        return
    from reconciler.engine.observe.journal import read_journal
    from reconciler.report import cost as cost_report

    # What the change will run, valued from this clone's journal, if it has one: offline.
    estimate = _expected(head, runs, read_journal(head).records, exported)
    if output_format is Format.json:
        document = json.loads(specdiff_report.as_json(result))
        document["expected_cost"] = cost_report.expected_json(estimate)
        sys.stdout.write(json.dumps(document, indent=2) + "\n")
    elif output_format is Format.markdown:
        sys.stdout.write(specdiff_report.as_markdown(result))
        sys.stdout.write(cost_report.expected_markdown(estimate))
    else:
        text = specdiff_report.as_text(result)
        sys.stdout.write(text + cost_report.expected_text(estimate, width()))
    if detailed_exitcode and result.has_changes:
        raise typer.Exit(EXIT_CHANGES)


def _asks_gpus(desired: Desired, run: str) -> bool:
    resources = desired.runs[run].resources
    shapes = resources.components or (resources,)
    return resources.step_gpus > 0 or any(s.node_gpus or s.shards for s in shapes)


def _submitted(plan: Plan) -> list[str]:
    """The runs a plan submits a job for (a sweep's members one by one)."""
    from reconciler.engine.plan.actions import SUBMITTING

    return [
        action.target
        for action in plan.actions
        if action.kind in SUBMITTING and action.target_kind == "run"
    ]


def _changed_runs(result: SpecDiff, head: Desired) -> list[str]:
    """The runs a spec diff adds or changes, a sweep's members by name: what it will run."""
    from reconciler.desired.matrix import sweep_of
    from reconciler.repository.specdiff import Change

    names: list[str] = []
    for entry in result.entries:
        if entry.change is Change.REMOVE or entry.kind == "Allocation":
            continue
        if entry.members is not None:
            names += [*entry.members.added, *entry.members.changed]
            if entry.change is Change.ADD and not entry.members.added:
                names += [n for n in head.runs if sweep_of(n) == entry.name]
        else:
            names.append(entry.name)
    return [name for name in names if name in head.runs]


@dataclass(frozen=True)
class Exported:
    """Last durations read from a file (``--durations``), and the file's name."""

    durations: dict[str, float]
    source: str


def _exported(path: Path | None) -> Exported | None:
    """The last durations in ``path``, a `recon cost --format json` document; a bad file
    is a one-line error naming it."""
    if path is None:
        return None
    from reconciler.report.cost import durations_of

    def bad(why: str) -> typer.BadParameter:
        return typer.BadParameter(f"{path} {why}", param_hint="--durations")

    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise bad(
            "does not exist: write it with `recon cost --format json > FILE` where the "
            "project's journal is"
        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise bad(f"cannot be read: {error}") from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise bad(f"is not JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    try:
        return Exported(durations_of(document), str(path))
    except ValueError as error:
        raise bad(str(error)) from None


def _expected(
    desired: Desired,
    runs: Iterable[str],
    records: Sequence[SubmissionRecord],
    exported: Exported | None = None,
) -> Expected:
    """What running ``runs`` is expected to cost, from the journal's last durations and,
    for the runs it has none of, those of ``exported``."""
    from reconciler.engine.plan.forecast import Asks, expected, last_durations

    asks = {name: Asks.of(desired.runs[name].resources) for name in runs}
    if exported is None:
        return expected(asks, last_durations(records))
    return expected(asks, last_durations(records), exported.durations, exported.source)
