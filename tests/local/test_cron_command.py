"""`recon cron install` and `remove` through the command line, into the user's tables.

This machine has no cron (no `crontab` command) and no running systemd, so the tables
are stand-ins on PATH that keep them in the test's folder: `crontab` and `scrontab`
behave as Debian's crontab does (`-l` lists, or says "no crontab for USER" and exits
1; a file argument replaces the table), `systemctl` records what it was asked. What is
real: the entries recon writes, the systemd units (checked by `systemd-analyze verify`),
and the installed crontab line, run by `sh` with cron's short environment, converging a
project on the local backend.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import tempfile
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.launcher import checkout_venv
from tests.programs import installed, path_without

ROOT = Path(__file__).resolve().parents[2]
CRON_PATH = "/usr/bin:/bin"  # what cron gives a job


FAKE_TABLE = """#!/bin/sh
# A crontab stand-in: the table is one file beside this script.
table="{table}"
echo "$(basename "$0") $*" >> "{calls}"
if [ "$1" = -l ]; then
  if [ -f "$table" ]; then cat "$table"; exit 0; fi
  echo "no crontab for $(id -un)" >&2; exit 1
fi
cp "$1" "$table"
"""
FAKE_SYSTEMCTL = '#!/bin/sh\necho "systemctl $*" >> "{calls}"\n'


class Machine:
    """A user's machine: PATH with `python3` and `recon` of this checkout (as a venv's
    bin holds them), the stand-ins, a home of the test's."""

    def __init__(self, tmp_path: Path) -> None:
        self.home = tmp_path / "home"
        self.home.mkdir()
        self.bin = checkout_venv(tmp_path / "venv")
        self.calls = tmp_path / "calls"
        self._script("recon", f'#!/bin/sh\nexec {self.bin}/python3 -m reconciler "$@"\n')
        for name in ("crontab", "scrontab"):
            self._script(
                name, FAKE_TABLE.format(table=tmp_path / f"{name}.table", calls=self.calls)
            )
        self._script("systemctl", FAKE_SYSTEMCTL.format(calls=self.calls))
        self.tables = tmp_path
        self.system_path = CRON_PATH
        self._hidden = tmp_path / "system-bin"

    def _script(self, name: str, text: str) -> None:
        (self.bin / name).write_text(text)
        (self.bin / name).chmod(0o755)

    def without(self, name: str) -> None:
        """No ``name`` on this machine's PATH: neither the stand-in nor the machine's own
        (Debian's cron puts a real crontab in /usr/bin)."""
        (self.bin / name).unlink()
        self.system_path = path_without(self._hidden, {name}, CRON_PATH)

    @property
    def environment(self) -> dict[str, str]:
        return {
            "PATH": f"{self.bin}:{self.system_path}",
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / ".config"),
            "LANG": "C.UTF-8",
        }

    def recon(self, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
        """recon as the user runs it: this python3, so the entry names this bin's recon."""
        return subprocess.run(
            [str(self.bin / "python3"), "-m", "reconciler", *args],
            cwd=cwd, env={**self.environment, "PYTHONPATH": str(ROOT)},
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip

    def table(self, name: str) -> str:
        path = self.tables / f"{name}.table"
        return path.read_text() if path.exists() else ""

    def called(self) -> list[str]:
        lines = self.calls.read_text().splitlines() if self.calls.exists() else []
        self.calls.write_text("")
        return lines


@pytest.fixture
def machine(tmp_path: Path) -> Machine:
    return Machine(tmp_path)


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    """A project of one run on the local backend, committed."""
    repo = GitRepo(tmp_path / "hello")
    repo.commit(
        {
            "recon.yaml": "project: hello-cron\nscheduler: local\nspecs: ['*.yaml']\n"
            "defaults: {environment: {}}\n",
            "greet.yaml": "kind: Run\nname: greet\ncommand: echo hello > {outputs.greeting.path}\n"
            "outputs:\n  greeting: greeting.txt\n",
        }
    )
    return repo


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stderr == "", result.stderr
    return result.stdout


def test_crontab_install_is_idempotent_and_remove_finds_it(
    machine: Machine, project: GitRepo
) -> None:
    (machine.tables / "crontab.table").write_text("MAILTO=ops@example.org\n0 3 * * * backup\n")
    assert ok(machine.recon("cron", "install", "--every", "15m", cwd=project.root)) == (
        f"installed in crontab: recon apply of {project.root}, every 15m\n"
    )
    table = machine.table("crontab")
    assert table.startswith("MAILTO=ops@example.org\n0 3 * * * backup\n")
    tag, line = table.splitlines()[2:]
    assert tag.startswith(f"# recon cron: {project.root} (project hello-cron, every 15m)")
    assert line.startswith(f"*/15 * * * * cd {project.root} && PATH=")
    assert line.endswith(f"{machine.bin}/recon apply --auto-approve --quiet --lock-timeout 30")

    assert ok(machine.recon("cron", "install", cwd=project.root)) == (
        "unchanged: crontab already runs it every 15m\n"
    )
    assert machine.table("crontab") == table
    assert ok(machine.recon("cron", "install", ".", "--every", "1h", cwd=project.root)) == (
        f"updated in crontab: recon apply of {project.root}, every 1h\n"
    )
    assert machine.table("crontab").count("# recon cron: ") == 1

    assert ok(machine.recon("cron", "remove", str(project.root), cwd=machine.home)) == (
        f"removed from crontab: recon apply of {project.root}\n"
    )
    assert machine.table("crontab") == "MAILTO=ops@example.org\n0 3 * * * backup\n"
    assert ok(machine.recon("cron", "remove", cwd=project.root)) == (
        f"nothing to remove: no recon cron entry for {project.root} in crontab\n"
    )


def test_the_installed_line_converges_the_project_from_cron_s_environment(
    machine: Machine, project: GitRepo
) -> None:
    ok(machine.recon("cron", "install", "--every", "1m", cwd=project.root))
    (line,) = [row for row in machine.table("crontab").splitlines() if not row.startswith("#")]
    command = line.split(" ", 5)[5]  # after the five schedule fields, as cron reads it
    cron = {"PATH": CRON_PATH, "HOME": str(machine.home), "SHELL": "/bin/sh"}
    first = subprocess.run(["/bin/sh", "-c", command], env=cron, cwd=machine.home,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert first.returncode == 0, first.stdout + first.stderr
    assert "submitted" in first.stdout  # --quiet: what was done, nothing else
    # The local job runs on; an apply that waits for it settles it.
    ok(machine.recon("apply", "--auto-approve", "--wait", cwd=project.root))
    assert (project.root / "runs" / "greet" / "greeting.txt").read_text() == "hello\n"
    again = subprocess.run(["/bin/sh", "-c", command], env=cron, cwd=machine.home,
                           capture_output=True, text=True, timeout=120)  # fmt: skip
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")  # nothing to do


def test_scrontab_install_writes_the_slurm_entry_and_its_log_folder(
    machine: Machine, project: GitRepo
) -> None:
    done = machine.recon("cron", "install", "--scrontab", "--partition", "cpu", "--every", "5m",
                         cwd=project.root)  # fmt: skip
    assert ok(done) == f"installed in scrontab: recon apply of {project.root}, every 5m\n"
    listed, written = machine.called()
    assert listed == "scrontab -l" and written.startswith("scrontab /")  # the whole table, a file
    table = machine.table("scrontab").splitlines()
    assert table[1:6] == [
        "#SCRON --partition=cpu",
        "#SCRON --time=00:10:00",
        "#SCRON --job-name=recon-cron.hello-cron",
        f"#SCRON --output={project.root}/.recon/scrontab.log",
        "#SCRON --open-mode=append",
    ]
    assert table[6].startswith(f"*/5 * * * * cd {project.root} && ")
    assert (project.root / ".recon").is_dir()  # Slurm opens the log there, makes no folder
    assert project.git("status", "--porcelain") == ""  # the state folder ignores itself
    assert machine.table("crontab") == ""
    ok(machine.recon("cron", "remove", "--scrontab", cwd=project.root))
    assert machine.table("scrontab") == ""


def test_systemd_units_are_valid_and_the_timer_enabled(machine: Machine, project: GitRepo) -> None:
    done = machine.recon("cron", "install", "--systemd", "--every", "10m", cwd=project.root)
    ok(done)
    units = machine.home / ".config" / "systemd" / "user"
    service, timer = sorted(units.iterdir())
    assert (service.suffix, timer.suffix) == (".service", ".timer")
    assert machine.called() == [
        "systemctl --user daemon-reload",
        f"systemctl --user enable --now {timer.name}",
    ]
    analyze = installed("systemd-analyze", "systemd")
    # A runtime folder of a short path of its own (mode 0700, as mkdtemp makes it): the
    # user units' sockets live under it, and a socket's path holds 108 bytes at most, which
    # a test's temporary folder under pytest-xdist (…/popen-gw2/test_…/home/…) can pass.
    with tempfile.TemporaryDirectory(prefix="recon-rt-") as runtime:
        verified = subprocess.run(
            [analyze, "verify", "--user", str(service), str(timer)],
            env={**machine.environment, "XDG_RUNTIME_DIR": runtime},
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
    assert (verified.returncode, verified.stderr) == (0, ""), verified.stderr
    calendar = subprocess.run([analyze, "calendar", "*-*-* *:00/10:00"],
                              capture_output=True, text=True, check=True).stdout  # fmt: skip
    assert "Normalized form: *-*-* *:00/10:00" in calendar

    assert ok(
        machine.recon("cron", "install", "--systemd", "--every", "10m", cwd=project.root)
    ) == (f"unchanged: {timer.name}, every 10m\n")
    assert machine.called() == []
    assert ok(machine.recon("cron", "remove", "--systemd", cwd=project.root)) == (
        f"removed: {service.name}, {timer.name}\n"
    )
    assert machine.called() == [
        f"systemctl --user disable --now {timer.name}",
        "systemctl --user daemon-reload",
    ]
    assert list(units.iterdir()) == []


def test_print_installs_nothing(machine: Machine, project: GitRepo) -> None:
    printed = ok(machine.recon("cron", "install", "--print", cwd=project.root))
    assert printed.startswith(f"# recon cron: {project.root} (project hello-cron, every 15m)")
    assert machine.called() == []
    assert machine.table("crontab") == ""


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["install", "--every", "7m"], "error: --every '7m': give a period that divides an hour"),
        (["install", "--scrontab"], "error: --scrontab needs --partition NAME"),
        (["install", "--partition", "cpu"], "error: --partition is for --scrontab"),
        (
            ["install", "--crontab", "--systemd"],
            "error: give one of --crontab, --scrontab, --systemd, not 2",
        ),
    ],
)
def test_a_mistake_is_named(
    machine: Machine, project: GitRepo, args: list[str], message: str
) -> None:
    done = machine.recon("cron", *args, cwd=project.root)
    assert done.returncode == 1
    assert done.stderr.startswith(message), done.stderr
    assert "Traceback" not in done.stderr


def test_a_missing_crontab_says_what_to_do(machine: Machine, project: GitRepo) -> None:
    machine.without("crontab")
    done = machine.recon("cron", "install", cwd=project.root)
    assert done.returncode == 1
    assert done.stderr == (
        "error: crontab is not on PATH: install cron (Debian: apt-get install cron), or use "
        "--systemd or --scrontab\n"
    )


def test_a_folder_that_is_no_project_is_refused(machine: Machine, tmp_path: Path) -> None:
    done = machine.recon("cron", "install", str(tmp_path), cwd=tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr and machine.table("crontab") == ""


def test_an_entry_quotes_what_the_shell_would_split(machine: Machine, tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "my lab")
    repo.commit({"recon.yaml": "project: spaced\nscheduler: local\n"})
    ok(machine.recon("cron", "install", cwd=repo.root))
    (line,) = [row for row in machine.table("crontab").splitlines() if not row.startswith("#")]
    assert shlex.split(line.split(" ", 5)[5])[:2] == ["cd", str(repo.root)]
    assert os.path.isdir(shlex.split(line.split(" ", 5)[5])[1])
