"""`recon cron install` and `recon cron remove`: a periodic `recon apply` of a project
from the user's crontab, Slurm's scrontab or a systemd user timer (reconciler/cron.py)."""

from __future__ import annotations

import os
import shutil
import sys
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer

from reconciler.commands.common import RepoArgument, console
from reconciler.cron import (
    CronError,
    CrontabTable,
    Entry,
    Period,
    SlurmJob,
    SystemdUnits,
    crontab_block,
    replaced,
    scrontab_block,
    systemd_units,
)

app = typer.Typer(
    help="Run `recon apply` periodically: crontab, Slurm's scrontab or a systemd timer.",
    no_args_is_help=True,
)


class Where(StrEnum):
    crontab = "crontab"
    scrontab = "scrontab"
    systemd = "systemd"


def _where(crontab: bool, scrontab: bool, systemd: bool) -> Where:
    chosen = [w for w, on in ((Where.crontab, crontab), (Where.scrontab, scrontab),
                              (Where.systemd, systemd)) if on]  # fmt: skip
    if len(chosen) > 1:
        raise CronError(f"give one of --crontab, --scrontab, --systemd, not {len(chosen)}")
    return chosen[0] if chosen else Where.crontab


CrontabOption = Annotated[bool, typer.Option("--crontab", help="The user's crontab (the default).")]
ScrontabOption = Annotated[
    bool,
    typer.Option(
        "--scrontab", help="Slurm's scrontab: the apply runs as a tiny job, no login node."
    ),
]
SystemdOption = Annotated[bool, typer.Option("--systemd", help="A systemd user timer and service.")]


def _recon() -> list[str]:
    """How the entry starts this recon: the `recon` beside this Python (a venv's, pipx's),
    else this Python running the package."""
    script = Path(sys.executable).parent / "recon"
    if script.is_file() and os.access(script, os.X_OK):
        return [str(script)]
    return [sys.executable, "-m", "reconciler"]


def _path() -> str:
    """PATH for the entry: where Slurm's commands and recon are, then the system's."""
    found = [shutil.which(name) for name in ("sbatch", "git")]
    folders = [str(Path(f).parent) for f in found if f] + ["/usr/local/bin", "/usr/bin", "/bin"]
    return ":".join(dict.fromkeys(folders))


def _entry(repo: Path, every: str, lock_timeout: int) -> tuple[Entry, Path]:
    """The entry for the project at `repo`, and the project's state directory."""
    from reconciler.desired.loader import load_project, open_source

    period = Period.parse(every)
    folder = repo.resolve()
    project = load_project(open_source(folder))
    entry = Entry(
        folder=folder, project=project.project, period=period, recon=_recon(),
        lock_timeout=lock_timeout, path=_path(),
    )  # fmt: skip
    return entry, folder / project.state_dir


@app.command("install")
def install(
    repo: RepoArgument = Path("."),
    every: Annotated[
        str,
        typer.Option("--every", metavar="PERIOD", help="15m, 1h, 1d: divides an hour or a day."),
    ] = "15m",
    crontab: CrontabOption = False,
    scrontab: ScrontabOption = False,
    systemd: SystemdOption = False,
    partition: Annotated[
        str | None,
        typer.Option("--partition", metavar="NAME", help="With --scrontab: the job's partition."),
    ] = None,
    time: Annotated[
        str,
        typer.Option("--time", metavar="LIMIT", help="With --scrontab: the job's time limit."),
    ] = "00:10:00",
    lock_timeout: Annotated[
        int,
        typer.Option("--lock-timeout", metavar="SECONDS", help="Passed to recon apply."),
    ] = 30,
    print_only: Annotated[
        bool, typer.Option("--print", help="Print the entry; install nothing.")
    ] = False,
) -> None:
    """Install a periodic `recon apply --auto-approve --quiet` of the project.

    Once per project folder: installing again replaces the entry (same text: nothing
    changes), and `recon cron remove` finds it by its tag line. It applies the committed
    specs (HEAD), safe beside `recon watch`. With --scrontab, Slurm runs it as a job in
    --partition (output appended to scrontab.log in the state directory): for sites
    without cron on login nodes. PROJECT is the folder holding recon.yaml.

    \b
    Examples:
      recon cron install --every 15m                  the user's crontab
      recon cron install --scrontab --partition cpu   Slurm's scrontab
      recon cron install --systemd --every 1h --print
    """
    where = _where(crontab, scrontab, systemd)
    if where is not Where.scrontab and partition is not None:
        raise CronError("--partition is for --scrontab: cron and systemd run on this machine")
    entry, state = _entry(repo, every, lock_timeout)
    if where is Where.systemd:
        units = systemd_units(entry)
        if print_only:
            folder = SystemdUnits().folder
            print("\n".join(f"# {folder / name}\n{text}" for name, text in units.items()), end="")
            return
        changed = SystemdUnits().install(units)
        timer = next(name for name in units if name.endswith(".timer"))
        console.print(f"{'installed' if changed else 'unchanged'}: {timer}, every {entry.period}")
        return
    if where is Where.scrontab:
        if partition is None:
            raise CronError(
                "--scrontab needs --partition NAME: the partition the apply job runs in"
            )
        block = scrontab_block(
            entry, SlurmJob(partition=partition, time=time, output=state / "scrontab.log")
        )
    else:
        block = crontab_block(entry)
    if print_only:
        print(block, end="")
        return
    if where is Where.scrontab:
        from reconciler.state.directory import prepare_state_dir

        prepare_state_dir(state)  # Slurm opens the job's output there, but makes no folder
    table = CrontabTable(where.value)
    before = table.read()
    after = replaced(before, entry.tag, block)
    if after == before:
        console.print(f"unchanged: {where.value} already runs it every {entry.period}")
        return
    table.write(after)
    verb = "updated" if replaced(before, entry.tag, None) != before else "installed"
    console.print(f"{verb} in {where.value}: recon apply of {entry.folder}, every {entry.period}")


@app.command("remove")
def remove(
    repo: RepoArgument = Path("."),
    crontab: CrontabOption = False,
    scrontab: ScrontabOption = False,
    systemd: SystemdOption = False,
) -> None:
    """Remove the project's entry that `recon cron install` made.

    Found by its tag line (the project folder); the user's other entries stay as they
    are. Nothing to remove is not an error. PROJECT is the folder holding recon.yaml.

    \b
    Examples:
      recon cron remove                  from the user's crontab
      recon cron remove --scrontab       from Slurm's scrontab
    """
    where = _where(crontab, scrontab, systemd)
    folder = repo.resolve()
    tag = Entry(folder=folder, project="", period=Period(1), recon=(), lock_timeout=0, path="").tag
    if where is Where.systemd:
        units = SystemdUnits()
        found = units.tagged(tag)
        if found:
            units.remove(found)
            console.print(f"removed: {', '.join(path.name for path in found)}")
        else:
            console.print(f"nothing to remove: no recon cron unit for {folder}")
        return
    table = CrontabTable(where.value)
    before = table.read()
    after = replaced(before, tag, None)
    if after == before:
        console.print(f"nothing to remove: no recon cron entry for {folder} in {where.value}")
        return
    table.write(after)
    console.print(f"removed from {where.value}: recon apply of {folder}")
