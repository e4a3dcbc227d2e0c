"""The `recon` command line: parse arguments, call the engine, render, map errors to exit codes.

Exit codes, the same for every command (Terraform's, for CI):
    0  success, and with --detailed-exitcode: nothing to change
    1  an error (bad specs, bad arguments, the cluster refused), with a message
    2  with --detailed-exitcode only: there are changes
"""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from reconciler import __version__
from reconciler.devcluster.cli import app as dev_cluster_app
from reconciler.engine.specdiff import diff
from reconciler.errors import ReconError
from reconciler.report import specdiff as specdiff_report
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


@app.command()
def plan(
    repo: RepoArgument = Path("."),
    against: Annotated[
        str | None,
        typer.Option(
            "--against",
            help="Diff the specs against this revision (e.g. origin/main); no cluster needed.",
        ),
    ] = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    output_format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
    detailed_exitcode: Annotated[
        bool,
        typer.Option(
            "--detailed-exitcode", help="Exit 0 for no changes, 2 for changes, 1 on error."
        ),
    ] = False,
) -> None:
    """Show what would change. With --against REV: the spec diff from REV to HEAD, for PR CI."""
    if against is None:
        raise typer.BadParameter(
            "recon plan needs --against REV here (the spec diff between two commits)"
        )
    base = load_desired(open_source(repo, against))
    head = load_desired(open_source(repo, rev, worktree))
    result = diff(base, head)
    sys.stdout.write(specdiff_report.RENDERERS[output_format.value](result))
    if detailed_exitcode and result.has_changes:
        raise typer.Exit(EXIT_CHANGES)


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
