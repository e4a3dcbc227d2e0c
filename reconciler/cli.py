"""The `recon` command line: parse arguments, call the engine, render, map errors to exit codes.

Exit codes, the same for every command (Terraform's, for CI):
    0  success, and with --detailed-exitcode: nothing to change
    1  an error (bad specs, bad arguments, the cluster refused), with a message
    2  with --detailed-exitcode only: there are changes
    3  another apply holds the project's lock (it waited --lock-timeout); nothing was done
  130  interrupted (Ctrl-C), as a shell reports a command SIGINT ended
"""

from __future__ import annotations

import gc
import os
import sys
from collections.abc import Callable
from typing import Annotated

import typer

from reconciler import __version__
from reconciler.commands import (
    apply,
    completion,
    cost,
    cron,
    export,
    graph,
    plan,
    serve,
    specs,
    status,
    watch,
)
from reconciler.commands.common import EXIT_ERROR, EXIT_LOCKED, err_console
from reconciler.devcluster.cli import app as dev_cluster_app
from reconciler.errors import LockedError, ReconError

EXIT_INTERRUPTED = 130  # 128 + SIGINT, what a shell reports for a command Ctrl-C ended


def _print_version(value: bool) -> None:
    if value:
        print(__version__)
        raise typer.Exit()


def _options(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Reconcile a Slurm cluster to the runs and allocations declared in a git repository."""


# One module per verb (reconciler/commands/); this file only assembles them.
COMMANDS: dict[str, Callable[..., None]] = {
    "validate": specs.validate,
    "validate-files": specs.validate_files,
    "plan": plan.plan,
    "apply": apply.apply,
    "status": status.status,
    "cost": cost.cost,
    "graph": graph.graph,
    "watch": watch.watch,
    "serve": serve.serve,
    "schema": specs.schema,
    "version": specs.version,
    "completion": completion.completion,
}
GROUPS: dict[str, typer.Typer] = {
    "export": export.app,
    "cron": cron.app,
    "dev-cluster": dev_cluster_app,
}


def assembled(only: str | None = None) -> typer.Typer:
    """The command line, or with `only` the same with that one command or group: typer
    builds the options of every command it holds at each start, which for all of them
    cost about 3% of a `plan --against` of 10,000 runs."""
    made = typer.Typer(
        name="recon",
        help="Reconcile a Slurm cluster to the runs and allocations declared in a git repository.",
        epilog="Start with `recon validate`, then `recon plan`, in the project folder (the "
        "one holding recon.yaml). `recon COMMAND -h` shows a command's options and examples.",
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    made.callback()(_options)
    for name, command in COMMANDS.items():
        if only in (None, name):
            made.command(name)(command)
    for name, group in GROUPS.items():
        if only in (None, name):
            made.add_typer(group, name=name)
    return made


app = assembled()


# Commands that read the project once and exit (the long-running watch and serve, and
# apply, which may wait through many passes, keep the collector).
READ_ONCE = frozenset({"plan", "status", "validate"})


def main() -> None:
    # A plan or status builds a model per run and per observed job, all kept to its end:
    # with the collector's default thresholds each collection of the oldest generation
    # scans them all again (3 of 8 CPU seconds of a plan of 10,000 completed runs).
    gc.set_threshold(50_000, 50, 100)
    if len(sys.argv) > 1 and sys.argv[1] in READ_ONCE:
        # Even so, the collections a plan of 100,000 runs still made (and the long one
        # after its pass, engine/reconcile.cycles_collected_after) cost 1.4 of its 10 CPU
        # seconds, and the heap they walk grows with the project. These commands read
        # once and exit: the few cycles they leave go with the process (peak RSS alike).
        gc.disable()
    try:
        _run()
    except BrokenPipeError:
        # The reader went away (`recon status | head`): stop quietly, as `cat` does. Python
        # would otherwise complain again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        sys.exit(EXIT_ERROR)


def _run() -> None:
    try:
        first = sys.argv[1] if len(sys.argv) > 1 else None
        named = first if first in COMMANDS or first in GROUPS else None
        # A command named first is all that runs; anything else (help, --version, a
        # misspelt command, completion) gets the whole command line.
        command_line = assembled(named) if named is not None else app
        code = command_line(prog_name="recon", standalone_mode=False)
    except KeyboardInterrupt:  # typer maps one inside a command to 130 itself
        sys.exit(EXIT_INTERRUPTED)
    except LockedError as error:
        from rich.text import Text  # rich only to fail: most commands write plain text

        err_console.print(Text(f"error: {error}"), soft_wrap=True)
        sys.exit(EXIT_LOCKED)
    except ReconError as error:
        from rich.text import Text

        # The message may quote the user's text: never read it as rich markup.
        err_console.print(Text("error: ", style="red") + Text(str(error)), soft_wrap=True)
        sys.exit(EXIT_ERROR)
    except OSError as error:
        # A file or folder the user named (or recon.yaml names) that cannot be used: the
        # places recon knows of raise PathError with a hint; this is the net under the rest.
        from rich.text import Text

        where = f"{error.filename}: " if error.filename else ""
        reason = error.strerror or str(error)
        err_console.print(Text("error: ", style="red") + Text(where + reason), soft_wrap=True)
        sys.exit(EXIT_ERROR)
    except typer.Abort:
        err_console.print("aborted")
        sys.exit(EXIT_ERROR)
    except typer.TyperException as error:
        if type(error).__name__ == "NoArgsIsHelpError":
            print(error.format_message())  # `recon` or `recon export` alone: the help
            sys.exit(0)
        from rich.text import Text

        # Usage errors exit 1, not click's 2: 2 means "changes" under --detailed-exitcode.
        err_console.print(Text(f"error: {error.format_message()}"), soft_wrap=True)
        context = getattr(error, "ctx", None)
        command = context.command_path if context is not None else "recon"
        err_console.print(Text(f"Try '{command} -h'."))
        sys.exit(EXIT_ERROR)
    sys.exit(code if isinstance(code, int) else 0)
