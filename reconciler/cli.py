"""The `recon` command line: parse arguments, call the engine, render, map errors to exit codes.

Exit codes, the same for every command (Terraform's, for CI):
    0  success, and with --detailed-exitcode: nothing to change
    1  an error (bad specs, bad arguments, the cluster refused), with a message
    2  with --detailed-exitcode only: there are changes
    3  another apply holds the project's lock (it waited --lock-timeout); nothing was done
"""

from __future__ import annotations

import sys

import typer
from rich.text import Text

from reconciler.commands import apply, export, plan, specs, status, watch
from reconciler.commands.common import EXIT_ERROR, EXIT_LOCKED, err_console
from reconciler.devcluster.cli import app as dev_cluster_app
from reconciler.errors import LockedError, ReconError

app = typer.Typer(
    name="recon",
    help="Reconcile a Slurm cluster to the runs and allocations declared in a git repository.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
# One module per verb (reconciler/commands/); this file only assembles them.
app.command()(specs.validate)
app.command()(plan.plan)
app.command()(apply.apply)
app.command()(status.status)
app.command()(watch.watch)
app.command()(specs.schema)
app.command()(specs.version)
app.add_typer(export.app, name="export")
app.add_typer(dev_cluster_app, name="dev-cluster")


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
    except OSError as error:
        # A file or folder the user named (or recon.yaml names) that cannot be used: the
        # places recon knows of raise PathError with a hint; this is the net under the rest.
        where = f"{error.filename}: " if error.filename else ""
        reason = error.strerror or str(error)
        err_console.print(Text("error: ", style="red") + Text(where + reason), soft_wrap=True)
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
