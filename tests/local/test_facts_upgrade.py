"""An upgrade from the release before facts journalled when they happen (journal schema
10), run from its own source, on the local backend: a run it left skipped (its record
told so by its reason's words alone) and a job it left running. This release resubmits
nothing, loses no record, reads the skip as a skip (``EndingKind.SKIPPED``), and names
in the manifest of the job it settles the script rendered again (its intent journalled
no digest), which is the one that release sent; a job it submits itself has its script's
digest and options journalled with the intent."""

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
from tests.local.test_upgrade_run_folder import LIVE, project

__all__ = ["project"]  # the fixture

# The last commit before facts journalled when they happen: journal schema 10.
BEFORE_FACTS = "6ac09af"

PREP = """\
kind: Run
name: prep
resources: {{cpus: 1, time: "{time}"}}
command: echo data > {{outputs.out.path}}
outputs:
  out: {{path: data.txt, hash: content}}
"""
TRAIN = """\
kind: Run
name: train
resources: {cpus: 1}
inputs:
  data: prep.out
command: cat {inputs.data.path} > {outputs.out.path}
outputs:
  out: model.txt
"""

Row = tuple[int, str, str | None, str | None, str | None, str | None, str | None]


def _rows(journal: Path) -> list[Row]:
    with sqlite3.connect(journal) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        columns = "name, job_id, final_health, reason, ending"
        if version >= 11:
            columns += ", script_sha256"
        rows = db.execute(f"SELECT {columns} FROM submissions ORDER BY id").fetchall()
    return [(version, *row, *((None,) if version < 11 else ())) for row in rows]


def _sent(project: GitRepo, job_id: str) -> str:
    """The sha256 of the script the local backend was given for ``job_id``."""
    script = project.root / ".recon/local/jobs" / job_id / "script"
    return hashlib.sha256(script.read_bytes()).hexdigest()


def _manifest(project: GitRepo, run: str) -> dict[str, str]:
    path = project.root / "runs" / run / ".recon-run" / "manifest.json"
    made: dict[str, str] = json.loads(path.read_text())
    return made


def test_an_upgrade_from_schema_10_reads_its_skips_as_skips_and_resubmits_nothing(
    project: GitRepo, tmp_path: Path
) -> None:
    old = old_release(tmp_path, BEFORE_FACTS)
    project.commit({"specs/prep.yaml": PREP.format(time="00:10:00"), "specs/train.yaml": TRAIN})
    journal = project.root / ".recon/journal.sqlite"
    try:
        ok(recon(project, "apply", "--auto-approve", "--wait", source=old))
        # prep's spec changes, its output does not: train's new job skips its command
        project.commit({"specs/prep.yaml": PREP.format(time="00:11:00")})
        ok(recon(project, "apply", "--auto-approve", "--wait", source=old))
        project.commit({"specs/live.yaml": LIVE})
        ok(recon(project, "apply", "--auto-approve", "live", source=old))  # left running
        before = _rows(journal)
        assert {row[0] for row in before} == {10}
        skipped = before[3]
        assert skipped[1:6] == (
            "train",
            skipped[2],
            "succeeded",
            "skipped: inputs unchanged",
            None,
        ), before  # the old release's skip: words alone
        assert [row[1] for row in before] == ["prep", "train", "prep", "train", "live"]

        planned = recon(project, "plan", "--detailed-exitcode")
        assert planned.returncode == 0, planned.stdout + planned.stderr
        deadline = time.monotonic() + 60
        while _rows(journal)[-1][3] is None and time.monotonic() < deadline:
            applied = ok(recon(project, "apply", "--auto-approve"))
            assert "submit" not in applied, applied
            time.sleep(1)
        after = _rows(journal)
        assert {row[0] for row in after} == {SCHEMA_VERSION}
        # every record kept, none added; the skip is one now, nothing else is
        assert [row[1:4] for row in after] == [(*row[1:3], "succeeded") for row in before]
        assert [row[5] for row in after] == [None, None, None, "skipped", None]
        assert {row[6] for row in after} == {None}  # no digest: journalled by no intent
        # The live job's manifest: its script rendered again, the bytes it was sent.
        live = _manifest(project, "live")
        assert live["script_sha256"] == _sent(project, live["job_id"])
        shown = {
            row["name"]: row for row in json.loads(ok(recon(project, "status", "--format", "json")))
        }
        assert shown["train"]["how"] == "skipped: inputs unchanged"

        # A job this release submits: its digest journalled with its intent, and named.
        project.commit({"specs/live.yaml": LIVE.replace("sleep 4", "sleep 1")})
        ok(recon(project, "apply", "--auto-approve", "--wait"))
        last = _rows(journal)[-1]
        live = _manifest(project, "live")
        assert last[1:3] == ("live", live["job_id"])
        assert last[6] == live["script_sha256"] == _sent(project, live["job_id"])
        again = recon(project, "plan", "--detailed-exitcode")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        cancel_all(project)
