"""`recon serve` on the real dev cluster: an allocation with its time left and the step
running in it, and the run's job as Slurm reports it."""

from __future__ import annotations

import json
import time

import pytest

from tests.integration.harness import Project
from tests.integration.test_allocations import held, step_run, warm
from tests.local.serving import serving

pytestmark = pytest.mark.slurm


def test_the_view_shows_an_allocation_its_time_left_and_the_step_inside(
    project: Project,
) -> None:
    project.repo.commit(
        {
            "specs/warm.yaml": warm(),
            "specs/busy.yaml": step_run(
                "busy", "echo started busy; sleep 60; touch {outputs.out.path}"
            ),
        }
    )
    project.apply()  # holds the allocation
    project.wait_for(
        "the allocation to run", lambda: any(j["state"] == "RUNNING" for j in held(project))
    )
    project.apply()  # starts the run as a step inside it
    (allocation,) = held(project)
    with serving(project.root, "--interval", "1s", "--scheduler", "slurm") as served:
        deadline = time.monotonic() + 60
        while True:
            state = json.loads(served.get("/api/state")[2])
            (warm_row,) = state["allocations"]
            if warm_row["steps_running"]:
                break
            assert time.monotonic() < deadline, state
            time.sleep(0.5)
        assert warm_row["job_id"] == allocation["id"] and warm_row["health"] == "running"
        assert 0 < warm_row["time_left"] <= 600
        (step,) = warm_row["steps_running"]
        assert step.startswith(allocation["id"] + ".") and step.endswith("(busy)")
        (busy,) = state["runs"]
        assert busy["health"] == "running" and busy["job_id"] == step.split()[0]
        assert (
            'data-name="warm"' in state["graph_svg"] and 'data-kind="alloc"' in state["graph_svg"]
        )
        details = json.loads(served.get("/api/runs/busy")[2])
        assert [(job["job_id"], job["state"]) for job in details["jobs"]] == [
            (step.split()[0], "RUNNING")
        ]
        # The step's own log (slurm-<job>.<step>.out), read as it is written.
        while "started busy" not in (details["log"]["stdout"] or ""):
            assert time.monotonic() < deadline, details["log"]
            time.sleep(0.5)
            details = json.loads(served.get("/api/runs/busy")[2])
        assert details["log"]["job_id"] == step.split()[0]
