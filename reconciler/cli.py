"""The `recon` command line: parse arguments, call the engine, render, map errors to exit codes.

Exit codes, the same for every command (Terraform's, for CI):
    0  success, and with --detailed-exitcode: nothing to change
    1  an error (bad specs, bad arguments, the cluster refused), with a message
    2  with --detailed-exitcode only: there are changes
    3  another apply holds the project's lock (it waited --lock-timeout); nothing was done
"""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from reconciler import __version__
from reconciler.devcluster.cli import app as dev_cluster_app
from reconciler.engine import planfile
from reconciler.engine.actions import Plan
from reconciler.engine.apply import ApplyResult
from reconciler.engine.reconcile import Request, load, plan_once, read_records, reconcile_once
from reconciler.engine.specdiff import diff
from reconciler.engine.status import run_statuses
from reconciler.errors import LockedError, ReconError
from reconciler.report import plan as plan_report
from reconciler.report import specdiff as specdiff_report
from reconciler.report import status as status_report
from reconciler.scheduler.select import select_scheduler
from reconciler.spec import schema as spec_schema
from reconciler.spec.loader import load_desired, open_source

app = typer.Typer(
    name="recon",
    help="Reconcile a Slurm cluster to the runs and allocations declared in a git repository.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(dev_cluster_app, name="dev-cluster")

console = Console(highlight=False)
err_console = Console(stderr=True, highlight=False)

EXIT_ERROR = 1
EXIT_CHANGES = 2
EXIT_LOCKED = 3

RepoArgument = Annotated[
    Path, typer.Argument(help="The repository root (holding recon.yaml).", show_default=".")
]
RevisionOption = Annotated[
    str | None, typer.Option("--rev", help="Read the specs at this commit (default HEAD).")
]
WorktreeOption = Annotated[
    bool, typer.Option("--worktree", help="Read the specs from the work tree, uncommitted.")
]


class Format(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


@app.command()
def version() -> None:
    """Print recon's version."""
    print(__version__)


@app.command()
def validate(
    repo: RepoArgument = Path("."),
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
) -> None:
    """Check every spec (YAML, fields, resources, names, references, cycles); list ALL problems."""
    source = open_source(repo, rev, worktree)
    desired = load_desired(source)
    where = desired.commit[:12] if desired.commit else "the work tree"
    console.print(
        f"OK: project {desired.project.project}, {len(desired.runs)} runs, "
        f"{len(desired.allocations)} allocations at {where}."
    )


TargetsArgument = Annotated[
    list[str] | None,
    typer.Argument(
        help="[REPO] [TARGETS...]: the project folder (default .), then runs to act on "
        "(each with the runs it needs).",
        show_default=False,
    ),
]
DownstreamOption = Annotated[
    bool, typer.Option("--downstream", help="Also take the runs that need the targets.")
]
FormatOption = Annotated[Format, typer.Option("--format", help="Output format.")]


def _split_arguments(arguments: list[str] | None) -> tuple[Path, list[str]]:
    """`recon plan`, `recon plan REPO`, `recon plan REPO train eval` or `recon plan train`:
    the first argument is the repo when it is a folder."""
    arguments = list(arguments or [])
    if arguments and Path(arguments[0]).is_dir():
        return Path(arguments[0]), arguments[1:]
    return Path("."), arguments


@app.command()
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
    repo, targets = _split_arguments(arguments)
    if against is not None:
        _plan_against(repo, against, rev, worktree, output_format, detailed_exitcode)
        return
    request = Request(repo, rev, worktree, tuple(targets), downstream)
    desired = load(request)
    scheduler = select_scheduler(desired.project.scheduler)
    records = read_records(desired)
    result, _ = plan_once(request, desired, scheduler, records, datetime.now(UTC))
    sys.stdout.write(plan_report.RENDERERS[output_format.value](result))
    if out is not None:
        planfile.save(result, out)
        err_console.print(f"Saved the plan to {out}; `recon apply {out}` carries it out.")
    if detailed_exitcode and result.has_changes:
        raise typer.Exit(EXIT_CHANGES)


def _plan_against(
    repo: Path,
    against: str,
    rev: str | None,
    worktree: bool,
    output_format: Format,
    detailed_exitcode: bool,
) -> None:
    base = load_desired(open_source(repo, against))
    head = load_desired(open_source(repo, rev, worktree))
    result = diff(base, head)
    sys.stdout.write(specdiff_report.RENDERERS[output_format.value](result))
    if detailed_exitcode and result.has_changes:
        raise typer.Exit(EXIT_CHANGES)


@app.command()
def apply(
    arguments: Annotated[
        list[str] | None,
        typer.Argument(
            help="[REPO] [TARGETS... | PLANFILE]: the project folder (default .), then runs "
            "to act on, or a plan saved by `recon plan --out`.",
            show_default=False,
        ),
    ] = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    downstream: DownstreamOption = False,
    auto_approve: Annotated[
        bool, typer.Option("--auto-approve", help="Apply without asking (cron, CI, scripts).")
    ] = False,
    lock_timeout: Annotated[
        float,
        typer.Option("--lock-timeout", help="Seconds to wait for another apply to finish."),
    ] = 0.0,
) -> None:
    """Converge the cluster to the specs: submit, replace, cancel, adopt, as `plan` shows."""
    repo, rest = _split_arguments(arguments)
    saved = None
    if len(rest) == 1 and Path(rest[0]).is_file():
        saved = planfile.load(Path(rest[0]))
        # Re-plan at HEAD (or the work tree) and compare: a commit since makes it stale.
        repo, rest, rev = Path(saved.root), list(saved.targets), None
        worktree = saved.commit is None
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if not auto_approve and not interactive:
        raise typer.BadParameter(
            "not at a terminal, so there is no one to confirm: pass --auto-approve to apply "
            "(nothing was done)"
        )

    def approve(current: Plan) -> bool:
        if saved is None:
            sys.stdout.write(plan_report.RENDERERS["text"](current))
        return auto_approve or typer.confirm("Apply this plan?", default=False)

    request = Request(repo, rev, worktree, tuple(rest), downstream)
    outcome = reconcile_once(request, approve=approve, saved=saved, lock_timeout=lock_timeout)
    if outcome.applied is None:
        console.print(
            "Nothing applied." if outcome.plan.has_changes else "No changes. The cluster matches."
        )
        return
    _report_applied(outcome.applied)
    if not outcome.applied.ok:
        raise typer.Exit(EXIT_ERROR)


def _report_applied(result: ApplyResult) -> None:
    for name, job_id in result.submitted.items():
        console.print(f"submitted {name}: job {job_id}")
    for job_id in result.cancelled:
        console.print(f"cancelled job {job_id}")
    for job_id in result.adopted:
        console.print(f"adopted job {job_id}")
    for name, message in result.refused.items():
        err_console.print(Text(f"refused {name}: {message}"), soft_wrap=True)
    for name, why in result.skipped.items():
        err_console.print(Text(f"skipped {name}: {why}"), soft_wrap=True)
    console.print(
        f"Apply complete: {len(result.submitted)} submitted, {len(result.cancelled)} cancelled, "
        f"{len(result.adopted)} adopted, {len(result.refused) + len(result.skipped)} not done."
    )


@app.command()
def status(
    arguments: TargetsArgument = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    output_format: Annotated[
        Format, typer.Option("--format", help="text or json (markdown: as text).")
    ] = Format.text,
) -> None:
    """Each run's sync status (current, outdated, missing, never run) and health."""
    repo, targets = _split_arguments(arguments)
    request = Request(repo, rev, worktree, tuple(targets))
    desired = load(request)
    scheduler = select_scheduler(desired.project.scheduler)
    records = read_records(desired)
    current, observation = plan_once(request, desired, scheduler, records, datetime.now(UTC))
    rows = run_statuses(desired, current, observation, records)
    if output_format is Format.json:
        sys.stdout.write(json.dumps([row.model_dump(mode="json") for row in rows], indent=2) + "\n")
        return
    console.print(status_report.as_table(current, rows))


@app.command()
def schema(
    out: Annotated[Path, typer.Option("--out", help="Directory to write into.")] = Path("schemas"),
) -> None:
    """Write the JSON Schemas of recon.yaml, Run and Allocation (for editors and CI)."""
    for path in spec_schema.write(out):
        console.print(f"wrote {path}")


def main() -> None:
    try:
        code = app(standalone_mode=False)
    except LockedError as error:
        err_console.print(Text(f"error: {error}"), soft_wrap=True)
        sys.exit(EXIT_LOCKED)
    except ReconError as error:
        # The message may quote the user's text: never read it as rich markup.
        err_console.print(Text("error: ", style="red") + Text(str(error)), soft_wrap=True)
        sys.exit(EXIT_ERROR)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(EXIT_ERROR)
    except typer.TyperException as error:
        # Usage errors exit 1, not click's 2: 2 means "changes" under --detailed-exitcode.
        err_console.print(Text(f"error: {error.format_message()}"), soft_wrap=True)
        err_console.print("Try 'recon --help'.")
        sys.exit(EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
