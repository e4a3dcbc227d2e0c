"""One apply converges a whole cascade on the real dev cluster, on the example project:
a changed `prepare` queues prepare, train, evaluate, compare and the sweep at once, each
chained with afterok; a rerun `train` that writes the same model leaves `evaluate`'s job
skipping its command within seconds, and `evaluate` current."""

from __future__ import annotations

import json
import re
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import Project, example_project

pytestmark = pytest.mark.slurm

DOWNSTREAM = {"train", "evaluate", "seeds", "compare"}


@pytest.fixture
def example(tmp_path: Path) -> Iterator[Project]:
    """The example project under a name of its own, every run current; its jobs (the
    allocation's among them) are cancelled when the test ends."""
    project = example_project(tmp_path, "cascade")
    try:
        project.apply("--wait")
        yield project
    finally:
        project.cancel_all()


def edit(project: Project, old: str, new: str) -> None:
    path = project.root / "specs" / "pipeline.yaml"
    text = path.read_text()
    assert old in text
    project.repo.commit({"specs/pipeline.yaml": text.replace(old, new)}, message=new)


def submitted(output: str) -> dict[str, list[str]]:
    """run (a sweep's name for its members) -> the job ids apply printed for it."""
    found: dict[str, list[str]] = {}
    for line in output.splitlines():
        if line.startswith("submitted "):
            name, _, job = line.removeprefix("submitted ").rpartition(": job ")
            found.setdefault(name.partition("[")[0], []).append(job)
    return found


def dependencies(job_id: str) -> set[str]:
    """The job ids in a queued job's `Dependency=afterok:12(unfulfilled),...` field."""
    shown = subprocess.run(
        ["scontrol", "show", "job", job_id], capture_output=True, text=True, check=False
    ).stdout
    field = re.search(r"\bDependency=(\S+)", shown)
    return set(re.findall(r"afterok:(\d+)", field.group(1))) if field else set()


def sacct(job_id: str, fields: str) -> list[str]:
    return subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", fields],
        capture_output=True, text=True, check=False,
    ).stdout.strip().split("|")  # fmt: skip


def statuses(project: Project) -> dict[str, dict[str, str]]:
    shown = project.recon("status", ".", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return {row["name"]: row for row in json.loads(shown.stdout)}


def test_a_changed_prepare_queues_the_whole_cascade_at_once(example: Project) -> None:
    # prepare's change makes it take a while, so its downstream is seen waiting for it.
    edit(
        example,
        "command: python3 scripts/prepare.py",
        "command: sleep 15; python3 scripts/prepare.py",
    )
    planned = example.recon("plan", ".", "--detailed-exitcode")
    assert planned.returncode == 2, planned.stdout + planned.stderr
    assert "  ~ may rerun  train          after prepare (if its output changes)" in planned.stdout

    applied = example.apply()
    jobs = submitted(applied.stdout)
    assert set(jobs) == {"prepare", *DOWNSTREAM}, applied.stdout
    assert len(jobs["seeds"]) == 6 and len({job.split("_")[0] for job in jobs["seeds"]}) == 1
    (prepare,), (train,), (evaluate,), (compare,) = (
        jobs[name] for name in ("prepare", "train", "evaluate", "compare")
    )
    array = jobs["seeds"][0].split("_")[0]
    # Each waits for its upstreams' new jobs, while prepare still sleeps.
    assert dependencies(train) == {prepare}
    assert dependencies(evaluate) == {prepare, train}
    assert dependencies(array) == {prepare}
    assert prepare in dependencies(compare) and array in dependencies(compare)

    example.apply("--wait")  # converges with no more submissions
    rows = statuses(example)
    assert {row["sync"] for row in rows.values()} == {"current"}, rows
    assert rows["evaluate"]["job_id"] == evaluate and rows["compare"]["job_id"] == compare
    again = example.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_byte_identical_model_leaves_evaluate_skipped_and_current(example: Project) -> None:
    evaluate_dir = example.root / "runs" / "evaluate"
    metrics = (evaluate_dir / "metrics.json").stat().st_mtime_ns
    manifest = (evaluate_dir / ".recon-run" / "manifest.json").read_text()
    edit(example, 'time: "00:20:00"', 'time: "00:25:00"')  # train's spec: the same model

    applied = example.apply()
    jobs = submitted(applied.stdout)
    assert set(jobs) == {"train", "evaluate"}, applied.stdout
    (train,), (evaluate,) = jobs["train"], jobs["evaluate"]
    assert dependencies(evaluate) <= {train}  # dropped from the field once fulfilled

    example.apply("--wait")
    state, elapsed = sacct(evaluate, "State,ElapsedRaw")
    assert state == "COMPLETED" and int(elapsed) <= 5, (state, elapsed)
    log = (evaluate_dir / "logs" / f"slurm-{evaluate}.out").read_text()
    assert log == (
        "recon: skipped: inputs unchanged (as its last success read them): "
        "not running the command\n"
    )
    assert (evaluate_dir / "metrics.json").stat().st_mtime_ns == metrics
    assert (evaluate_dir / ".recon-run" / "manifest.json").read_text() == manifest
    # journalled as a skip by its ending, with the digest of the script it was sent
    with sqlite3.connect(example.root / ".recon" / "journal.sqlite") as db:
        row = db.execute(
            "SELECT final_health, ending, script_sha256 FROM submissions WHERE job_id = ?",
            (evaluate,),
        ).fetchone()
    assert row[:2] == ("succeeded", "skipped") and len(row[2]) == 64, row
    rows = statuses(example)
    assert rows["evaluate"]["job_id"] == evaluate
    assert (rows["evaluate"]["sync"], rows["evaluate"]["how"]) == (
        "current",
        "skipped: inputs unchanged",
    )
    again = example.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
