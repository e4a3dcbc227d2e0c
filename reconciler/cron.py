"""`recon cron`: a periodic `recon apply` of one project, as a crontab line, a Slurm
scrontab entry or a systemd user timer, installed and removed again by its tag.

Each entry starts with a tag line naming the project folder, `# recon cron: <folder>`,
so `recon cron remove` finds it again among the user's other entries and a second
install replaces it instead of adding another (idempotent). What an entry runs is the
same everywhere: `cd <folder> && recon apply --auto-approve --quiet --lock-timeout N`,
safe beside a running `recon watch` or another apply (the project's lock).

Rendering (`Entry`, `Period`, `crontab_block`, `scrontab_block`, `systemd_units`,
`replaced`) is plain text work; the three tables (`CrontabTable` for both crontab and
scrontab, `SystemdUnits`) read and write through the commands the system has
(`crontab`, `scrontab`, `systemctl --user`), found on PATH.
"""

from __future__ import annotations

import hashlib
import os
import re
import shlex
import shutil
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from reconciler.errors import ReconError

TAG = "# recon cron: "
# What `scrontab -l` puts before the lines of an entry Slurm disabled (its job cancelled
# with scancel, or refused): still the entry, to replace or remove.
DISABLED = "#DISABLED: "


class CronError(ReconError):
    """A period recon cannot write, or a table the system refused to read or write."""


# -- the period -----------------------------------------------------------------------------

_PERIOD = re.compile(r"^\s*(\d+)\s*(m|min|h|d)\s*$")
MINUTES = (1, 2, 3, 4, 5, 6, 10, 12, 15, 20, 30)  # divide an hour: every run equally apart
HOURS = (1, 2, 3, 4, 6, 8, 12)  # divide a day


@dataclass(frozen=True)
class Period:
    """How often: every `minutes` minutes, a divisor of an hour or of a day."""

    minutes: int

    @classmethod
    def parse(cls, text: str) -> Period:
        """`15m`, `2h`, `1d`: periods that divide an hour or a day, so that cron and
        systemd start each pass equally apart (cron's `*/7` would run at :56 and :00)."""
        found = _PERIOD.match(text)
        if found is not None:
            count, unit = int(found.group(1)), found.group(2)
            if unit in ("m", "min") and count in MINUTES:
                return cls(count)
            if unit == "m" and count % 60 == 0 and count // 60 in HOURS:
                return cls(count)
            if unit == "h" and count in HOURS:
                return cls(count * 60)
            if unit == "d" and count == 1:
                return cls(24 * 60)
        raise CronError(
            f"--every {text!r}: give a period that divides an hour or a day, so passes are "
            f"equally apart: {', '.join(f'{m}m' for m in MINUTES)}; "
            f"{', '.join(f'{h}h' for h in HOURS)}; or 1d"
        )

    def __str__(self) -> str:
        if self.minutes % (24 * 60) == 0:
            return "1d"
        return f"{self.minutes // 60}h" if self.minutes % 60 == 0 else f"{self.minutes}m"

    @property
    def cron(self) -> str:
        """The five fields of a crontab (and scrontab) line."""
        if self.minutes == 1:
            return "* * * * *"
        if self.minutes < 60:
            return f"*/{self.minutes} * * * *"
        hours = self.minutes // 60
        return "0 0 * * *" if hours == 24 else ("0 * * * *" if hours == 1 else f"0 */{hours} * * *")

    @property
    def on_calendar(self) -> str:
        """systemd's OnCalendar= for the same times."""
        if self.minutes < 60:
            return f"*-*-* *:00/{self.minutes}:00"
        hours = self.minutes // 60
        return "*-*-* 00:00:00" if hours == 24 else f"*-*-* 00/{hours}:00:00"


# -- the entry ------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class Entry:
    """One project's periodic apply."""

    folder: Path  # the project folder, absolute
    project: str  # its name (recon.yaml's `project:`), for people reading the table
    period: Period
    recon: Sequence[str]  # how to start recon, by absolute path
    lock_timeout: int
    path: str  # PATH for recon and the scheduler's commands (cron's own is short)

    @property
    def tag(self) -> str:
        return f"{TAG}{shlex.quote(str(self.folder))}"

    @property
    def apply(self) -> list[str]:
        return [
            *self.recon, "apply", "--auto-approve", "--quiet",
            "--lock-timeout", str(self.lock_timeout),
        ]  # fmt: skip

    @property
    def command(self) -> str:
        """The shell line cron (or Slurm) runs."""
        return f"cd {shlex.quote(str(self.folder))} && PATH={shlex.quote(self.path)} " + shlex.join(
            self.apply
        )

    def heading(self, how: str) -> str:
        return (
            f"{self.tag} (project {self.project}, every {self.period}); "
            f"`recon cron remove {shlex.quote(str(self.folder))} --{how}` removes it"
        )


def crontab_block(entry: Entry) -> str:
    return f"{entry.heading('crontab')}\n{entry.period.cron} {entry.command}\n"


@dataclass(frozen=True, kw_only=True)
class SlurmJob:
    """The tiny job Slurm runs the apply in, from the user's scrontab."""

    partition: str
    time: str  # its time limit, as sbatch takes it
    output: Path  # where its output goes (appended)


def scrontab_block(entry: Entry, job: SlurmJob) -> str:
    """The entry in Slurm's scrontab form: `#SCRON` lines are the sbatch options of the
    job the next line starts."""
    options = [
        f"--partition={job.partition}",
        f"--time={job.time}",
        f"--job-name=recon-cron.{entry.project}",
        f"--output={job.output}",
        "--open-mode=append",
    ]
    directives = "".join(f"#SCRON {option}\n" for option in options)
    return f"{entry.heading('scrontab')}\n{directives}{entry.period.cron} {entry.command}\n"


