"""An upgrade on the real dev cluster from the release before recon read what jobs used
(1c5d019, journal schema 7), run from its own source: a job it ran and settled, and one
it left running, go on with nothing submitted again; `recon cost` back-fills the settled
one's peak memory from sacct (which still holds it), and the running one, settled by
this release, has its own."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.integration.harness import Project
from tests.local.test_code_and_healing import old_release

pytestmark = pytest.mark.slurm

BEFORE_USED = "1c5d019"  # the last commit before what jobs used: journal schema 7
# ~150 MiB resident for the seconds it is told (3 by default), then its output
HOLD = """\
import sys, time
block = bytearray(150 * 1024 * 1024)
for page in range(0, len(block), 4096):
    block[page] = 1
time.sleep(float(sys.argv[2]) if len(sys.argv) > 2 else 3)
open(sys.argv[1], "w").write("held")
"""


def spec(name: str, seconds: str) -> str:
    """A run that holds ~150 MiB of the 500 MiB it asks (the dev cluster enforces it)."""
    return (
        f"kind: Run\nname: {name}\ncommand: python3 scripts/hold.py {{outputs.out.path}}{seconds}\n"
        "resources:\n  cpus: 1\n  memory: 500MiB\noutputs:\n  out: out.txt\n"
    )


def peaks(project: Project) -> dict[str, float | None]:
    """run -> the peak memory (MiB) its journalled usage holds, None without one."""
    with sqlite3.connect(project.root / ".recon/journal.sqlite") as db:
        rows = db.execute("SELECT name, usage FROM submissions ORDER BY id").fetchall()
    return {
        name: None if usage is None else json.loads(usage).get("peak_memory_mb")
        for name, usage in rows
    }


def test_an_upgrade_goes_on_and_back_fills_what_jobs_used_from_sacct(
    project: Project, tmp_path: Path
) -> None:
    old = {"PYTHONPATH": str(old_release(tmp_path, BEFORE_USED))}
    project.repo.commit(
        {
            "scripts/hold.py": HOLD,
            "specs/done.yaml": spec("done", ""),
            "specs/live.yaml": spec("live", " 20"),
        }
    )
    waited = project.recon("apply", ".", "--auto-approve", "--wait", "done", env=old)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    started = project.recon("apply", ".", "--auto-approve", "live", env=old)
    assert started.returncode == 0, started.stdout + started.stderr
    with sqlite3.connect(project.root / ".recon/journal.sqlite") as db:
        assert db.execute("PRAGMA user_version").fetchone() == (7,)
    assert peaks(project) == {"done": None, "live": None}  # the old release read none

    # This release: nothing to do while `live` runs, and `done`'s usage read anew.
    planned = project.recon("plan", ".", "--detailed-exitcode")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    cost = json.loads(project.recon("cost", ".", "--format", "json").stdout)
    assert cost["jobs_backfilled"] == 1
    done = peaks(project)["done"]
    assert done is not None and 150 <= done <= 300

    def settled() -> bool:
        project.apply()
        project.recon("cost", ".")  # reads `live` again should its accounting have lagged
        return peaks(project)["live"] is not None

    project.wait_for("live to end and be settled with what it used", settled)
    live = peaks(project)["live"]
    assert live is not None and 150 <= live <= 300
    jobs = project.jobs()  # each run's one job: nothing was submitted twice
    assert sorted(job["run"] for job in jobs) == ["done", "live"], jobs
