"""`recon watch` on the local backend passes when its plan next needs a look: a running
job's time limit comes long before the interval, and the watch looks then."""

from __future__ import annotations

import re
import time
from datetime import datetime
from pathlib import Path

from tests.docs import JOB_ID, Watched, idle_pass, in_order, shown_block, watch_lines
from tests.gitrepo import GitRepo

PROJECT = "project: looked\nscheduler: local\n"
SLOW = "kind: Run\nname: slow\ncommand: sleep 300\nretries: 0\nresources:\n  time: '0:00:08'\n"


DELAY = re.compile(r"\bdelay=[0-9.]+")


def as_shown(text: str, root: Path) -> list[str]:
    """Log lines as the doc shows them: times, commits, folder, job ids and delay masked."""
    return [DELAY.sub("delay=D", JOB_ID.sub(r"\1N", line)) for line in watch_lines(text, root)]


def test_a_watch_looks_again_when_a_running_job_reaches_its_time_limit(tmp_path: Path) -> None:
    shown = shown_block(
        "docs/operations.md: 2026-12-02T13:54:40.664+00:00 INFO    started commit=4a1e83c"
    )
    repo = GitRepo(tmp_path / "looked")
    repo.commit({"recon.yaml": PROJECT, "specs/slow.yaml": SLOW})
    with Watched(repo.root, ".", "--interval", "2m") as watch:
        watch.until(lambda line: " submitted " in line and "run=slow" in line)
        watch.until(lambda line: " pass " in line)
        # A commit that changes no run: its pass sees the job running, 8 s to live.
        repo.commit({"NOTES.md": "nothing to run\n"}, message="notes")
        told = watch.until(lambda line: " next-look " in line)
        told_at = time.monotonic()
        looked = watch.until(lambda line: " pass " in line and "trigger=look" in line)
        waited = time.monotonic() - told_at
        assert watch.stop() == 0, watch.lines

    assert "kind=time-limit target=slow" in told, told
    assert "reaches its time limit" in told, told
    delay = float(re.search(r" delay=([\d.]+)", told)[1])  # type: ignore[index]
    assert 0 < delay <= 8, told
    assert waited < 30, watch.lines  # at the limit, not after the 2 minute interval
    at = datetime.fromisoformat(re.search(r" at=(\S+)", told)[1])  # type: ignore[index]
    passed = datetime.fromisoformat(looked.split()[0])
    assert passed >= at, (told, looked)
    # By then the job has timed out: the run failed, with no retries left.
    assert "planned_no-op=1" in looked, looked
    printed = as_shown("".join(watch.lines), repo.root)
    problem = in_order(printed, as_shown(shown.body, Path("/none")), idle_pass)
    assert problem is None, f"{shown.where}: the watch {problem}"
