"""A journal from the release before endings were a field goes on as it was.

That release told how a job ended by the first words of its journal reason ("timed out:
TimeLimit", "completed without its declared outputs: out", Slurm's
"DependencyNeverSatisfied"); schema 5 keeps it in a column of its own, filled once by the
migration from those words. Here the old release (commit 31da78c, run from its own
source) runs a project whose jobs end in each of those ways on the local backend; the
new recon then opens its journal, migrates it, submits nothing, tells each ending as
before, and a downstream that Slurm cancelled for its upstream's failure runs once that
upstream is fixed (its cancelled job was no attempt: the migrated ending says so).
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.local.test_code_and_healing import ROOT, ok, plan_lines, recon, status
from tests.projects import new_project_name

# The release before endings: journal schema 4, endings in the reason's words.
OLD_RELEASE = "31da78c"

SPECS = """\
kind: Run
name: prep
command: python3 scripts/prep.py {outputs.out.path}
resources: {cpus: 1}
outputs:
  out: data.txt
---
kind: Run
name: train
command: cat {inputs.data.path} > {outputs.out.path}
resources: {cpus: 1}
inputs:
  data: prep.out
outputs:
  out: model.txt
---
kind: Run
name: slow
command: sleep 60
resources: {cpus: 1, time: 2s}
---
kind: Run
name: liar
command: 'true'
resources: {cpus: 1}
outputs:
  out: never.txt
"""
BROKEN_PREP = "raise SystemExit(3)\n"
FIXED_PREP = "import sys\nopen(sys.argv[1], 'w').write('good\\n')\n"


def _old_release(tmp_path: Path) -> Path:
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{OLD_RELEASE}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    if known.returncode != 0:
        pytest.fail(f"this checkout lacks commit {OLD_RELEASE}: clone with history")
    source = tmp_path / "old-release"
    source.mkdir()
    archive = subprocess.run(
        ["git", "archive", OLD_RELEASE, "reconciler"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    return source


def _endings(journal: Path) -> dict[str, tuple[str | None, str | None]]:
    """run -> (final health, ending) of its newest record, read with sqlite3."""
    with sqlite3.connect(journal) as db:
        rows = db.execute("SELECT name, final_health, ending FROM submissions ORDER BY id")
        return {name: (health, ending) for name, health, ending in rows}


def test_a_journal_of_the_release_before_endings_goes_on_with_no_resubmission(
    tmp_path: Path,
) -> None:
    old = _old_release(tmp_path)
    project = GitRepo(tmp_path / "repo")
    name = new_project_name("en")
    project.commit(
        {
            "recon.yaml": f"project: {name}\nscheduler: local\n",
            "specs/p.yaml": SPECS,
            "scripts/prep.py": BROKEN_PREP,
        }
    )
    ok(recon(project, "apply", "--auto-approve", "--wait", source=old), code=1)
    ok(recon(project, "apply", "--auto-approve", source=old))  # settles every ending
    journal = project.root / ".recon/journal.sqlite"
    with sqlite3.connect(journal) as db:
        assert db.execute("PRAGMA user_version").fetchone() == (4,)
        reasons = dict(db.execute("SELECT name, reason FROM submissions"))
    assert reasons["slow"].startswith("timed out")
    assert reasons["liar"].startswith("completed without its declared outputs")
    assert reasons["train"] == "DependencyNeverSatisfied"

    # The new recon: the journal migrates, nothing is submitted, each ending told as before.
    planned = recon(project, "plan", "--detailed-exitcode")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert _endings(journal) == {
        "prep": ("failed", None), "train": ("cancelled", "dependency"),
        "slow": ("failed", "timeout"), "liar": ("failed", "no_outputs"),
    }  # fmt: skip
    rows = status(project)
    assert "job" in rows["slow"]["reason"] and "timed out" in rows["slow"]["reason"]
    assert "completed without its declared outputs: out" in rows["liar"]["reason"]
    assert rows["train"]["health"] == "blocked"
    applied = ok(recon(project, "apply", "--auto-approve"), code=0)
    assert "submitted" not in applied, applied

    # prep fixed: train's cancelled job was no attempt of its own, so it runs after prep.
    project.commit({"scripts/prep.py": FIXED_PREP}, "prep fixed")
    lines = plan_lines(project)
    assert (lines["prep"][0], lines["train"][0]) == ("submit", "submit"), lines
    assert (lines["slow"][0], lines["liar"][0]) == ("no-op", "no-op"), lines
