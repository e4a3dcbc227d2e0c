"""An upgrade from the release before recon read what jobs used (journal schema 7, its
usage without peak memory or CPU time), run from its own source, to this one, on the
local backend: nothing it ran is submitted again, a job it submitted that ends after the
upgrade is settled, `recon cost` back-fills the usage it journalled (read anew, whole,
once), and the jobs this release runs carry their peak memory and CPU time, from which
`recon cost` suggests sizes."""

from __future__ import annotations

import json
import sqlite3
import time
from pathlib import Path

from tests.gitrepo import GitRepo
from tests.local.test_code_and_healing import ok, old_release, recon
from tests.local.test_engine import cancel_all
from tests.local.test_upgrade_run_folder import DONE, LIVE, project

__all__ = ["project"]  # the fixture

# The last commit before recon read what jobs used: journal schema 7.
BEFORE_USED = "1c5d019"

# ~64 MiB written and a moment of CPU, three seeds: enough successes for a suggestion
HUNGRY = """\
kind: Run
name: hungry
resources: {cpus: 1, memory: 1GiB}
matrix:
  seed: [0, 1, 2]
command: python3 -c "b = b'x' * (64 * 2**20)" && echo {matrix.seed} > {outputs.out.path}
outputs:
  out: out.txt
"""


def _records(journal: Path) -> dict[str, tuple[str | None, int, str | None]]:
    """run -> (final health, used_read, usage JSON) of its newest record, read with sqlite3."""
    with sqlite3.connect(journal) as db:
        rows = db.execute("SELECT name, final_health, used_read, usage FROM submissions")
        return {name: (health, used, usage) for name, health, used, usage in rows}


def test_an_upgrade_resubmits_nothing_and_back_fills_usage_once(
    project: GitRepo, tmp_path: Path
) -> None:
    old = old_release(tmp_path, BEFORE_USED)
    project.commit({"specs/done.yaml": DONE, "specs/live.yaml": LIVE})
    journal = project.root / ".recon/journal.sqlite"
    try:
        ok(recon(project, "apply", "--auto-approve", "done", source=old))
        ok(recon(project, "apply", "--auto-approve", "--wait", "done", source=old))
        ok(recon(project, "apply", "--auto-approve", "live", source=old))  # left running
        with sqlite3.connect(journal) as db:
            assert db.execute("PRAGMA user_version").fetchone() == (7,)
            (old_usage,) = db.execute("SELECT usage FROM submissions WHERE name = 'done'")
        assert old_usage[0] is not None and "peak_memory_mb" not in old_usage[0]

        # This release: nothing to do while `live` runs.
        planned = recon(project, "plan", "--detailed-exitcode")
        assert planned.returncode == 0, planned.stdout + planned.stderr

        # recon cost migrates the journal to schema 8 and reads `done`'s usage anew, once
        # (the local store's record of it, written by the old release's supervisor, holds
        # no peak: none is made up).
        cost = json.loads(ok(recon(project, "cost", "--format", "json")))
        assert cost["jobs_backfilled"] == 1 and cost["jobs_without_usage"] == 0
        health, used_read, usage = _records(journal)["done"]
        assert (health, used_read) == ("succeeded", 1)
        assert usage is not None and json.loads(usage)["peak_memory_mb"] is None
        again = json.loads(ok(recon(project, "cost", "--format", "json")))
        assert again["jobs_backfilled"] == 0

        # `live`, submitted by the old release, ends after the upgrade: settled, not rerun.
        deadline = time.monotonic() + 60
        while _records(journal)["live"][0] is None and time.monotonic() < deadline:
            applied = ok(recon(project, "apply", "--auto-approve"))
            assert "submit" not in applied, applied
            time.sleep(1)
        # its supervisor, the old release's, measured nothing: read again by recon cost
        assert _records(journal)["live"][:2] == ("succeeded", 0)
        after = json.loads(ok(recon(project, "cost", "--format", "json")))
        assert after["jobs_backfilled"] == 1 and _records(journal)["live"][1] == 1
        with sqlite3.connect(journal) as db:
            (count,) = db.execute("SELECT count(*) FROM submissions").fetchone()
        assert count == 2

        # This release's own jobs carry what they used, and three successes are sized.
        project.commit({"specs/hungry.yaml": HUNGRY}, "hungry")
        ok(recon(project, "apply", "--auto-approve", "--wait"))
        ok(recon(project, "apply", "--auto-approve"))
        sizes = json.loads(ok(recon(project, "cost", "--format", "json")))["sizes"]
        hungry = sizes["sweeps"]["hungry"]
        memory = hungry["memory_mib_per_node"]
        assert hungry["jobs"] == 3 and 64 <= memory["needed"] <= 200
        assert (memory["held"], memory["change"]) == (1024.0, "lower")
        assert hungry["cpus"]["needed"] > 0
    finally:
        cancel_all(project)
