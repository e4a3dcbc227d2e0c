"""An upgrade from the release before staged outputs (its jobs wrote their outputs in
place), run from its own source, to this one, on the local backend: nothing it ran is
submitted again (whether an output is staged is no part of the spec hash), a job it
submitted that ends after the upgrade is settled as it wrote its outputs, and the first
rerun under this release stages and publishes them."""

from __future__ import annotations

from pathlib import Path

from tests.gitrepo import GitRepo
from tests.local.test_code_and_healing import ok, old_release, recon
from tests.local.test_engine import cancel_all
from tests.local.test_staged_outputs import MAKE, READ, published
from tests.local.test_sweeps import submitted
from tests.local.test_upgrade_run_folder import LATE, ended, project

__all__ = ["project"]  # the fixture

# The last commit before outputs were staged.
BEFORE_STAGING = "2532e44"


def test_an_upgrade_resubmits_nothing_and_the_next_rerun_is_staged(
    project: GitRepo, tmp_path: Path
) -> None:
    old = old_release(tmp_path, BEFORE_STAGING)
    project.commit({"specs/make.yaml": MAKE.replace("VERSION", "v1"), "specs/read.yaml": READ})
    try:
        ok(recon(project, "apply", "--auto-approve", "--wait", source=old))
        project.commit({"specs/late.yaml": LATE})
        assert "submitted late" in ok(recon(project, "apply", "--auto-approve", source=old))
        late = (project.root / "runs" / "late" / "late.txt").parent
        ended(project)

        done = ok(recon(project, "apply", "--auto-approve"))  # this release: settles late
        assert not submitted(done), done
        planned = recon(project, "plan", "--detailed-exitcode")
        assert planned.returncode == 0, planned.stdout + planned.stderr
        assert (late / "late.txt").read_text() == "late\n"

        before = published(project.root)
        ok(recon(project, "apply", "--auto-approve", "--wait", "--replace", "make"))
        after = published(project.root)
        assert {content for content, _, _ in after.values()} == {b"v1"}
        assert {ino for _, ino, _ in after.values()}.isdisjoint(
            ino for _, ino, _ in before.values()
        )
        assert not (project.root / "runs" / "make" / ".recon-staging").exists()
    finally:
        cancel_all(project)
