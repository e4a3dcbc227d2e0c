"""The README's main command, on a fresh clone: on a machine with no Slurm on PATH, and on
one where Slurm is installed (a login node), where it must submit nothing to it.

The example's `scheduler: local` makes the embedded local backend run it: the example
project runs end to end and its outputs exist. The README's one flag that sends it to
Slurm does. The clone is made from this repository's HEAD, so what is tested is what is
committed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

from tests.programs import path_without

ROOT = Path(__file__).resolve().parents[2]
SLURM_COMMANDS = {"sbatch", "squeue", "sacct", "salloc", "srun", "scancel", "sinfo", "scontrol"}


def readme_commands() -> list[str]:
    return [
        command.strip()
        for command in re.findall(r"```sh\n(.+?)\n```", (ROOT / "README.md").read_text(), re.DOTALL)
    ]


def main_command() -> str:
    """The first command of the README's set-up section: install, then run the example."""
    command = readme_commands()[0]
    assert command.startswith("pip install -e . && recon apply examples/repo"), command
    return command.split("&&", 1)[1].strip()


def slurm_command() -> str:
    """The README's next command: the same, sent to Slurm by one flag."""
    command = readme_commands()[1]
    assert command == main_command().replace("examples/repo", "examples/repo --scheduler slurm"), (
        command
    )
    return command


def path_without_slurm(tmp_path: Path) -> str:
    """This machine's PATH (this Python's folder first), Slurm's commands left out."""
    path = os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]])
    return path_without(tmp_path / "bin", SLURM_COMMANDS, path)


def cloned(tmp_path: Path) -> Path:
    """A fresh clone of this repository, as a newcomer gets it."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    return clone


def run_in(clone: Path, command: str, path: str, home: Path) -> subprocess.CompletedProcess[str]:
    """``command`` run in ``clone`` with ``path`` as PATH, as the README has it typed."""
    return subprocess.run(
        command.split(),
        cwd=clone,
        env={**os.environ, "PATH": path, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=600,
    )


def test_readme_main_command_runs_the_example_without_slurm(tmp_path: Path) -> None:
    clone = cloned(tmp_path)
    path = path_without_slurm(tmp_path)
    assert shutil.which("sbatch", path=path) is None
    recon = shutil.which("recon", path=path)
    assert recon is not None, "recon is not installed (pip install -e .)"
    result = run_in(clone, main_command(), path, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(scheduler: local)" in result.stdout
    runs = clone / "examples" / "repo" / "runs"
    metrics = json.loads((runs / "evaluate" / "metrics.json").read_text())
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["rows"] > 0
    assert (runs / "actor-learner" / "policy.json").exists()
    manifest = runs / "train" / ".recon-run" / "manifest.json"
    assert json.loads(manifest.read_text())["run"] == "train"


def path_with_slurm(tmp_path: Path, calls: Path) -> str:
    """This machine's PATH without Slurm, and Slurm's commands in front as stand-ins
    that answer (`sbatch --version` exits 0, so `scheduler: auto` would pick Slurm) and
    write each call to ``calls``."""
    fake = tmp_path / "slurm-bin"
    fake.mkdir()
    for name in SLURM_COMMANDS:
        script = fake / name
        script.write_text(
            f'#!/bin/sh\necho "{name} $*" >> {calls}\n'
            'if [ "$1" = --version ]; then echo "slurm 22.05.8"; fi\n'
        )
        script.chmod(0o755)
    return f"{fake}{os.pathsep}{path_without_slurm(tmp_path)}"


def test_readme_main_command_submits_nothing_where_slurm_is_installed(tmp_path: Path) -> None:
    clone = cloned(tmp_path)
    calls = tmp_path / "slurm-calls"
    path = path_with_slurm(tmp_path, calls)
    assert shutil.which("sbatch", path=path) == str(tmp_path / "slurm-bin" / "sbatch")
    result = run_in(clone, main_command(), path, tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert not calls.exists(), f"Slurm was called:\n{calls.read_text()}"
    assert "(scheduler: local)" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "All runs done. Allocation interactive skipped on the local backend, which holds none."
    )
    assert (clone / "examples" / "repo" / "runs" / "evaluate" / "metrics.json").exists()


def test_the_readme_flag_sends_the_example_to_slurm(tmp_path: Path) -> None:
    """`--scheduler slurm` plans against Slurm (the stand-ins are asked, nothing is
    submitted: the plan only reads)."""
    clone = cloned(tmp_path)
    calls = tmp_path / "slurm-calls"
    planned = (
        slurm_command().replace("recon apply", "recon plan").replace(" --auto-approve --wait", "")
    )
    result = run_in(clone, planned, path_with_slurm(tmp_path, calls), tmp_path)
    assert "(scheduler: slurm)" in result.stdout, result.stdout + result.stderr
    asked = {line.split()[0] for line in calls.read_text().splitlines()}
    assert "squeue" in asked and "sbatch" not in asked, asked
