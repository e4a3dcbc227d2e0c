"""A repo with committed symbolic links: validated, planned and applied like any other.

The snapshot a job runs in holds what `git checkout` of the commit holds, links included
as links, wherever they point (absolute, outside the repo, dangling). A `script:` that is
a link is read through it while it leads to a file of the project, and refused with its
file and line when it leads outside or nowhere: such content has no version in the commit.
"""

from __future__ import annotations

import os
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.desired.loader import load_desired, open_source
from reconciler.engine.reconcile import Request, reconcile_once
from reconciler.errors import SpecError
from reconciler.repository.checkout import code_dir
from reconciler.scheduler.local import LocalScheduler
from reconciler.state.paths import run_dir
from tests.gitrepo import GitRepo

LINKS = {
    "data": "/scratch/nowhere/data",  # absolute, as docs/specs.md suggests for big inputs
    "shared": "../shared",  # outside the repo
    "gone": "no-such-file.txt",  # dangling
    "scripts/train.sh": "../common/train.sh",  # inside the repo
}
SCRIPT = '#!/bin/bash\necho trained > "$RECON_OUTPUT_OUT"\n'


def linked_repo(root: Path, script: str = "scripts/train.sh") -> GitRepo:
    repo = GitRepo(root)
    repo.write(
        {
            "recon.yaml": "project: links\nscheduler: local\n",
            "common/train.sh": SCRIPT,
            "specs/train.yaml": (
                f"kind: Run\nname: train\nscript: {script}\nresources: {{cpus: 1}}\n"
                "outputs:\n  out: out.txt\n"
            ),
        }
    )
    for link, target in LINKS.items():
        (root / link).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / link)
    repo.commit()
    return repo


def test_the_snapshot_holds_every_link_as_a_link(tmp_path: Path) -> None:
    repo = linked_repo(tmp_path / "repo")
    commit = repo.git("rev-parse", "HEAD")
    code = code_dir(repo.root, commit, tmp_path / "state")
    for link, target in LINKS.items():
        assert (code / link).is_symlink(), link
        assert os.readlink(code / link) == target
    assert (code / "scripts/train.sh").read_text() == SCRIPT


def test_a_script_link_inside_the_repo_is_read_through(tmp_path: Path) -> None:
    linked = load_desired(open_source(linked_repo(tmp_path / "a").root))
    plain = GitRepo(tmp_path / "b")
    plain.commit(
        {
            "recon.yaml": "project: links\nscheduler: local\n",
            "scripts/train.sh": SCRIPT,
            "specs/train.yaml": (
                "kind: Run\nname: train\nscript: scripts/train.sh\nresources: {cpus: 1}\n"
                "outputs:\n  out: out.txt\n"
            ),
        }
    )
    direct = load_desired(open_source(plain.root))
    assert linked.runs["train"].script_text == SCRIPT
    assert linked.runs["train"].spec_hash == direct.runs["train"].spec_hash


@pytest.mark.parametrize("script", ["data", "shared", "gone"])
def test_a_script_link_leading_outside_or_nowhere_is_refused_with_file_and_line(
    tmp_path: Path, script: str
) -> None:
    repo = linked_repo(tmp_path / "repo", script=script)
    with pytest.raises(SpecError) as raised:
        load_desired(open_source(repo.root))
    (issue,) = raised.value.issues
    assert (issue.file, issue.line, issue.field) == ("specs/train.yaml", 3, "script")
    assert "symbolic link" in issue.message and "point script: at a file" in issue.message


def test_a_repo_with_links_applies_and_its_run_succeeds(tmp_path: Path) -> None:
    repo = linked_repo(tmp_path / "repo")
    scheduler = LocalScheduler(repo.root / ".recon", cpus=1)
    outcome = reconcile_once(Request(repo.root), scheduler=scheduler)
    assert outcome.applied is not None and list(outcome.applied.submitted) == ["train"]
    (job_id,) = outcome.applied.submitted.values()
    try:
        deadline = time.monotonic() + 30
        while not _finished(scheduler, job_id):
            assert time.monotonic() < deadline, "the job did not finish"
            time.sleep(0.2)
    finally:
        scheduler.cancel(job_id)
    desired = load_desired(open_source(repo.root))
    assert (run_dir(desired, desired.runs["train"]) / "out.txt").read_text() == "trained\n"


def _finished(scheduler: LocalScheduler, job_id: str) -> bool:
    seen = scheduler.observe(datetime.now(UTC) - timedelta(hours=1))
    return any(job.job_id == job_id and job.finished for job in seen.jobs)
