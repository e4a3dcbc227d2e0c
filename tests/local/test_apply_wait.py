"""`recon apply --wait` ends, always, and applies only the plan it showed: a commit made
while it waits is reported, never carried out (on the local backend; the refusals that
end it are tested where they happen, e.g. test_staged_outputs)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from reconciler.scheduler.local import LocalScheduler
from tests.docs import matches, shown_block
from tests.gitrepo import GitRepo
from tests.local.serving import environment
from tests.local.test_cascade import jobs
from tests.projects import new_project_name

SLOW = """kind: Run
name: slow
command: sleep 4 && echo done > {outputs.out.path}
outputs: {out: out.txt}
"""
# docs/cli.md shows the line.
MOVED = "docs/cli.md: HEAD moved to 3f1c0e9a7b21: not applied; run `recon apply` a"
EXTRA = SLOW.replace("name: slow", "name: extra").replace("sleep 4 && ", "")


def test_a_commit_made_while_waiting_is_reported_not_applied(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "waits")
    approved = repo.commit(
        {
            "recon.yaml": f"project: {new_project_name('waits')}\nscheduler: local\n"
            "specs: ['specs/*.yaml']\ndefaults: {environment: {}}\n",
            "specs/slow.yaml": SLOW,
        }
    )
    waiting = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "apply", ".", "--auto-approve", "--wait"],
        cwd=repo.root, env=environment(repo.root), stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        assert waiting.stdout is not None
        for line in waiting.stdout:
            if line.startswith("submitted slow"):
                break
        head = repo.commit({"specs/extra.yaml": EXTRA}, message="a run added meanwhile")
        out, err = waiting.communicate(timeout=90)
    finally:
        if waiting.poll() is None:
            waiting.kill()
        backend = LocalScheduler(repo.root / ".recon")
        for job_id, job in jobs(repo.root).items():
            if "ended" not in job:
                backend.cancel(str(job_id))
    assert waiting.returncode == 0, out + err
    # (A note may come first: the new file was in the work tree, not yet committed, as
    # the first pass ended.)
    assert err.splitlines()[-1] == (
        f"HEAD moved to {head[:12]}: not applied; run `recon apply` again (this wait "
        f"follows {approved[:12]}, the plan it showed, and carries out nothing more)"
    ), err
    assert matches(err.splitlines()[-1] + "\n", shown_block(MOVED).body)
    assert out.splitlines()[-1] == "All runs done."
    submitted = [json.dumps(job) for job in jobs(repo.root).values()]
    assert len(submitted) == 1 and "slow" in submitted[0], submitted
    assert (repo.root / "runs" / "slow" / "out.txt").read_text() == "done\n"
