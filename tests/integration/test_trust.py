"""On the dev cluster: a plan saved by `recon plan` is the plan `recon apply` carries out,
and a repo with committed symbolic links applies and runs.

A saved plan is refused as stale when the plan apply makes differs from it, so applying
`recon plan --out` right after it proves the two agree, here for a job that completed
without its declared output (plan and apply once judged it differently: plan saw a
success with a missing output, apply a failure).
"""

from __future__ import annotations

import json
import os

import pytest

from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm


def test_a_saved_plan_after_a_job_completed_without_its_output_applies_as_shown(
    project: Project,
) -> None:
    project.repo.commit(
        {"specs/a.yaml": run_spec("a", "true", extra="retries: 1\n")}  # never writes out.txt
    )
    project.apply()
    saved = project.root.parent / "a.plan"

    def judged() -> dict[str, str]:
        # Until accounting agrees the job has ended, both plan and apply wait for it.
        planned = project.recon("plan", ".", "--out", str(saved), "--format", "json")
        assert planned.returncode == 0, planned.stderr
        (action,) = [a for a in json.loads(planned.stdout)["actions"] if a["target"] == "a"]
        return dict(action)

    project.wait_for("the plan to judge the job", lambda: judged()["kind"] != "no-op")
    action = judged()
    assert action["kind"] == "retry", action
    assert "completed without its declared outputs" in action["reason"], action
    applied = project.recon("apply", str(saved), "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "submitted a: job" in applied.stdout


def test_a_repo_with_symlinks_applies_and_its_linked_script_runs(project: Project) -> None:
    script = '#!/bin/bash\necho linked > "$RECON_OUTPUT_OUT"\n'
    project.repo.write(
        {
            "common/job.sh": script,
            "specs/a.yaml": "kind: Run\nname: a\nscript: scripts/job.sh\n"
            "resources: {cpus: 1, memory: 100MiB}\noutputs:\n  out: out.txt\n",
        }
    )
    (project.root / "scripts").mkdir()
    os.symlink("../common/job.sh", project.root / "scripts" / "job.sh")
    os.symlink("/scratch/nowhere", project.root / "data")  # absolute, dangling here
    os.symlink("../shared", project.root / "shared")  # outside the repo
    project.repo.commit()
    project.apply()
    output = project.root / "runs" / "a" / "out.txt"
    project.wait_for("the output", output.exists)
    assert output.read_text() == "linked\n"
