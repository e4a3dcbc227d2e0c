"""A checkpointing run's batch script, run by a real bash as the batch step would run it:
it asks Slurm for the warning and for no requeue, passes the warning signal and SIGTERM on
to the command, and when the command then exits non-zero leaves the checkpointed marker
and publishes nothing; a command that finishes publishes its outputs once, as any run's."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.desired import DesiredRun, Location, effective_run
from reconciler.desired.models import Defaults, Project, Run
from reconciler.scheduler.render import RenderContext, render_batch_script, required_directories
from reconciler.scheduler.runfolder import checkpointed
from reconciler.scheduler.tag import Tag

HASH = "0123456789abcdef"

# Counts to $N in steps of 50 ms, resuming from the count its checkpoint holds; when
# signalled it saves the count and exits 3 (not done); done, it writes its output.
COUNT = (
    "n=$(cat {checkpoint.path}/n 2>/dev/null || echo 0)\n"
    'echo started >> "$RECON_CHECKPOINT_DIR/starts"\n'
    "trap 'echo $n > {checkpoint.path}/n; exit 3' USR1 TERM\n"
    'while [ "$n" -lt "$N" ]; do n=$((n + 1)); sleep 0.05; done\n'
    "echo $n > {checkpoint.path}/n\n"
    "printf '%s' \"$n\" > {outputs.report.path}\n"
)


def job(tmp_path: Path, command: str = COUNT, **more: Any) -> Path:
    """The batch script of run `count` in `<tmp>/run`, written to `<tmp>/job.sh`, its
    required folders made as apply makes them."""
    project = Project(project="demo", defaults=Defaults())
    spec: dict[str, Any] = {
        "kind": "Run",
        "name": "count",
        "command": command,
        "outputs": {"report": "report.txt"},
        "checkpoint": {"path": "ckpt/", "before_end": "30s"},
    }
    spec.update(more)
    run = DesiredRun(
        effective_run(Run.model_validate(spec), project),
        location=Location("specs/count.yaml", 1),
        spec_hash=HASH,
    )
    tag = Tag(project="demo", deployment="0123456789ab", kind="run", name="count", spec_hash=HASH)
    context = RenderContext("demo", tmp_path, tmp_path / "run", tag)
    for folder in required_directories(run, context):
        folder.mkdir(parents=True, exist_ok=True)
    script = tmp_path / "job.sh"
    script.write_text(render_batch_script(run, context))
    return script


def start(script: Path, job_id: str, count: int) -> subprocess.Popen[bytes]:
    """As slurmstepd starts a batch script: the leader of a process group of its own."""
    env = {"PATH": os.environ["PATH"], "LC_ALL": "C", "N": str(count), "SLURM_JOB_ID": job_id}
    return subprocess.Popen(
        ["bash", str(script)],
        cwd=script.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def warned(script: Path, job_id: str, count: int, signum: int) -> tuple[int, str]:
    """Starts the job, lets it count a while, sends ``signum`` to the script alone (as
    `--signal=B:` does); its exit status and stderr."""
    process = start(script, job_id, count)
    starts = script.parent / "run" / "ckpt" / "starts"
    deadline = time.monotonic() + 10
    while not starts.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.3)
    os.kill(process.pid, signum)
    _, err = process.communicate(timeout=30)
    return process.returncode, err.decode()


def saved(tmp_path: Path) -> int:
    return int((tmp_path / "run" / "ckpt" / "n").read_text())


def test_the_script_asks_for_the_warning_and_no_requeue(tmp_path: Path) -> None:
    text = job(tmp_path).read_text()
    assert "#SBATCH --signal=B:USR1@30\n#SBATCH --no-requeue\n" in text
    assert f"export RECON_CHECKPOINT_DIR={tmp_path}/run/ckpt\n" in text
    assert (tmp_path / "run" / "ckpt").is_dir()  # made before the job starts


@pytest.mark.parametrize("signum", [signal.SIGUSR1, signal.SIGTERM])
def test_a_warned_command_saves_and_the_job_publishes_nothing(tmp_path: Path, signum: int) -> None:
    script = job(tmp_path)
    status, err = warned(script, "7", 10_000, signum)
    run = tmp_path / "run"
    assert status == 3, err
    assert 0 < saved(tmp_path) < 10_000
    assert checkpointed(run, "7").is_file()
    assert "after the warning signal: its checkpoint stays, nothing published" in err
    assert not (run / "report.txt").exists()


def test_the_next_job_resumes_and_publishes_once(tmp_path: Path) -> None:
    script = job(tmp_path)
    status, _ = warned(script, "7", 40, signal.SIGUSR1)
    first = saved(tmp_path)
    assert status == 3 and first < 40
    process = start(script, "8", 40)
    _, err = process.communicate(timeout=30)
    run = tmp_path / "run"
    assert process.returncode == 0, err
    assert (run / "report.txt").read_text() == "40"
    assert (run / "ckpt" / "starts").read_text() == "started\nstarted\n"
    assert not checkpointed(run, "8").exists()
    assert sorted(p.name for p in run.iterdir()) == [".recon-run", "ckpt", "logs", "report.txt"]


def test_a_command_that_finishes_after_the_warning_is_a_success(tmp_path: Path) -> None:
    # It takes the warning, but finishes its work and exits 0: published as any success.
    # The warning reaches every process of the job (a `sleep` it kills, here).
    command = (
        'echo started >> "$RECON_CHECKPOINT_DIR/starts"\n'
        "trap 'echo warned >&2' USR1\nfor i in 1 2 3 4 5 6 7 8; do sleep 0.1 || true; done\n"
    )
    script = job(tmp_path, command + "echo done > {outputs.report.path}\n")
    status, err = warned(script, "9", 0, signal.SIGUSR1)
    assert status == 0, err
    assert "warned" in err
    assert (tmp_path / "run" / "report.txt").read_text() == "done\n"
    assert not checkpointed(tmp_path / "run", "9").exists()


def test_a_failure_without_a_warning_leaves_no_marker(tmp_path: Path) -> None:
    script = job(tmp_path, "exit 2\n")
    process = start(script, "10", 0)
    process.communicate(timeout=30)
    assert process.returncode == 2
    assert not checkpointed(tmp_path / "run", "10").exists()
    assert not (tmp_path / "run" / "report.txt").exists()


def test_an_unstaged_output_is_waited_for_too(tmp_path: Path) -> None:
    # Nothing to publish after it: the command is waited for all the same.
    command = "sleep 0.3; echo in place > {outputs.report.path}\n"
    script = job(tmp_path, command, outputs={"report": {"path": "r", "staged": False}})
    process = start(script, "11", 0)
    process.communicate(timeout=30)
    assert process.returncode == 0
    assert (tmp_path / "run" / "r").read_text() == "in place\n"
