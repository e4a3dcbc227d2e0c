"""Heterogeneous runs on the real dev cluster: co-scheduling, coupled teardown, coupling.

A het run's components (a CPU node serving environments, a GPU node training) must hold
their nodes at the same time, and must not hold them for nothing once one side died.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from tests.integration.harness import Project

pytestmark = pytest.mark.slurm

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"

HET = """\
kind: Run
name: {name}
command: '{command}'
resources:
  time: 10
  components:
    - {{partition: cpu, cpus: 1, memory: 100MiB}}
    - {{partition: gpu, cpus: 1, memory: 100MiB, gpus: "a100:2"}}
outputs:
  out: out.txt
"""


def components(job_id: str) -> dict[str, str]:
    """squeue's view of a het job: component id (`12+0`) -> state."""
    listing = subprocess.run(
        ["squeue", "-h", "-o", "%i|%T", "-j", job_id], capture_output=True, text=True, check=False
    ).stdout
    return dict(line.split("|") for line in listing.splitlines() if "|" in line)


def accounted(job_id: str) -> list[list[str]]:
    """sacct's allocation rows of a job: id, start, end, state. A het job that ended
    between two looks may first read as one plain row ('12192', seen under load):
    accounting lags behind slurmctld, and the components' rows come with it."""
    listing = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-j", job_id, "-o", "JobID,Start,End,State"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return [row.split("|") for row in listing]


def test_example_het_run_holds_both_components_at_once(project: Project) -> None:
    shutil.copytree(EXAMPLE / "scripts", project.root / "scripts")
    spec = (EXAMPLE / "specs" / "actor-learner.yaml").read_text().split("\n---\n")[0]
    project.repo.commit({"specs/het.yaml": spec})
    project.apply()
    job = project.listed_job_of("actor-learner")
    seen: dict[str, str] = {}
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        seen = components(job["id"])
        if len(seen) == 2 and set(seen.values()) == {"RUNNING"}:
            break
        if not seen and _state(project, "actor-learner") == "COMPLETED":
            break  # it ran between two looks (a loaded machine): accounting says when
        time.sleep(0.1)
    if seen:
        assert seen == {f"{job['id']}+0": "RUNNING", f"{job['id']}+1": "RUNNING"}
    else:
        # Both components held at once: sacct gives them one start and one end.
        wanted = [f"{job['id']}+0", f"{job['id']}+1"]
        project.wait_for(
            "accounting to list both components",
            lambda: [row[0] for row in accounted(job["id"])] == wanted,
        )
        rows = accounted(job["id"])
        assert len({(row[1], row[2]) for row in rows}) == 1, rows
        assert {row[3] for row in rows} == {"COMPLETED"}, rows
    project.wait_for("the run to finish", lambda: _state(project, "actor-learner") == "COMPLETED")
    policy = json.loads((project.root / "runs" / "actor-learner" / "policy.json").read_text())
    assert policy["steps"] == 200 and policy["gpus"] is not None


def _state(project: Project, run: str) -> str:
    jobs = project.job_of(run)
    return jobs[-1]["state"].split()[0] if jobs else ""


def test_a_failed_trainer_step_tears_the_whole_job_down(project: Project) -> None:
    # The environments run on; the trainer dies; `wait` would hold both nodes forever.
    command = 'srun --het-group=0 sleep 300 & srun --het-group=1 bash -c "sleep 1; exit 3" & wait'
    project.repo.commit({"specs/het.yaml": HET.format(name="het", command=command)})
    project.apply()
    (job,) = project.job_of("het")
    project.wait_for("the trainer step to fail", lambda: _step_failed(job["id"]))
    assert set(components(job["id"]).values()) == {"RUNNING"}

    torn = project.apply()
    assert "cancelled job" in torn.stdout, torn.stdout
    project.wait_for("the teardown", lambda: _state(project, "het") == "CANCELLED")
    assert components(job["id"]) == {}

    status = project.recon("status", ".", "--format", "json")
    (row,) = json.loads(status.stdout)
    assert row["note"].startswith("teardown: step ") and "failed (exit 3)" in row["note"]
    assert row["health"] == "failed"  # the failed step trumps the cancel (one rule for all rows)


