"""One apply converges a whole cascade, on the local backend and the example project: a
changed `prepare` queues everything downstream of it at once, chained with afterok; a
rerun `train` that writes the same model leaves `evaluate`'s job skipping its command."""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.scheduler.local import LocalScheduler
from tests.gitrepo import GitRepo
from tests.local.serving import environment, example_project, recon
from tests.projects import new_project_name

TIMEOUT = 90.0
MEMBERS = [f"seeds[lr={lr},seed={seed}]" for lr in (0.1, 0.5) for seed in range(3)]
DOWNSTREAM = ["train", "evaluate", *MEMBERS, "compare"]


@pytest.fixture
def example(tmp_path: Path) -> Iterator[Path]:
    """The example project under a name of its own, every run current."""
    root = example_project(tmp_path)
    name = new_project_name("cascade")
    text = (root / "recon.yaml").read_text().replace("project: cartpole", f"project: {name}")
    commit(root, {"recon.yaml": text}, "own name")
    ok(recon(root, "apply", ".", "--auto-approve", "--wait"))
    yield root
    backend = LocalScheduler(root / ".recon")
    for job_id, job in jobs(root).items():  # whatever a failed test left queued
        if "ended" not in job:
            backend.cancel(str(job_id))


def ok(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def commit(root: Path, files: dict[str, str], message: str) -> None:
    GitRepo(root).commit(files, message=message)


def edit(root: Path, old: str, new: str) -> None:
    path = root / "specs" / "pipeline.yaml"
    text = path.read_text()
    assert old in text
    commit(root, {"specs/pipeline.yaml": text.replace(old, new)}, f"{old} -> {new}")


def jobs(root: Path) -> dict[int, dict[str, Any]]:
    """The local store's jobs (as their JSON reads): what was submitted, and when each
    started and ended."""
    found: dict[int, dict[str, Any]] = {}
    for folder in (root / ".recon" / "local" / "jobs").iterdir():
        if not folder.name.isdigit():
            continue
        job: dict[str, Any] = json.loads((folder / "job.json").read_text())
        for fact in ("started", "ended"):
            if (folder / f"{fact}.json").exists():
                job[fact] = json.loads((folder / f"{fact}.json").read_text())["at"]
        found[int(folder.name)] = job
    return found


def statuses(root: Path) -> dict[str, dict[str, str]]:
    return {
        row["name"]: row for row in json.loads(ok(recon(root, "status", ".", "--format", "json")))
    }


def wait_done(root: Path) -> dict[str, dict[str, str]]:
    deadline = time.monotonic() + TIMEOUT
    while True:
        rows = statuses(root)
        if all(row["health"] in ("succeeded", "failed", "cancelled") for row in rows.values()):
            return rows
        assert time.monotonic() < deadline, rows
        time.sleep(0.5)


def submitted(output: str) -> dict[str, int]:
    """run -> job id, from apply's `submitted NAME: job N` lines (N_i for a task)."""
    found = {}
    for line in output.splitlines():
        if line.startswith("submitted "):
            name, _, job = line.removeprefix("submitted ").rpartition(": job ")
            found[name] = int(job.split("_")[0]) + int(job.partition("_")[2] or 0)
    return found


def test_one_apply_queues_the_whole_cascade_with_afterok(example: Path) -> None:
    edit(example, "--episodes 200", "--episodes 150")
    planned = recon(example, "plan", ".", "--detailed-exitcode")
    assert planned.returncode == 2, planned.stdout + planned.stderr
    assert "  ~ may rerun  train          after prepare (if its output changes)" in planned.stdout
    assert "Plan: 1 to submit, 0 to replace, 0 to cancel, 9 may rerun." in planned.stdout

    applied = ok(recon(example, "apply", ".", "--auto-approve"))
    ids = submitted(applied)
    assert set(ids) == {"prepare", *DOWNSTREAM}, applied
    store = jobs(example)
    # Each waits for its upstreams' new jobs through afterok.
    assert store[ids["train"]]["dependencies"] == [ids["prepare"]]
    assert store[ids["evaluate"]]["dependencies"] == sorted([ids["prepare"], ids["train"]])
    assert ids["prepare"] in store[ids["compare"]]["dependencies"]
    assert set(store[ids["compare"]]["dependencies"]) >= {ids[m] for m in MEMBERS}
    assert store[ids[MEMBERS[0]]]["dependencies"] == [ids["prepare"]]

    rows = wait_done(example)
    assert {name: rows[name]["health"] for name in DOWNSTREAM} == dict.fromkeys(
        DOWNSTREAM, "succeeded"
    )
    # The dataset changed (hash: fingerprint besides): everything ran, nothing is left.
    again = recon(example, "plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr


def test_a_byte_identical_model_leaves_evaluate_skipped_and_current(example: Path) -> None:
    metrics = example / "runs" / "evaluate" / "metrics.json"
    before = metrics.stat().st_mtime_ns
    manifest = (example / "runs" / "evaluate" / ".recon-run" / "manifest.json").read_text()
    edit(example, 'time: "00:20:00"', 'time: "00:25:00"')  # train's spec: same model

    planned = ok(recon(example, "plan", "."))
    assert "  ~ may rerun  evaluate       after train (if its output changes)" in planned
    applied = ok(recon(example, "apply", ".", "--auto-approve"))
    ids = submitted(applied)
    assert set(ids) == {"train", "evaluate"}, applied
    assert jobs(example)[ids["evaluate"]]["dependencies"] == [ids["train"]]

    rows = wait_done(example)
    assert rows["evaluate"]["job_id"] == str(ids["evaluate"])
    log = (example / "runs" / "evaluate" / "logs" / f"slurm-{ids['evaluate']}.out").read_text()
    assert log == (
        "recon: skipped: inputs unchanged (as its last success read them): "
        "not running the command\n"
    )
    job = jobs(example)[ids["evaluate"]]
    took = _seconds(str(job["ended"])) - _seconds(str(job["started"]))
    assert took < 5, took
    assert metrics.stat().st_mtime_ns == before  # its output untouched

    assert "No changes to the cluster" in ok(recon(example, "apply", ".", "--auto-approve"))
    again = recon(example, "plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    rows = statuses(example)
    assert (rows["evaluate"]["sync"], rows["evaluate"]["how"]) == (
        "current",
        "skipped: inputs unchanged",
    )
    # The manifest still tells how the outputs were made: by the job that ran.
    assert (example / "runs" / "evaluate" / ".recon-run" / "manifest.json").read_text() == manifest
    assert not list((example / "runs" / "evaluate" / ".recon-run" / "skipped").iterdir())


def test_a_changed_model_makes_evaluate_run(example: Path) -> None:
    model = "--out {outputs.model.path}\ninputs"
    edit(example, model, model.replace("\n", " --epochs 3\n"))
    applied = ok(recon(example, "apply", ".", "--auto-approve"))
    ids = submitted(applied)
    assert set(ids) == {"train", "evaluate"}, applied
    rows = wait_done(example)
    assert rows["evaluate"]["health"] == "succeeded"
    log = (example / "runs" / "evaluate" / "logs" / f"slurm-{ids['evaluate']}.out").read_text()
    assert "skipped" not in log and "accuracy" in log
    ok(recon(example, "apply", ".", "--auto-approve"))
    written = example / "runs" / "evaluate" / ".recon-run" / "manifest.json"
    manifest = json.loads(written.read_text())
    assert manifest["job_id"] == str(ids["evaluate"])


def _seconds(stamp: str) -> float:
    return datetime.fromisoformat(stamp).timestamp()


MAKER = """\
kind: Run
name: maker
resources: {cpus: 1}
command: printf same > {outputs.data.path}
outputs:
  data: {path: data.txt, hash: content}
"""
READERS = """\
kind: Run
name: reader
matrix:
  seed: [0, 1]
resources: {cpus: 1}
inputs:
  data: maker.data
command: cat {inputs.data.path} > {outputs.copy.path}; echo {matrix.seed} >> {outputs.copy.path}
outputs:
  copy: copy.txt
"""


def test_a_sweeps_array_tasks_skip_each_on_their_own(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "repo")
    name = new_project_name("cascade")
    repo.commit(
        {
            "recon.yaml": f"project: {name}\nscheduler: local\n",
            "specs/a.yaml": MAKER + "---\n" + READERS,
        }
    )
    root = repo.root
    try:
        ok(recon(root, "apply", ".", "--auto-approve", "--wait"))
        applied = ok(recon(root, "apply", ".", "--auto-approve", "--replace", "maker"))
        assert "~ may rerun  reader         2 of 2 members (1 array)" in applied, applied
        tasks = {
            run: job
            for line in applied.splitlines()
            if line.startswith("submitted reader[")
            for run, _, job in [line.removeprefix("submitted ").rpartition(": job ")]
        }
        assert sorted(tasks) == ["reader[seed=0]", "reader[seed=1]"]
        rows = wait_done(root)
        assert {rows[run]["job_id"] for run in tasks} == set(tasks.values())
        ok(recon(root, "apply", ".", "--auto-approve"))  # settles them
        rows = statuses(root)
        for run in tasks:
            assert (rows[run]["sync"], rows[run]["how"]) == ("current", "skipped: inputs unchanged")
        again = recon(root, "plan", ".", "--detailed-exitcode")
        assert again.returncode == 0, again.stdout + again.stderr
    finally:
        backend = LocalScheduler(root / ".recon")
        for job_id, job in jobs(root).items():
            if "ended" not in job:
                backend.cancel(str(job_id))


def test_a_crash_after_its_sbatch_is_healed_by_adoption_not_a_second_job(example: Path) -> None:
    """train is queued alone (a target), then the pass that queues evaluate behind it is
    killed right after evaluate's sbatch, before the journal has its job id."""
    slow = "  python3 scripts/train.py\n"
    edit(example, slow, slow.replace("python3", "sleep 5; python3"))
    ids = submitted(ok(recon(example, "apply", ".", "train", "--auto-approve")))
    assert set(ids) == {"train"}
    crashed = subprocess.run(
        [sys.executable, "-m", "reconciler", "apply", ".", "--auto-approve"],
        cwd=example,
        env=environment(example, RECON_FAULT_INJECT="after-sbatch"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert crashed.returncode == -signal.SIGKILL, crashed.stdout + crashed.stderr
    healed = ok(recon(example, "apply", ".", "--auto-approve"))
    assert "Apply complete: 0 submitted, 0 cancelled, 1 adopted" in healed, healed
    evaluate = [job for job in jobs(example).values() if job["name"] == f"{name(example)}.evaluate"]
    assert len(evaluate) == 2  # its first job, and the one queued behind train
    rows = wait_done(example)
    assert (rows["evaluate"]["health"], rows["train"]["health"]) == ("succeeded", "succeeded")
    ok(recon(example, "apply", ".", "--auto-approve"))
    assert statuses(example)["evaluate"]["how"] == "skipped: inputs unchanged"


def name(root: Path) -> str:
    (found,) = re.findall(r"^project: (\S+)$", (root / "recon.yaml").read_text(), re.M)
    return str(found)
