"""What every command shares: consoles, exit codes, argument types, output formats."""

from __future__ import annotations

import re
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Annotated, Any, cast

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from reconciler.desired.desired import Desired
    from reconciler.engine.plan.actions import Plan
    from reconciler.scheduler.select import Choice


class _ConsoleOnFirstUse:
    """A rich Console, made when something is first printed through it: importing rich
    cost about 4% of `recon plan --against` (whose diff goes to stdout as plain text),
    and most commands write to stderr only to warn or fail. A console reads COLUMNS and
    NO_COLOR when it is made: later, but from the same environment."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def _made(self) -> Console:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        return self._console

    def __getattr__(self, name: str) -> Any:
        return getattr(self._made(), name)

    # `with console:` (rich's Live does it) looks these up on the class, not the instance.
    def __enter__(self) -> Console:
        return self._made().__enter__()

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._made().__exit__(kind, value, traceback)


# soft_wrap: a line is never broken to the width (80 when piped): pipes and grep see it whole.
console = cast("Console", _ConsoleOnFirstUse(highlight=False, soft_wrap=True))
err_console = cast("Console", _ConsoleOnFirstUse(stderr=True, highlight=False, soft_wrap=True))

# Terraform's exit codes, for CI; see reconciler.cli.
EXIT_ERROR = 1
EXIT_CHANGES = 2
EXIT_LOCKED = 3

# The positional arguments are described in each command's help text, not in an
# "Arguments" table (typer would label them with Python types: <path>, <list[str]>).
RepoArgument = Annotated[Path, typer.Argument(metavar="PROJECT", hidden=True, show_default=False)]
RevisionOption = Annotated[
    str | None,
    typer.Option("--rev", metavar="REV", help="Read the specs at this commit (default HEAD)."),
]
WorktreeOption = Annotated[
    bool, typer.Option("--worktree", help="Read the specs from the work tree, uncommitted.")
]


SCHEDULERS = ("auto", "slurm", "local")


def _known_scheduler(value: str | None) -> str | None:
    if value is not None and value not in SCHEDULERS:
        raise typer.BadParameter(f"{value!r} is not a scheduler: use auto, slurm or local")
    return value


SchedulerOption = Annotated[
    str | None,
    typer.Option(
        "--scheduler",
        envvar="RECON_SCHEDULER",
        metavar="auto|slurm|local",
        callback=_known_scheduler,
        help="Use this backend, whatever recon.yaml's `scheduler` says (local: run the jobs "
        "as processes on this machine, even where Slurm is installed).",
    ),
]


def chosen(option: str | None) -> Choice | None:
    """The --scheduler value, checked by the option's callback, as the engine types it."""
    return cast("Choice | None", option)


class Format(StrEnum):
    text = "text"
    markdown = "markdown"
    json = "json"


TargetsArgument = Annotated[
    list[str] | None,
    # Click writes an optional list as `[METAVAR]...`: this metavar makes that read
    # `[PROJECT] [RUN]...`, as the docs write it.
    typer.Argument(metavar="PROJECT] [RUN", hidden=True, show_default=False),
]
DownstreamOption = Annotated[
    bool, typer.Option("--downstream", help="Also take the runs that need the targets.")
]
AllowPruneAllOption = Annotated[
    bool,
    typer.Option(
        "--allow-prune-all",
        help="Confirm prunes that look like an accident: of a commit that declares no run or "
        "allocation, or of more than one job and more than recon.yaml's prune_limit allows "
        "(without it such a plan is held: nothing is done).",
    ),
]
AllowOverBudgetOption = Annotated[
    bool,
    typer.Option(
        "--allow-over-budget",
        help="Confirm a plan whose submissions are forecast to take more GPU-hours than "
        "recon.yaml's budget allows (without it such a plan is held: nothing is done).",
    ),
]
ReplaceOption = Annotated[
    list[str] | None,
    typer.Option(
        "--replace",
        metavar="RUN",
        help="Submit a new job for RUN although nothing changed (a failed run with no "
        "retries left, a flaky node); a queued or running job of it is cancelled first. "
        "Repeat for more runs.",
    ),
]
FormatOption = Annotated[Format, typer.Option("--format", help="Output format.")]


def width() -> int | None:
    """How wide a line may be: COLUMNS, or the terminal's width; piped without COLUMNS,
    no limit: whole lines, for grep."""
    import os

    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return console.width if console.is_terminal else None


def coloured() -> bool:
    """Whether stdout takes colours: a terminal, and no NO_COLOR."""
    return bool(console.is_terminal and not console.no_color)


def print_plan(text: str) -> None:
    """A plan as text on stdout: its actions coloured at a terminal."""
    if coloured():
        from reconciler.report.plan import styled

        console.print(styled(text), soft_wrap=True, end="")
    else:
        import sys

        sys.stdout.write(text)


def say(label: str, text: str, style: str | None = None) -> None:
    """`label: text` on stderr, wrapped at word boundaries to the width."""
    from rich.text import Text

    from reconciler.report.wrap import wrapped

    lines = wrapped(f"{label}: {text}", width(), 2)
    shown = Text("\n".join(lines))
    if style is not None:
        shown.stylize(style, 0, len(label) + 1)
    err_console.print(shown, soft_wrap=True)


