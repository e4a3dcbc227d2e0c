"""Job arrays on the real dev cluster, at a size where the cost of observing them shows:
one squeue and one sacct per pass, however many tasks."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.scheduler.base import ArrayRequest, Observation, ObservedJob, SubmitRequest
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.slurm.testing import RecordingRunner
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag
from tests.projects import new_project_name

pytestmark = pytest.mark.slurm

TASKS = 1000
AT_ONCE = 50
TIMEOUT = 120.0


def test_a_thousand_task_array_is_observed_task_by_task_in_one_squeue_and_two_saccts(
    tmp_path: Path,
) -> None:
    recording = RecordingRunner()
    project = new_project_name("arr")
    # One sacct call after the other, as each look below counts them.
    scheduler = SlurmScheduler(recording, project=project, history_at_once=False)
    assert scheduler.max_array_size() > TASKS - 1  # the dev cluster's default, 1001
    tag = Tag(
        project=project,
        deployment="0123456789ab",
        kind="run",
        name="many",
        spec_hash="0123456789abcdef",
    )
    script = (
        "#!/bin/bash\n#SBATCH --partition=cpu\n#SBATCH --time=1\n#SBATCH --mem=10M\n"
        f"#SBATCH --job-name={tag.job_name}\n#SBATCH --comment={tag.format()}\n"
        "#SBATCH --output=/dev/null\ntrue\n"
    )
    since = datetime.now(UTC) - timedelta(seconds=5)
    request = SubmitRequest(
        script=script,
        workdir=tmp_path,
        tag=tag,
        array=ArrayRequest(indices=tuple(range(TASKS)), max_parallel=AT_ONCE),
    )
    array_id = scheduler.submit(request)
    try:

        def look() -> tuple[Observation, ObservedJob]:
            recording.calls.clear()
            observation = scheduler.observe(since)
            assert recording.commands() == ["squeue", "sacct", "sacct"]
            (job,) = observation.find(project, "many")
            assert job.job_id == array_id
            return observation, job

        _, job = look()
        assert len(job.tasks()) == TASKS  # the waiting ones from one compressed range row
        deadline = time.monotonic() + TIMEOUT
        while True:
            observation, job = look()
            tasks = job.tasks()
            # A task that just ended is listed by squeue, or by sacct, or both (sacct for a
            # few seconds under the task's own id, which squeue's %A maps back): never neither.
            assert sorted(tasks) == list(range(TASKS)), observation.problems
            running = sum(task.health is Health.RUNNING for task in tasks.values())
            done = sum(task.health is Health.SUCCEEDED for task in tasks.values())
            assert running <= AT_ONCE
            assert {task.health for task in tasks.values()} <= {
                Health.PENDING,
                Health.RUNNING,
                Health.SUCCEEDED,
            }
            if done >= 200:
                break
            assert time.monotonic() < deadline, f"only {done} tasks done after {TIMEOUT} s"
            time.sleep(1)
    finally:
        scheduler.cancel(array_id)