def replaced(table: str, tag: str, block: str | None) -> str:
    """`table` without the entries tagged `tag` (the tag line, its `#SCRON` lines and the
    schedule line after them), with `block` appended when given. Other lines stay as
    they were."""
    kept: list[str] = []
    lines = iter(table.splitlines(keepends=True))
    for line in lines:
        if line.startswith(tag) and line[len(tag) : len(tag) + 1] in (" ", "\n", ""):
            for following in lines:
                if not following.removeprefix(DISABLED).startswith("#SCRON"):
                    break  # the schedule line: the entry's last
            continue
        kept.append(line)
    text = "".join(kept)
    if text and not text.endswith("\n"):
        text += "\n"
    return text + (block or "")


def systemd_units(entry: Entry) -> dict[str, str]:
    """A oneshot service and its timer, by file name."""
    heading = entry.heading("systemd")
    service = (
        f"{heading}\n[Unit]\nDescription=recon apply of {entry.folder} (project "
        f"{entry.project})\n\n[Service]\nType=oneshot\n"
        f"WorkingDirectory={entry.folder}\nEnvironment={shlex.quote('PATH=' + entry.path)}\n"
        f"ExecStart={shlex.join(entry.apply)}\n"
        "# 3: another apply held the project's lock; the next period tries again.\n"
        "SuccessExitStatus=3\n"
    )
    timer = (
        f"{heading}\n[Unit]\nDescription=recon apply of {entry.folder} every {entry.period}\n\n"
        f"[Timer]\nOnCalendar={entry.period.on_calendar}\nAccuracySec=1s\n\n"
        "[Install]\nWantedBy=timers.target\n"
    )
    name = unit_name(entry.folder, entry.project)
    return {f"{name}.service": service, f"{name}.timer": timer}


def unit_name(folder: Path, project: str) -> str:
    """recon-cron-<project>-<8 hex digits of the folder>: two clones of one project get
    two units."""
    slug = re.sub(r"[^A-Za-z0-9_.-]", "-", project)
    return f"recon-cron-{slug}-{hashlib.sha256(str(folder).encode()).hexdigest()[:8]}"


# -- the tables -----------------------------------------------------------------------------


def _run(argv: list[str], stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    if shutil.which(argv[0]) is None:
        raise CronError(f"{argv[0]} is not on PATH: {_MISSING.get(argv[0], 'install it')}")
    return subprocess.run(argv, input=stdin, capture_output=True, text=True, timeout=60)


_MISSING = {
    "crontab": "install cron (Debian: apt-get install cron), or use --systemd or --scrontab",
    "scrontab": "it comes with Slurm 20.11 or later; ask the cluster's admins, or use "
    "--crontab or --systemd",
    "systemctl": "use --crontab or --scrontab",
}


class CrontabTable:
    """The user's crontab, or Slurm's scrontab: both list with -l and replace the whole
    table from a file."""

    def __init__(self, command: str) -> None:
        self.command = command

    def read(self) -> str:
        listed = _run([self.command, "-l"])
        if listed.returncode == 0:
            return listed.stdout
        said = (listed.stderr + listed.stdout).strip()
        if "no crontab" in said.lower():
            return ""
        raise CronError(f"`{self.command} -l` failed (exit {listed.returncode}): {said}")

    def write(self, table: str) -> None:
        with tempfile.NamedTemporaryFile("w", prefix="recon-cron-", suffix=".tab") as file:
            file.write(table)
            file.flush()
            written = _run([self.command, file.name])
        if written.returncode != 0:
            said = (written.stderr + written.stdout).strip()
            raise CronError(
                f"`{self.command}` refused the table (exit {written.returncode}): {said}"
            )


class SystemdUnits:
    """The user's systemd units: files in ~/.config/systemd/user, and `systemctl --user`."""

    def __init__(self) -> None:
        config = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
        self.folder = Path(config) / "systemd" / "user"

    def tagged(self, tag: str) -> list[Path]:
        if not self.folder.is_dir():
            return []
        return sorted(
            path
            for path in self.folder.glob("recon-cron-*")
            if path.read_text(encoding="utf-8", errors="replace").startswith(tag + " ")
        )

    def install(self, units: dict[str, str]) -> bool:
        """Write the units and start the timer; False when they were there as they are."""
        self.folder.mkdir(parents=True, exist_ok=True)
        paths = {self.folder / name: text for name, text in units.items()}
        if all(p.is_file() and p.read_text(encoding="utf-8") == t for p, t in paths.items()):
            return False
        for path, text in paths.items():
            path.write_text(text, encoding="utf-8")
        timer = next(name for name in units if name.endswith(".timer"))
        self._systemctl("daemon-reload")
        self._systemctl("enable", "--now", timer)
        return True

    def remove(self, paths: list[Path]) -> None:
        for timer in (path for path in paths if path.suffix == ".timer"):
            self._systemctl("disable", "--now", timer.name)
        for path in paths:
            path.unlink()
        self._systemctl("daemon-reload")

    def _systemctl(self, *arguments: str) -> None:
        done = _run(["systemctl", "--user", *arguments])
        if done.returncode != 0:
            said = (done.stderr + done.stdout).strip()
            raise CronError(
                f"`systemctl --user {' '.join(arguments)}` failed (exit {done.returncode}): "
                f"{said} (a user's systemd runs in a login session; on a server, "
                "`loginctl enable-linger` keeps it running)"
            )
