"""Resources raised on retry on the local backend, and the journal's schema 10 that
records them:

- an upgrade from the release before it (journal schema 8), run from its own source:
  nothing it ran is submitted again, and a job it left running is settled;
- a run whose job ends OUT_OF_MEMORY (the local backend enforces `--mem`) is retried with
  twice the memory and succeeds; plan and status say the raised value, the journal and
  the manifest keep it, and a later plan has nothing to do."""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path

from reconciler.state.journal import SCHEMA_VERSION
from tests.gitrepo import GitRepo
from tests.local.test_code_and_healing import ok, old_release, recon
from tests.local.test_engine import cancel_all
from tests.local.test_upgrade_run_folder import DONE, LIVE, project

__all__ = ["project"]  # the fixture

# The last commit before resources raised on retry: journal schema 8.
BEFORE_RAISES = "7c22daf"

# 300 MiB written (resident) under a 200 MiB limit: out of memory; 400 MiB holds it.
HUNGRY = """\
kind: Run
name: hungry
resources: {cpus: 1, memory: 200MiB}
retries: {out_of_memory: 1}
on_oom: {memory: x2, max: 1GiB}
command: >-
  python3 -c "import time; b = b'x' * (300 << 20); time.sleep(2)"
  && echo ok > {outputs.out.path}
outputs:
  out: out.txt
"""


def _rows(journal: Path) -> list[tuple[str, str | None, str | None, str | None]]:
    with sqlite3.connect(journal) as db:
        rows = db.execute("SELECT name, final_health, ending, raised FROM submissions ORDER BY id")
        return [tuple(row) for row in rows]


def test_an_upgrade_from_schema_8_resubmits_nothing(project: GitRepo, tmp_path: Path) -> None:
    old = old_release(tmp_path, BEFORE_RAISES)
    project.commit({"specs/done.yaml": DONE, "specs/live.yaml": LIVE})
    journal = project.root / ".recon/journal.sqlite"
    try:
        ok(recon(project, "apply", "--auto-approve", "--wait", "done", source=old))
        ok(recon(project, "apply", "--auto-approve", "live", source=old))  # left running
        with sqlite3.connect(journal) as db:
            assert db.execute("PRAGMA user_version").fetchone() == (8,)
        planned = recon(project, "plan", "--detailed-exitcode")
        assert planned.returncode == 0, planned.stdout + planned.stderr
        deadline = time.monotonic() + 60
        while _rows(journal)[-1][1] is None and time.monotonic() < deadline:
            applied = ok(recon(project, "apply", "--auto-approve"))
            assert "submit" not in applied, applied
            time.sleep(1)
        assert [row[:2] for row in _rows(journal)] == [("done", "succeeded"), ("live", "succeeded")]
        with sqlite3.connect(journal) as db:
            assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert [row[3] for row in _rows(journal)] == [None, None]
    finally:
        cancel_all(project)


def test_out_of_memory_is_retried_with_twice_the_memory(project: GitRepo) -> None:
    project.commit({"specs/hungry.yaml": HUNGRY})
    journal = project.root / ".recon/journal.sqlite"
    try:
        ok(recon(project, "apply", "--auto-approve"))
        deadline = time.monotonic() + 90
        while _rows(journal)[-1][1] is None and time.monotonic() < deadline:
            time.sleep(1)
            planned = recon(project, "plan")
        assert "retry with memory 400MiB (x2 after out of memory)" in planned.stdout, planned
        ok(recon(project, "apply", "--auto-approve", "--wait"))
        assert (project.root / "runs/hungry/out.txt").read_text() == "ok\n"
        rows = _rows(journal)
        assert [row[1:3] for row in rows] == [("failed", "out_of_memory"), ("succeeded", None)]
        assert rows[0][3] is None and json.loads(rows[1][3] or "{}") == {
            "memory_mb": 400, "time_s": None
        }  # fmt: skip
        shown = json.loads(ok(recon(project, "status", "--format", "json")))
        assert shown[0]["how"] == "with memory 400MiB, raised", shown
        manifest = json.loads((project.root / "runs/hungry/.recon-run/manifest.json").read_text())
        assert manifest["raised"] == {"memory_mb": 400, "time_s": None}
        # the digest of the script the retry ran, which asked for the raised memory
        job_id = manifest["job_id"]
        ran = (project.root / ".recon/local/jobs" / job_id / "script").read_bytes()
        assert b"--mem=400M" in ran
        assert manifest["script_sha256"] == hashlib.sha256(ran).hexdigest()
        again = recon(project, "plan", "--detailed-exitcode")
        assert again.returncode == 0 and "No changes" in again.stdout, again.stdout
    finally:
        cancel_all(project)
