"""Outputs stay current on the real dev cluster: missing outputs rerun, changed inputs
make downstream outdated, content-identical reruns stop the cascade (the downstream's job
skips its command), and every success leaves a provenance manifest that exports as an
RO-Crate."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest
from rocrate.rocrate import ROCrate

from tests.integration.harness import Project

pytestmark = pytest.mark.slurm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"


def settle(project: Project) -> None:
    result = project.recon("apply", ".", "--auto-approve", "--wait")
    assert result.returncode == 0, result.stdout + result.stderr


def statuses(project: Project) -> dict[str, dict[str, str]]:
    shown = project.recon("status", ".", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return {row["name"]: row for row in json.loads(shown.stdout)}


def test_example_runs_current_with_manifests_and_a_crate(project: Project, tmp_path: Path) -> None:
    for item in ("specs", "scripts"):
        shutil.copytree(EXAMPLE / item, project.root / item)
    project.repo.commit(message="example")
    settle(project)
    rows = statuses(project)
    members = [f"seeds[lr={lr},seed={seed}]" for lr in (0.1, 0.5) for seed in range(3)]
    assert {name: row["sync"] for name, row in rows.items()} == dict.fromkeys(
        ("prepare", "train", "evaluate", "actor-learner", *members, "compare"), "current"
    )
    manifest = json.loads((project.root / "runs/train/.recon-run/manifest.json").read_text())
    assert manifest["run"] == "train" and manifest["commit"] == project.repo.git(
        "rev-parse", "HEAD"
    )
    assert manifest["health"] == "succeeded" and manifest["components"][0]["partition"] == "gpu"
    assert manifest["inputs"]["episodes"]["version"]["digest"]
    assert manifest["outputs"]["model"]["version"]["kind"] == "content"
    # The digest named is the one journalled with the intent, before sbatch, beside the
    # options sbatch read from the script.
    with sqlite3.connect(project.root / ".recon" / "journal.sqlite") as db:
        digest, options = db.execute(
            "SELECT script_sha256, sbatch_options FROM submissions WHERE job_id = ?",
            (manifest["job_id"],),
        ).fetchone()
    assert manifest["script_sha256"] == digest
    assert {"--partition=gpu", "--ignore-pbs"} <= set(json.loads(options)), options

    crate_dir = tmp_path / "crate"
    exported = project.recon("export", "ro-crate", ".", "--out", str(crate_dir))
    assert exported.returncode == 0, exported.stderr
    crate = ROCrate(crate_dir)
    actions = [e for e in crate.get_entities() if e.type == "CreateAction"]
    assert len(actions) == 11  # one per run, one per member of the sweep
    assert sum(a["name"].startswith("seeds[") for a in actions) == 6
    train = next(a for a in actions if a["name"].startswith("train"))
    assert str(train["actionStatus"]).endswith("CompletedActionStatus")


def test_missing_output_reruns_and_only_a_changed_output_cascades(project: Project) -> None:
    maker = (
        "kind: Run\nname: maker\ncommand: 'printf same > {outputs.data.path}'\n"
        "resources: {cpus: 1, memory: 100MiB}\noutputs:\n  data: {path: data.txt, hash: content}\n"
    )
    user = (
        "kind: Run\nname: user\ncommand: 'cat {inputs.data.path} > {outputs.copy.path}'\n"
        "resources: {cpus: 1, memory: 100MiB}\ninputs: {data: maker.data}\n"
        "outputs: {copy: copy.txt}\n"
    )
    project.repo.commit({"specs/a.yaml": maker + "---\n" + user})
    settle(project)
    first_user_job = statuses(project)["user"]["job_id"]
    copied = (project.root / "runs/user/copy.txt").stat().st_mtime_ns

    (project.root / "runs/maker/data.txt").unlink()
    assert statuses(project)["maker"]["sync"] == "missing"
    settle(project)
    rows = statuses(project)
    assert rows["maker"]["sync"] == "current" and rows["maker"]["job_id"] != first_user_job
    # maker came out byte-identical: its downstream, queued behind it in the same apply,
    # skipped its command and left its output as it was.
    assert rows["user"]["job_id"] != first_user_job and rows["user"]["sync"] == "current"
    assert rows["user"]["how"] == "skipped: inputs unchanged"
    assert (project.root / "runs/user/copy.txt").stat().st_mtime_ns == copied

    (project.root / "runs/maker/data.txt").write_text("different")
    assert statuses(project)["user"]["sync"] == "outdated"
    settle(project)
    rows = statuses(project)
    assert rows["user"]["job_id"] != first_user_job
    assert (project.root / "runs/user/copy.txt").read_text() == "different"


def test_completed_without_its_output_counts_as_failed(project: Project) -> None:
    spec = (
        "kind: Run\nname: liar\ncommand: 'true'\nresources: {cpus: 1, memory: 100MiB}\n"
        "outputs:\n  result: result.txt\n"
    )
    project.repo.commit({"specs/a.yaml": spec})
    result = project.recon("apply", ".", "--auto-approve", "--wait")
    assert result.returncode == 1
    assert "completed without its declared outputs: result" in result.stdout + result.stderr
    assert statuses(project)["liar"]["health"] == "failed"
