"""An upgrade from the release before renames (journal schema 8), run from its own
source, to this one, on the local backend: nothing it ran is submitted again, its
journal goes on at schema 9, and a run it submitted, renamed while its job runs, is
moved and its job adopted."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from reconciler.state.journal import SCHEMA_VERSION
from tests.gitrepo import GitRepo
from tests.local.test_code_and_healing import ok, old_release, recon
from tests.local.test_engine import cancel_all, local_jobs
from tests.local.test_upgrade_run_folder import DONE, project

__all__ = ["project"]  # the fixture

# The last commit before renames: journal schema 8.
BEFORE_RENAMES = "fc11902"

LIVE = """\
kind: Run
name: {name}
{renamed}resources: {{cpus: 1}}
command: sleep 4; echo live > {{outputs.out.path}}
outputs:
  out: live.txt
"""


def test_an_upgrade_resubmits_nothing_and_moves_a_run_renamed_while_it_runs(
    project: GitRepo, tmp_path: Path
) -> None:
    old = old_release(tmp_path, BEFORE_RENAMES)
    project.commit(
        {"specs/done.yaml": DONE, "specs/live.yaml": LIVE.format(name="live", renamed="")}
    )
    journal = project.root / ".recon/journal.sqlite"
    try:
        ok(recon(project, "apply", "--auto-approve", "--wait", "done", source=old))
        ok(recon(project, "apply", "--auto-approve", "live", source=old))  # left running
        with sqlite3.connect(journal) as db:
            assert db.execute("PRAGMA user_version").fetchone() == (8,)
        jobs = {job["id"] for job in local_jobs(project)}

        planned = recon(project, "plan", "--detailed-exitcode")
        assert planned.returncode == 0, planned.stdout + planned.stderr
        renamed = LIVE.format(name="alive", renamed="renamed_from: live\n")
        project.commit({"specs/live.yaml": renamed})
        moved = ok(recon(project, "apply", "--auto-approve"))
        assert "moved live -> alive" in moved and "\nsubmitted " not in moved, moved
        waited = ok(recon(project, "apply", "--auto-approve", "--wait"))
        assert "\nsubmitted " not in waited, waited
        assert {job["id"] for job in local_jobs(project)} == jobs  # nothing submitted again
        with sqlite3.connect(journal) as db:
            assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
        assert (project.root / "runs/alive/live.txt").read_text() == "live\n"
        status = ok(recon(project, "status"))
        assert "alive  current  succeeded" in status and "done   current  succeeded" in status
    finally:
        cancel_all(project)
