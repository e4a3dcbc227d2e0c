"""Another Unix user's jobs are never recon's, whatever their comment says.

Run as root (containers, CI), sacct lists every user's jobs unless told whose: recon asks
for its own user's. A second user submits jobs whose comments carry this deployment's
exact tags (one for a run the repo holds, one for a run it no longer holds, with prune
on): recon neither adopts, settles nor cancels them.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator

import pytest

from reconciler.scheduler.tag import Tag, deployment_id
from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm

OTHER_USER = "recon-other"


@pytest.fixture
def other_user() -> str:
    """A second Unix user the dev cluster accepts jobs from (made once, kept)."""
    if subprocess.run(["id", OTHER_USER], capture_output=True, check=False).returncode != 0:
        subprocess.run(["useradd", "--no-create-home", OTHER_USER], check=True)
    subprocess.run(
        ["sacctmgr", "-i", "add", "user", OTHER_USER, "account=recon"],
        capture_output=True,
        check=False,
    )  # fmt: skip  (exits 1 when the association exists already)
    return OTHER_USER


@pytest.fixture
def impostors(project: Project, other_user: str) -> Iterator[list[str]]:
    """Two running jobs of the other user, tagged as this project's runs `a` and `gone`."""
    project.repo.commit(
        {"recon.yaml": f"project: {project.name}\nprune: true\ndefaults:\n  partition: cpu\n"
         "  time: 10\n", "specs/a.yaml": run_spec("a", "sleep 60")}
    )  # fmt: skip
    plan = json.loads(project.recon("plan", ".", "--format", "json").stdout)
    (action,) = [a for a in plan["actions"] if a["target"] == "a"]
    deployment = deployment_id(project.root / ".recon")
    tags = [
        Tag(project=project.name, deployment=deployment, kind="run", name=name,
            spec_hash=action["spec_hash"])
        for name in ("a", "gone")
    ]  # fmt: skip
    made = []
    for tag in tags:
        submitted = subprocess.run(
            ["su", other_user, "-s", "/bin/sh", "-c",
             f"cd /tmp && sbatch --parsable -p cpu -t 5 --job-name={tag.job_name} "
             f"--comment={tag.format()} --wrap 'sleep 120'"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        made.append(submitted.stdout.strip())
    try:
        yield made
    finally:
        subprocess.run(["scancel", *made], check=False)


def state_of(job_id: str) -> str:
    return subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, check=False
    ).stdout.strip()


def test_another_users_job_with_our_tag_is_never_adopted_or_cancelled(
    project: Project, impostors: list[str]
) -> None:
    project.wait_for("the other user's jobs to run", lambda: all(
        state_of(job) == "RUNNING" for job in impostors
    ))  # fmt: skip
    planned = project.recon("plan", ".")
    assert planned.returncode == 0, planned.stderr
    assert "= adopt" not in planned.stdout and "- cancel" not in planned.stdout, planned.stdout
    assert "+ submit" in planned.stdout  # run a has no job of ours yet

    applied = project.apply()
    assert "submitted a" in applied.stdout
    assert "adopted job" not in applied.stdout and "cancelled job" not in applied.stdout
    assert [state_of(job) for job in impostors] == ["RUNNING", "RUNNING"]
    status = json.loads(project.recon("status", ".", "--format", "json").stdout)
    assert [row["name"] for row in status] == ["a"]