def warn(desired: Desired) -> Desired:
    """Print what is valid but likely a mistake (a project with no runs) to stderr."""
    for warning in desired.warnings:
        say("warning", warning, "yellow")
    return desired


# What each command says about edits it does not read, after "uncommitted changes (...)".
UNREAD_EDITS = {
    "validate": "were not checked: validate read commit {commit}; --worktree checks the edits",
    "plan": "are not in this plan, made from commit {commit}; --worktree plans the edits",
    "apply": "are not applied: recon applied commit {commit}; commit them, or use --worktree "
    "to apply the edits",
    "status": "are not in this status, of commit {commit}; --worktree reads the edits",
    "watch": "are not deployed: watch deploys commits (now {commit}); commit them to deploy them",
}


def note_uncommitted(desired: Desired, revision: str | None, command: str) -> None:
    """One line on stderr when the project folder has edits recon did not read: a run's
    job runs the committed files, so an edit that is not committed is silently not used."""
    note = uncommitted_note(desired, command) if revision is None else None
    if note is not None:
        say("note", note)


def uncommitted_note(desired: Desired, command: str) -> str | None:
    """What `command` says of the project folder's uncommitted edits; None without any."""
    from reconciler.desired.source import uncommitted
    from reconciler.scheduler.runfolder import BOOKKEEPING

    if desired.commit is None:
        return None  # read from the work tree: the edits are in
    project = desired.project
    # recon's own writing is no edit: the state and runs folders, and a run's bookkeeping
    # folder wherever its workdir is (at the project's root too)
    written = (project.state_dir, project.runs_dir, BOOKKEEPING, f"*/{BOOKKEEPING}/*")
    changed = uncommitted(desired.root, written)
    if not changed:
        return None
    shown = ", ".join(changed[:3]) + (f" and {len(changed) - 3} more" if len(changed) > 3 else "")
    said = UNREAD_EDITS[command].format(commit=desired.commit[:12])
    return f"uncommitted changes ({shown}) {said}"


def with_file_notes(desired: Desired, plan: Plan) -> Plan:
    """The plan as shown, with a note for each external `path:` input of a run it submits
    that is not there: the job would fail at its first read, so say it before."""
    from reconciler.desired.matrix import sweep_of
    from reconciler.engine.plan.actions import SUBMITTING
    from reconciler.state.paths import external_path
    from reconciler.words import listed

    missing: dict[tuple[str, str], list[str]] = {}
    for action in plan.actions:
        if action.kind not in SUBMITTING or action.target not in desired.runs:
            continue
        for name, declared in desired.runs[action.target].inputs.items():
            path = external_path(desired, declared)
            if declared.path is not None and path is not None and not path.exists():
                runs = missing.setdefault((name, declared.path), [])
                runs.append(sweep_of(action.target) or action.target)
    notes = [
        f"Input {name} of {listed(list(dict.fromkeys(runs)))} ({path}) does not exist: the "
        "job fails when it reads it, unless something makes it before the job starts."
        for (name, path), runs in missing.items()
    ]
    return plan.model_copy(update={"notes": (*plan.notes, *notes)}) if notes else plan


def output_folder(path: Path) -> Path:
    """The folder `--out` names, created if missing; an error that says why if it cannot be."""
    from reconciler.errors import cannot_create

    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise cannot_create(path, error, "--out names a folder to write into") from None
    return path


def split_arguments(arguments: list[str] | None) -> tuple[Path, list[str]]:
    """`recon plan`, `recon plan REPO`, `recon plan REPO train eval` or `recon plan train`:
    the first argument is the repo when it is a folder."""
    arguments = list(arguments or [])
    if arguments and Path(arguments[0]).is_dir():
        return Path(arguments[0]), arguments[1:]
    if arguments and not Path(arguments[0]).exists() and _meant_a_folder(arguments[0]):
        from reconciler.desired.loader import check_project_folder

        check_project_folder(Path(arguments[0]))  # says the folder does not exist
    return Path("."), arguments


def _meant_a_folder(argument: str) -> bool:
    """`recon status ../prjo`: a folder misspelt, not a run (no run name holds a `/`);
    `recon status prjo` outside any project: no run can be meant either."""
    if "/" in argument or argument in (".", "..") or argument.startswith("~"):
        return True
    here = Path.cwd()
    from reconciler.desired.source import PROJECT_FILE

    return not any((folder / PROJECT_FILE).is_file() for folder in (here, *here.parents))


NotifyOption = Annotated[
    str | None,
    typer.Option(
        "--notify", metavar="COMMAND", help="Run this shell command with a JSON event on stdin."
    ),
]


class LogFormat(StrEnum):
    """How `recon watch` writes its log: lines for people, or one JSON object per line."""

    text = "text"
    json = "json"


LogFormatOption = Annotated[
    LogFormat, typer.Option("--log-format", help="text, or json: one object per line.")
]

_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s|m|h)?\s*$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str) -> timedelta:
    """`30s`, `2m`, `1h`, `500ms`, or plain seconds (`45`)."""
    match = _DURATION.match(text)
    if match is None or float(match.group(1)) <= 0:
        raise typer.BadParameter(
            f"{text!r} is not a duration: write e.g. 30s, 5m, 1h or 500ms", param_hint="--interval"
        )
    return timedelta(seconds=float(match.group(1)) * _UNIT_SECONDS[match.group(2) or "s"])
