"""The `recon` command line: parse arguments, call the engine, render, map errors to exit codes."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from reconciler import __version__
from reconciler.devcluster.cli import app as dev_cluster_app
from reconciler.errors import ReconError

app = typer.Typer(
    name="recon",
    help="Reconcile a Slurm cluster to the runs and allocations declared in a git repository.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
app.add_typer(dev_cluster_app, name="dev-cluster")

err_console = Console(stderr=True)


@app.command()
def version() -> None:
    """Print recon's version."""
    print(__version__)


def main() -> None:
    try:
        app()
    except ReconError as error:
        err_console.print(f"[red]error:[/red] {error}", highlight=False, markup=True)
        sys.exit(1)
