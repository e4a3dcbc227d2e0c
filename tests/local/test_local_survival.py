"""Local jobs outlive recon, and two recon processes can share one state directory."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import Harness, final

# A recon-like process: submits `count` jobs (each after the one before when `chained`),
# says their ids, then waits to be killed.
SUBMITTER = """
import sys, time
from pathlib import Path
from reconciler.scheduler.base import SubmitRequest
from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.tag import Tag

state, work, project, count, chained, body = sys.argv[1:]
scheduler = LocalScheduler(Path(state), cpus=2)
previous = ()
for index in range(int(count)):
    name = f"job{index}-{project}"
    tag = Tag(project=project, deployment="0123456789ab", kind="run", name=f"job{index}",
              spec_hash="0123456789abcdef")
    script = f"#!/bin/bash\\n#SBATCH --output={work}/{name}-%j.out\\n{body}\\n"
    request = SubmitRequest(script=script, workdir=Path(work), dependencies=previous, tag=tag)
    job_id = scheduler.submit(request)
    previous = (job_id,) if chained == "yes" else ()
    print(job_id, flush=True)
print("submitted", flush=True)
time.sleep(300)
"""


def submitter(
    tmp_path: Path, project: str, count: int, body: str, *, chained: bool
) -> subprocess.Popen[str]:
    state, work = tmp_path / "state", tmp_path / "work"
    work.mkdir(exist_ok=True)
    mode = "yes" if chained else "no"
    return subprocess.Popen(
        [sys.executable, "-c", SUBMITTER, str(state), str(work), project, str(count), mode, body],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group, as a recon run in a terminal has
    )


def submitted_ids(process: subprocess.Popen[str]) -> list[str]:
    assert process.stdout is not None
    ids: list[str] = []
    for line in process.stdout:
        if line.strip() == "submitted":
            return ids
        ids.append(line.strip())
    raise AssertionError(f"the submitter ended early ({process.wait()})")


def test_jobs_outlive_a_killed_recon_and_a_new_scheduler_sees_them_end(tmp_path: Path) -> None:
    process = submitter(tmp_path, "survivor", 2, 'sleep 2; echo "ran $SLURM_JOB_ID"', chained=True)
    upstream, downstream = submitted_ids(process)
    # What a closed terminal or a kill of the whole recon process group does.
    os.killpg(process.pid, signal.SIGKILL)
    assert process.wait() == -signal.SIGKILL

    harness = Harness(LocalScheduler(tmp_path / "state", cpus=2), tmp_path / "work")
    harness.project = "survivor"
    running = harness.job("job0")
    assert running is not None and running.health is Health.RUNNING
    waiting = harness.job("job1")
    assert waiting is not None and waiting.components[0].reason == "Dependency"

    first, second = harness.wait("job0", final), harness.wait("job1", final)
    assert [first.job_id, second.job_id] == [upstream, downstream]
    assert [first.components[0].state, second.components[0].state] == [SlurmState.COMPLETED] * 2
    # The dependent was started by the upstream's supervisor: nobody else was there.
    first_end, second_start = first.components[0].end, second.components[0].start
    assert first_end is not None and second_start is not None and second_start >= first_end
    logs = sorted(path.read_text() for path in (tmp_path / "work").glob("*.out"))
    assert logs == [f"ran {upstream}\n", f"ran {downstream}\n"]


def test_two_processes_submitting_at_once_get_distinct_ids(tmp_path: Path) -> None:
    processes = [submitter(tmp_path, name, 15, "true", chained=False) for name in ("left", "right")]
    try:
        ids = [job_id for process in processes for job_id in submitted_ids(process)]
    finally:
        for process in processes:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    assert sorted(map(int, ids)) == list(range(1, 31))
    harness = Harness(LocalScheduler(tmp_path / "state", cpus=2), tmp_path / "work")
    harness.project = "right"
    last = harness.wait("job14", final)
    assert last.health is Health.SUCCEEDED
