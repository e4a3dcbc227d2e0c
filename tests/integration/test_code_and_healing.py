"""Code is part of a run, and failures heal when their cause is fixed, on the real dev
cluster: a script the command calls, edited and committed, reruns its run; a downstream
that failed on its upstream's bad data is tried again once the upstream is fixed,
without --replace; a run whose jobs recon replaced and pruned is not `failed`."""

from __future__ import annotations

import json
import re

import pytest

from tests.integration.harness import Project

pytestmark = pytest.mark.slurm

RESOURCES = "resources: {cpus: 1, memory: 100MiB}\n"
PIPELINE = (
    "kind: Run\nname: prep\ncommand: python3 scripts/prep.py {outputs.out.path}\n"
    + RESOURCES
    + "outputs:\n  out: data.txt\n---\n"
    "kind: Run\nname: train\n"
    "command: python3 scripts/train.py {inputs.data.path} {outputs.out.path}\n"
    + RESOURCES
    + "inputs:\n  data: prep.out\noutputs:\n  out: model.txt\n"
)
PREP = (
    "import sys\nbad = '--bad' in sys.argv\n"
    "open(sys.argv[-1], 'w').write('bad\\n' if bad else 'good\\n')\n"
)
TRAIN = (
    "import sys\ndata = open(sys.argv[1]).read()\n"
    "if data != 'good\\n':\n    sys.exit(f'bad data: {data!r}')\n"
    "open(sys.argv[2], 'w').write('model v1\\n')\n"
)
PLAN_LINE = re.compile(r"^ +(?:[-+=~!/]+ +)?(\S+) +(\S+) +(.*)$")


def settle(project: Project, code: int = 0) -> str:
    result = project.recon("apply", ".", "--auto-approve", "--wait")
    assert result.returncode == code, result.stdout + result.stderr
    return result.stdout


def statuses(project: Project) -> dict[str, dict[str, str]]:
    shown = project.recon("status", ".", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return {row["name"]: row for row in json.loads(shown.stdout)}


def planned(project: Project) -> dict[str, tuple[str, str]]:
    shown = project.recon("plan", ".")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    lines = shown.stdout.splitlines()
    return {m[2]: (m[1], m[3]) for line in lines if (m := PLAN_LINE.match(line))}


def test_an_edited_script_reruns_its_run(project: Project) -> None:
    project.repo.commit(
        {"specs/p.yaml": PIPELINE, "scripts/prep.py": PREP, "scripts/train.py": TRAIN}
    )
    settle(project)
    job = statuses(project)["train"]["job_id"]

    edited = TRAIN.replace("model v1", "model v2")
    project.repo.commit({"scripts/train.py": edited}, "train writes v2")
    assert planned(project)["train"] == (
        "submit",
        f"code scripts/train.py changed since job {job} ran it",
    )
    assert planned(project)["prep"][0] == "no-op"
    assert statuses(project)["train"]["sync"] == "outdated"
    applied = settle(project)
    assert "submitted train" in applied and "submitted prep" not in applied
    assert (project.root / "runs/train/model.txt").read_text() == "model v2\n"
    rows = statuses(project)
    assert rows["train"]["sync"] == "current" and rows["train"]["job_id"] != job


def test_a_downstream_failed_on_bad_data_heals_once_its_upstream_is_fixed(
    project: Project,
) -> None:
    bad = PIPELINE.replace("prep.py {outputs", "prep.py --bad {outputs")
    project.repo.commit({"specs/p.yaml": bad, "scripts/prep.py": PREP, "scripts/train.py": TRAIN})
    settle(project, code=1)
    failed = statuses(project)["train"]
    assert failed["health"] == "failed" and "no retries left" in failed["reason"]
    assert "or `recon apply --replace train`" in failed["reason"]

    project.repo.commit({"specs/p.yaml": PIPELINE}, "prep writes good data")
    settle(project)
    rows = statuses(project)
    assert (rows["train"]["sync"], rows["train"]["health"]) == ("current", "succeeded")
    assert (project.root / "runs/train/model.txt").read_text() == "model v1\n"


def test_a_run_whose_jobs_recon_replaced_and_pruned_is_not_failed(project: Project) -> None:
    long = "kind: Run\nname: long\ncommand: sleep 300\n" + RESOURCES
    project.repo.commit({"specs/l.yaml": long})
    project.apply()
    first = project.listed_job_of("long")
    project.apply("--replace", "long")
    project.wait_for(
        "the replaced job to end and its successor to be listed",
        lambda: (
            len(project.job_of("long")) == 2
            and any(job["state"].startswith("CANCELLED") for job in project.job_of("long"))
        ),
    )
    (project.root / "specs/l.yaml").unlink()
    project.repo.commit(message="long leaves the repo")
    # Its job is the project's only live one: the prune guard asks for a confirmation.
    assert "cancelled job" in project.apply("--allow-prune-all").stdout
    project.wait_for(
        "both jobs to end cancelled",
        lambda: all(job["state"].startswith("CANCELLED") for job in project.job_of("long")),
    )
    project.repo.commit({"specs/l.yaml": long}, "long comes back")
    action, reason = planned(project)["long"]
    assert action == "submit" and "was cancelled by recon" in reason, reason
    assert first["id"] in {job["id"] for job in project.job_of("long")}
