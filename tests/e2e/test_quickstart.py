"""The README's main command, on a fresh clone, on a machine with no Slurm on PATH.

The embedded local backend must take over: the example project runs end to end and its
outputs exist. The clone is made from this repository's HEAD, so what is tested is what
is committed.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLURM_COMMANDS = {"sbatch", "squeue", "sacct", "salloc", "srun", "scancel", "sinfo", "scontrol"}


def main_command() -> str:
    """The first command of the README's set-up section: install, then run the example."""
    readme = (ROOT / "README.md").read_text()
    commands: list[str] = re.findall(r"```sh\n(.+?)\n```", readme, re.DOTALL)
    command = commands[0].strip()
    assert command.startswith("pip install -e . && recon apply examples/repo"), command
    return command.split("&&", 1)[1].strip()


def path_without_slurm(tmp_path: Path) -> str:
    """This machine's PATH, each tool linked into one folder, Slurm's commands left out."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for directory in [str(Path(sys.executable).parent), *os.environ["PATH"].split(os.pathsep)]:
        if not Path(directory).is_dir():
            continue
        for tool in Path(directory).iterdir():
            target = bin_dir / tool.name
            if tool.name in SLURM_COMMANDS or target.exists() or not os.access(tool, os.X_OK):
                continue
            target.symlink_to(tool)
    return str(bin_dir)


def test_readme_main_command_runs_the_example_without_slurm(tmp_path: Path) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", str(ROOT), str(clone)], check=True)
    path = path_without_slurm(tmp_path)
    assert shutil.which("sbatch", path=path) is None
    recon = shutil.which("recon", path=path)
    assert recon is not None, "recon is not installed (pip install -e .)"
    result = subprocess.run(
        main_command().split(),
        cwd=clone,
        env={**os.environ, "PATH": path, "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "(scheduler: local)" in result.stdout
    runs = clone / "examples" / "repo" / "runs"
    metrics = json.loads((runs / "evaluate" / "metrics.json").read_text())
    assert 0.0 <= metrics["accuracy"] <= 1.0 and metrics["rows"] > 0
    assert (runs / "actor-learner" / "policy.json").exists()
    manifest = runs / "train" / ".recon-run" / "manifest.json"
    assert json.loads(manifest.read_text())["run"] == "train"
