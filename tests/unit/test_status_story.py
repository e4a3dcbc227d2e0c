"""`recon status` tells the whole story: why Slurm holds a pending job, and the commit of
a run's last success even when the journal that knew it was lost."""

from __future__ import annotations

import json

import pytest

from reconciler.engine.ledger.status import run_statuses
from reconciler.engine.plan import plan
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from tests.cli import recon
from tests.gitrepo import GitRepo
from tests.planning import NOW, desired, hash_of, job, observed, record, run


@pytest.mark.parametrize(
    ("state", "reason", "waiting_for"),
    [
        (S.PENDING, "JobHeldAdmin", "JobHeldAdmin"),
        (S.PENDING, "Dependency", "Dependency"),
        # Slurm's `None` arrives as None: read so where it is parsed (test_slurm_parse)
        (S.PENDING, None, None),
        (S.RUNNING, None, None),
    ],
)
def test_a_pending_job_says_why_slurm_holds_it(
    state: S, reason: str | None, waiting_for: str | None
) -> None:
    wanted = desired(run("prep"))
    digest = hash_of(wanted, "prep")
    jobs = observed(job("prep", digest, state, "10", reason=reason))
    records = [record("prep", digest, "10")]
    current = plan(wanted, jobs, records, NOW, scheduler="slurm")
    (row,) = run_statuses(wanted, current, jobs, records)
    assert row.health is (Health.PENDING if state is S.PENDING else Health.RUNNING)
    assert row.waiting_for == waiting_for


def test_an_adopted_run_keeps_the_commit_of_its_last_success(
    repo: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    head = repo.commit(
        {
            "recon.yaml": "project: demo\nscheduler: local\n",
            "specs/a.yaml": "kind: Run\nname: hello\ncommand: echo hi > {outputs.out.path}\n"
            "outputs:\n  out: out.txt\n",
        }
    )
    root = str(repo.root)
    assert recon(capsys, "apply", root, "--auto-approve", "--wait").code == 0
    for journal in (repo.root / ".recon").glob("journal*"):
        journal.unlink()  # lost: the next apply adopts the job, knowing no commit for it
    adopted = recon(capsys, "apply", root, "--auto-approve")
    assert "adopted job 1" in adopted.out, adopted
    (row,) = json.loads(recon(capsys, "status", root, "--format", "json").out)
    assert (row["health"], row["last_success_commit"]) == ("succeeded", head)
