"""Rendered batch scripts as the real sbatch reads and runs them.

`sbatch --test-only -v` prints the options it took from a script, per het component,
without submitting anything; one real job checks log placement and quoting end to end.
Jobs here carry a project name of their own, so they never look like another test's.
"""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.desired import DesiredRun, Location, effective_run
from reconciler.desired.models import Project, Run
from reconciler.scheduler.render import RenderContext, render_batch_script, required_directories
from reconciler.scheduler.runfolder import log_files, log_paths
from reconciler.scheduler.tag import Tag
from tests.projects import new_project_name
from tests.slurmrelease import SLURM_22_05, SLURM_24_11, slurm_release

pytestmark = pytest.mark.slurm

HOSTILE = "a\n#SBATCH --partition=gpu\n#PBS -A evil\n#BSUB -J evil\n$(touch CANARY)'\"%j"


def rendered(spec: dict[str, Any], run_dir: Path, code_dir: Path) -> tuple[Tag, str]:
    project = new_project_name("render-")
    run = Run.model_validate({"kind": "Run", "name": "job", **spec})
    spec_hash = uuid.uuid4().hex[:16]
    desired = DesiredRun(
        effective_run(run, Project(project=project)),
        location=Location("specs/a.yaml", 1),
        spec_hash=spec_hash,
    )
    tag = Tag(
        project=project, deployment="0123456789ab", kind="run", name="job", spec_hash=spec_hash
    )
    context = RenderContext(project, code_dir, run_dir, tag)
    for directory in required_directories(desired, context):
        directory.mkdir(parents=True, exist_ok=True)
    return tag, render_batch_script(desired, context)


def options_sbatch_takes(script: str) -> list[dict[str, str]]:
    """The `defined options` blocks of `sbatch -v --test-only`, one per het component."""
    result = subprocess.run(
        ["sbatch", "-v", "--test-only"],
        input=script,
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    blocks: list[dict[str, str]] = []
    for line in result.stderr.splitlines():
        text = line.removeprefix("sbatch: ")
        if text == "defined options":
            blocks.append({})
        elif blocks and " : " in text and not text.startswith("-"):
            key, _, value = text.partition(" : ")
            blocks[-1][key.strip()] = value.strip()
    return blocks


def test_sbatch_takes_only_the_rendered_directives(tmp_path: Path) -> None:
    run_dir = tmp_path / "runs dir/50%j 'x' #1"
    spec = {
        "command": f"echo hi\n#PBS -q gpu\n#BSUB -J evil\n#SBATCH --partition=gpu\n{HOSTILE}",
        "env": {"VALUE": HOSTILE},
        "resources": {
            "time": "5m",
            "components": [
                {"partition": "cpu", "cpus": 1, "memory": "100MiB"},
                {"partition": "gpu", "gpus": "A100:1", "memory": "100MB"},
            ],
        },
    }
    tag, script = rendered(spec, run_dir, tmp_path)
    first, second = options_sbatch_takes(script)
    assert (first["job-name"], first["comment"]) == (tag.job_name, tag.format())
    logs = f"{tmp_path}/runs dir/50%%j 'x' #1/logs"
    assert (first["output"], first["error"]) == (f"{logs}/slurm-%j.out", f"{logs}/slurm-%j.err")
    assert log_paths(run_dir) == (first["output"], first["error"])
    assert (first["partition"], second["partition"]) == ("cpu", "gpu")
    assert (first["mem"], second["mem"]) == ("100", "96")
    assert "gres" not in first
    # How `sbatch -v` echoes the option (recon reads none of this): gres: on 22.05, gres/ on 24.11.
    echoed = {SLURM_22_05: "gres:gpu:a100:1", SLURM_24_11: "gres/gpu:a100:1"}
    assert second["gres"] == echoed[slurm_release()]
    assert first["ignore-pbs"] == "set"
    assert "account" not in first and "account" not in second


def test_rendered_job_runs_and_logs_where_log_files_says(tmp_path: Path) -> None:
    run_dir = tmp_path / 'runs dir/50%j "x" #1'
    spec = {
        "command": 'printf "%s|" "$VALUE" {outputs.result.path} > {outputs.result.path}\n'
        "cat {outputs.result.path}",
        "env": {"VALUE": HOSTILE},
        "outputs": {"result": "out dir/result.txt"},
        "resources": {"partition": "cpu", "time": "2m", "memory": "100MiB"},
    }
    _, script = rendered(spec, run_dir, tmp_path)
    result = subprocess.run(
        ["sbatch", "--parsable", "--wait"],
        input=script,
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=180,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    job_id = result.stdout.strip().split(";")[0]
    out, err = log_files(run_dir, job_id)
    staged = run_dir / "out dir/.recon-staging/result.txt"  # where the command wrote it
    assert out.read_text() == f"{HOSTILE}|{staged}|"
    assert (run_dir / "out dir/result.txt").read_text() == f"{HOSTILE}|{staged}|"  # published
    assert err.read_text() == ""
    assert not (tmp_path / "CANARY").exists()
