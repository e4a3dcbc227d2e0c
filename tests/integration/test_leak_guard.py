"""The session's last step finds jobs a test left queued or running (tests/conftest.py)."""

from __future__ import annotations

import subprocess
import time
from datetime import datetime, timedelta

import pytest

from reconciler.scheduler.tag import Tag
from tests.conftest import leaked_jobs
from tests.projects import new_project_name

pytestmark = pytest.mark.slurm


def test_a_job_left_running_by_a_test_project_is_found_and_others_are_not() -> None:
    since = datetime.now().replace(microsecond=0) - timedelta(seconds=1)
    ours = Tag(project=new_project_name("lk"), deployment="0123456789ab", kind="run",
               name="left", spec_hash="0123456789abcdef")  # fmt: skip
    theirs = ours.model_copy(update={"project": "not-a-test-project"})
    made = [
        subprocess.run(
            ["sbatch", "--parsable", "-p", "cpu", "-t", "5", f"--comment={tag.format()}",
             "--wrap", "sleep 120"],
            capture_output=True, text=True, check=True,
        ).stdout.strip()
        for tag in (ours, theirs)
    ]  # fmt: skip
    try:
        found = leaked_jobs(since)  # other tests of this session may have jobs left too
        assert (made[0], ours.format()) in found
        assert all(tag != theirs.format() for _, tag in found)
    finally:
        subprocess.run(["scancel", *made], check=True)
    deadline = time.monotonic() + 30
    while (made[0], ours.format()) in leaked_jobs(since):
        assert time.monotonic() < deadline
        time.sleep(0.5)