def _step_failed(job_id: str) -> bool:
    steps = subprocess.run(
        ["sacct", "-n", "-P", "-j", job_id, "-o", "JobID,State"],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    # Steps are numbered per job: the trainer's srun is the second, on component 1.
    return any(
        line.startswith(f"{job_id}+1.") and line.endswith("|FAILED") for line in steps.splitlines()
    )


def test_a_cancelled_trainer_step_tears_the_whole_job_down(project: Project) -> None:
    # Someone cancels the trainer's step (`scancel <component>.<step>`): the environments
    # run on, both components stay RUNNING, and only a teardown frees the nodes.
    command = "srun --het-group=0 sleep 300 & srun --het-group=1 sleep 300 & wait"
    project.repo.commit({"specs/het.yaml": HET.format(name="het", command=command)})
    project.apply()
    (job,) = project.job_of("het")
    trainer = _wait_for_step(project, job["id"], component=1)
    subprocess.run(["scancel", trainer], capture_output=True, check=True)
    project.wait_for("the step to read cancelled", lambda: _step_state(trainer) == "CANCELLED")
    assert set(components(job["id"]).values()) == {"RUNNING"}

    planned = project.recon("plan", ".")
    assert re.search(r"teardown\s+het\b.*cancelled", planned.stdout), planned.stdout
    running = json.loads(project.recon("status", ".", "--format", "json").stdout)
    assert running[0]["health"] == "running"  # the job runs on until it is torn down

    torn = project.apply()
    assert f"cancelled job {job['id']}" in torn.stdout, torn.stdout
    project.wait_for("every component to end", lambda: _components_ended(job["id"]))
    status = project.recon("status", ".", "--format", "json")
    (row,) = json.loads(status.stdout)
    assert row["note"].startswith("teardown: step ") and "cancelled" in row["note"], row


def _wait_for_step(project: Project, job_id: str, component: int) -> str:
    """The raw id (``13.0``) of the first step running on het component ``component``:
    ``scancel`` takes a component's own id cleanly, not ``12+1.0``."""
    found: list[str] = []

    def listed() -> bool:
        rows = _sacct_rows(job_id)
        found[:] = [
            raw for printed, raw, state in rows
            if printed.startswith(f"{job_id}+{component}.") and printed.split(".")[1].isdigit()
            and state == "RUNNING"
        ]  # fmt: skip
        return bool(found)

    project.wait_for(f"a step on component {component}", listed)
    return found[0]


def _sacct_rows(job_id: str) -> list[tuple[str, str, str]]:
    listing = subprocess.run(
        ["sacct", "-n", "-P", "-j", job_id, "-o", "JobID,JobIDRaw,State"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    rows = [line.split("|") for line in listing.splitlines() if line.count("|") == 2]
    return [(printed, raw, state.split()[0]) for printed, raw, state in rows]


def _step_state(raw_step: str) -> str:
    head = raw_step.split(".")[0]
    return next((state for _, raw, state in _sacct_rows(head) if raw == raw_step), "")


def _components_ended(job_id: str) -> bool:
    rows = [row for row in _sacct_rows(job_id) if "." not in row[0]]
    return len(rows) == 2 and all(state not in ("RUNNING", "PENDING") for _, _, state in rows)


def test_coupled_runs_are_torn_down_together(project: Project) -> None:
    server = (
        "kind: Run\nname: server\ncommand: sleep 300\ncoupled_with: [client]\n"
        "resources: {cpus: 1, memory: 100MiB}\n"
    )
    client = (
        "kind: Run\nname: client\ncommand: 'sleep 2; exit 1'\n"
        "resources: {cpus: 1, memory: 100MiB}\n"
    )
    project.repo.commit({"specs/server.yaml": server, "specs/client.yaml": client})
    project.apply()
    project.wait_for("the client to fail", lambda: _state(project, "client") == "FAILED")
    assert _state(project, "server") == "RUNNING"
    torn = project.apply()
    assert "cancelled job" in torn.stdout, torn.stdout
    project.wait_for("the server to go down", lambda: _state(project, "server") == "CANCELLED")


def test_a_component_that_fits_no_partition_is_refused_at_plan_time(project: Project) -> None:
    spec = HET.format(name="greedy", command="true").replace("a100:2", "a100:8")
    project.repo.commit({"specs/het.yaml": spec})
    plan = project.recon("plan", ".", "--detailed-exitcode")
    assert plan.returncode == 0, plan.stdout + plan.stderr  # nothing the cluster could run
    assert "does not fit the cluster: component 1 (partition gpu): asks 8 GPUs" in plan.stdout
    applied = project.recon("apply", ".", "--auto-approve")
    assert applied.returncode == 0, applied.stderr
    assert project.jobs() == []
    assert not (project.root / "runs" / "greedy").exists()  # nothing prepared either
