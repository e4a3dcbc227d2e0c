"""Persistent allocations on the real dev cluster, driven through `recon` as a user would:
held once and reused, runs as steps inside, replaced without killing a running step,
renewed near expiry, released when they leave the repo, found again after the journal
is lost."""

from __future__ import annotations

import json
import re
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.engine.reconcile import Request, reconcile_once
from reconciler.scheduler.slurm.adapter import SlurmScheduler
from reconciler.scheduler.tag import Tag
from tests.integration.harness import Project

pytestmark = pytest.mark.slurm


def warm(
    partition: str = "cpu",
    time_limit: str = "10m",
    min_remaining: str = "1m",
    extra: str = "",
) -> str:
    return (
        f"kind: Allocation\nname: warm\nresources:\n  partition: {partition}\n  cpus: 2\n"
        f"  memory: 500MiB\ntime_limit: {time_limit}\nmin_remaining: {min_remaining}\n{extra}"
    )


def step_run(name: str, command: str, *, time_limit: str = "2m", inputs: str = "") -> str:
    return (
        f"kind: Run\nname: {name}\nallocation: warm\ncommand: '{command}'\n"
        f"resources:\n  cpus: 1\n  memory: 100MiB\n  time: {time_limit}\n"
        f"{inputs}outputs:\n  out: out.txt\n"
    )


def allocations(project: Project) -> list[dict[str, str]]:
    return sorted(project.job_of("warm"), key=lambda job: int(job["id"]))


def held(project: Project) -> list[dict[str, str]]:
    return [job for job in allocations(project) if job["state"] in ("RUNNING", "PENDING")]


def gpu_indices(job_id: str) -> list[str]:
    """The device indices of the GPUs a held job was given (``scontrol show job -d``:
    ``IDX:2-3``). The dev cluster does not confine devices, so a step sees these very
    indices: another test's allocation may hold 0 and 1."""
    shown = subprocess.run(
        ["scontrol", "show", "job", "-d", job_id], capture_output=True, text=True, check=True
    ).stdout
    (found,) = re.findall(r"IDX:([0-9,-]+)", shown)
    indices: list[str] = []
    for part in found.split(","):
        first, _, last = part.partition("-")
        indices += [str(index) for index in range(int(first), int(last or first) + 1)]
    return indices


def steps(job_id: str) -> dict[str, tuple[str, str, str]]:
    """Run name -> (step id, state, exit code) of recon's steps in one allocation."""
    listing = subprocess.run(
        ["sacct", "-j", job_id, "-P", "-n", "-o", "JobID,JobName,State,ExitCode"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    found = {}
    for line in listing.splitlines():
        step_id, name, state, exit_code = line.split("|")
        tag = Tag.parse(name)
        if "." in step_id and tag is not None and tag.kind == "run":
            found[tag.name] = (step_id, state.split()[0], exit_code)
    return found


def apply_until(
    project: Project, what: str, done: Callable[[], bool], timeout: float = 90.0
) -> None:
    """Apply again and again, as watch or cron would, until `done()`."""
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}: {project.jobs()}"
        project.apply()
        time.sleep(1)


def test_held_once_reused_and_runs_run_inside_one_after_the_other(project: Project) -> None:
    second_command = "cat {inputs.src.path} > {outputs.out.path}; echo second >> {outputs.out.path}"
    project.repo.commit(
        {
            "specs/warm.yaml": warm(),
            "specs/first.yaml": step_run("first", "echo first > {outputs.out.path}"),
            "specs/second.yaml": step_run(
                "second", second_command, inputs="inputs:\n  src: first.out\n"
            ),
        }
    )
    made = project.apply()
    assert "submitted warm: job" in made.stdout
    (allocation,) = held(project)

    again = project.apply()
    assert "~ reuse     warm" in again.stdout, again.stdout
    assert "submitted first: job " + allocation["id"] + "." in again.stdout
    assert [job["id"] for job in allocations(project)] == [allocation["id"]]  # no new job

    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (project.root / "runs/second/out.txt").read_text() == "first\nsecond\n"
    ran = steps(allocation["id"])
    assert {name: (state, code) for name, (_, state, code) in ran.items()} == {
        "first": ("COMPLETED", "0:0"),
        "second": ("COMPLETED", "0:0"),
    }
    assert ran["first"][0] < ran["second"][0]  # one after the other, in the same job
    assert [job["id"] for job in held(project)] == [allocation["id"]]
    status = project.recon("status", ".", "--format", "json")
    rows = {row["name"]: row for row in json.loads(status.stdout)}
    assert rows["second"]["job_id"] == ran["second"][0]
    assert rows["second"]["health"] == "succeeded" and rows["second"]["sync"] == "current"

    # A run that fails inside it: the step's exit code is the run's.
    project.repo.commit({"specs/broken.yaml": step_run("broken", "exit 3")})
    failed = project.recon("apply", ".", "--auto-approve", "--wait")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "failed (exit 3)" in failed.stderr
    assert steps(allocation["id"])["broken"][1:] == ("FAILED", "3:0")
    assert [job["id"] for job in held(project)] == [allocation["id"]]  # it stays held


def test_held_under_the_account_and_qos_it_names(project: Project) -> None:
    # root's default account is `recon`: only the spec's account puts the job elsewhere.
    charged = "  account: recon-other-acct\n  qos: normal\n"
    project.repo.commit(
        {"specs/warm.yaml": warm().replace("resources:\n", "resources:\n" + charged)}
    )
    plan = project.recon("plan", ".")
    assert plan.returncode == 0, plan.stdout + plan.stderr
    project.apply()
    (allocation,) = held(project)

    def accounted() -> list[str]:
        return subprocess.run(
            ["sacct", "-X", "-n", "-P", "-j", allocation["id"], "-o", "Account,QOS"],
            capture_output=True, text=True, check=True,
        ).stdout.split()  # fmt: skip

    project.wait_for("sacct to list the allocation", lambda: bool(accounted()))  # accounting lags
    listing = "\n".join(accounted())
    assert listing.split() == ["recon-other-acct|normal"]
    shown = project.recon("status", ".", "--format", "json", "--allocations")
    (row,) = json.loads(shown.stdout)["allocations"]
    assert (row["name"], row["job_id"]) == ("warm", allocation["id"])
    assert row["history"][0]["job_id"] == allocation["id"]
    if row["health"] == "running":
        assert row["nodes"] and 0 < row["time_left"] <= 600


def test_a_run_asking_more_gpus_than_its_allocation_holds_is_blocked(project: Project) -> None:
    two_gpus = warm(partition="gpu").replace("  cpus: 2\n", "  cpus: 2\n  gpus: a100:2\n")
    big = step_run("big", "nvidia-smi > {outputs.out.path}").replace(
        "  cpus: 1\n", "  cpus: 1\n  gpus: 4\n"
    )
    project.repo.commit({"specs/warm.yaml": two_gpus, "specs/big.yaml": big})
    plan = project.recon("plan", ".")
    assert "asks for more than allocation warm holds: gpus 4 > a100:2 per node" in plan.stdout, (
        plan.stdout + plan.stderr
    )
    # Blocked whether or not the allocation is ready: apply until it is, then once more.
    apply_until(project, "the allocation to be held", lambda: bool(held(project)))
    project.wait_for("the allocation to run", lambda: held(project)[0]["state"] == "RUNNING")
    again = project.recon("plan", ".")
    assert "~ reuse     warm" in again.stdout, again.stdout
    assert "gpus 4 > a100:2 per node" in again.stdout, again.stdout
    assert "1 run blocked" in project.apply().stdout
    (allocation,) = held(project)
    assert "big" not in steps(allocation["id"])
    assert project.job_of("big") == []


def test_a_cpu_run_in_a_gpu_allocation_sees_no_gpu(project: Project) -> None:
    two_gpus = warm(partition="gpu").replace("  cpus: 2\n", "  cpus: 2\n  gpus: a100:2\n")
    seen = "echo ${CUDA_VISIBLE_DEVICES-none} > {outputs.out.path}"
    gpu = step_run("gpu", seen).replace("  cpus: 1\n", "  cpus: 1\n  gpus: 1\n")
    project.repo.commit(
        {
            "specs/warm.yaml": two_gpus,
            "specs/cpu.yaml": step_run("cpu", seen),
            "specs/gpu.yaml": gpu,
        }
    )
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (allocation,) = held(project)
    assert (project.root / "runs/cpu/out.txt").read_text() == "none\n"
    assert (project.root / "runs/gpu/out.txt").read_text().strip() in gpu_indices(allocation["id"])


def test_concurrent_gpu_runs_get_their_own_gpus_and_a_third_waits_its_turn(
    project: Project,
) -> None:
    two_gpus = warm(partition="gpu").replace("  cpus: 2\n", "  cpus: 4\n  gpus: a100:2\n")
    # Each GPU run holds its device for a while: the third finds none free and waits in
    # the plan, not started, until one of the first two ends.
    seen = "echo ${CUDA_VISIBLE_DEVICES-none} > {outputs.out.path}; sleep 30"

    def gpu_run(name: str) -> str:
        return step_run(name, seen).replace("  cpus: 1\n", "  cpus: 1\n  gpus: 1\n")

    project.repo.commit(
        {
            "specs/warm.yaml": two_gpus,
            "specs/cpu.yaml": step_run("cpu", seen),
            **{f"specs/{name}.yaml": gpu_run(name) for name in ("g1", "g2", "g3")},
        }
    )
    apply_until(project, "the allocation to run", lambda: any(
        job["state"] == "RUNNING" for job in held(project)
    ))  # fmt: skip
    applied = project.apply()
    (allocation,) = held(project)
    given = gpu_indices(allocation["id"])
    assert len(given) == 2, given
    # Two of the GPU runs got a step; the third waits in the plan, not started: no srun
    # holds it back, so the apply did not wait for a step to be listed.
    waits = f"waits for 1 free GPU in allocation warm (job {allocation['id']}): 2 of 2 in use"
    assert waits in applied.stdout, applied.stdout
    plan = project.recon("plan", ".")
    assert f"{waits} by runs g1, g2" in plan.stdout, plan.stdout
    assert "srun holds" not in plan.stdout, plan.stdout
    assert "g3" not in steps(allocation["id"])
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    devices = {
        name: (project.root / f"runs/{name}/out.txt").read_text().strip()
        for name in ("cpu", "g1", "g2", "g3")
    }
    assert devices["cpu"] == "none", devices
    ran = steps(allocation["id"])
    assert {name: state for name, (_, state, _) in ran.items()} == dict.fromkeys(
        ("cpu", "g1", "g2", "g3"), "COMPLETED"
    )
    # Each started exactly once, the two that ran together on different devices, the
    # third once one of them had ended.
    step_names = subprocess.run(
        ["sacct", "-j", allocation["id"], "-P", "-n", "-o", "JobName"],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    assert sum(1 for name in step_names if ":run:g" in name) == 3, step_names
    assert sorted(devices[name] for name in ("g1", "g2")) == given, devices
    assert devices["g3"] in given, devices
    ended = min(_step_time(ran[name][0], "End") for name in ("g1", "g2"))
    assert _step_time(ran["g3"][0], "Start") >= ended


def test_a_gpu_run_waits_for_the_memory_another_gpu_run_reserves(project: Project) -> None:
    two_gpus = warm(partition="gpu").replace("  cpus: 2\n", "  cpus: 4\n  gpus: a100:2\n")

    def big(name: str) -> str:
        command = "echo ${CUDA_VISIBLE_DEVICES-none} > {outputs.out.path}; sleep 20"
        return step_run(name, command).replace(
            "  cpus: 1\n  memory: 100MiB\n", "  cpus: 1\n  memory: 300MiB\n  gpus: 1\n"
        )

    project.repo.commit({"specs/warm.yaml": two_gpus, "specs/m1.yaml": big("m1"),
                         "specs/m2.yaml": big("m2")})  # fmt: skip
    apply_until(project, "the allocation to run", lambda: any(
        job["state"] == "RUNNING" for job in held(project)
    ))  # fmt: skip
    project.apply()
    (allocation,) = held(project)
    # A GPU is free, but the 300 MiB m2 asks for is not: m1 reserves 300 of the 500.
    plan = project.recon("plan", ".")
    waits = (
        f"waits for 300 MiB free memory in allocation warm (job {allocation['id']}): "
        "300 of 500 MiB reserved by GPU run m1"
    )
    assert waits in plan.stdout, plan.stdout
    assert "m2" not in steps(allocation["id"])
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    ran = steps(allocation["id"])
    assert {name: state for name, (_, state, _) in ran.items()} == {
        "m1": "COMPLETED",
        "m2": "COMPLETED",
    }
    assert _step_time(ran["m2"][0], "Start") >= _step_time(ran["m1"][0], "End")


def _step_time(step_id: str, field: str) -> str:
    """A step's Start or End as sacct prints it (ISO, so it sorts as time)."""
    return subprocess.run(
        ["sacct", "-j", step_id, "-P", "-n", "-o", field],
        capture_output=True, text=True, check=True,
    ).stdout.split()[0]  # fmt: skip


def test_a_step_of_one_task_on_each_of_two_nodes(project: Project) -> None:
    # The dev cluster's nodes share one host, so `hostname` is the same on both: each
    # task reports the node Slurm runs it on (SLURMD_NODENAME) and its rank.
    two_nodes = warm().replace("  cpus: 2\n", "  nodes: 2\n  cpus: 2\n")
    report = "echo $SLURMD_NODENAME $SLURM_PROCID $(hostname) >> {outputs.out.path}"
    spread = step_run("spread", report).replace(
        "  cpus: 1\n", "  nodes: 2\n  ntasks_per_node: 1\n  cpus: 1\n"
    )
    too_wide = step_run("wide", report).replace("  cpus: 1\n", "  nodes: 3\n  cpus: 1\n")
    project.repo.commit({"specs/warm.yaml": two_nodes, "specs/spread.yaml": spread})
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    lines = (project.root / "runs/spread/out.txt").read_text().splitlines()
    assert sorted(line.split()[:2] for line in lines) == [["cpu1", "0"], ["cpu2", "1"]], lines
    (allocation,) = held(project)
    assert steps(allocation["id"])["spread"][1] == "COMPLETED"
    # More nodes than the allocation holds: blocked at plan time, nothing started.
    project.repo.commit({"specs/wide.yaml": too_wide})
    plan = project.recon("plan", ".")
    assert "asks for more than allocation warm holds: nodes 3 > 2" in plan.stdout, plan.stdout
    assert "1 run blocked" in project.apply().stdout
    assert "wide" not in steps(allocation["id"])


def test_an_idle_allocation_is_released_and_made_again_when_a_run_needs_it(
    project: Project,
) -> None:
    project.repo.commit(
        {
            "specs/warm.yaml": warm(extra="idle_release: 1m\n"),
            "specs/first.yaml": step_run("first", "echo first > {outputs.out.path}"),
        }
    )
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (first,) = held(project)
    assert steps(first["id"])["first"][1] == "COMPLETED"
    plan = project.recon("plan", ".")
    assert "~ reuse     warm" in plan.stdout and ", idle " in plan.stdout, plan.stdout
    shown = json.loads(project.recon("status", ".", "--format", "json", "--allocations").stdout)
    (row,) = shown["allocations"]
    assert row["job_id"] == first["id"] and 0 <= row["idle"] < 60, row

    # A pass judged by a clock a minute on: the step's end as sacct has it is more than
    # idle_release ago. How long counts as idle is tests/unit/test_allocations.py's to
    # prove, by plain values; what needs Slurm is that the real job is released.
    def a_minute_on() -> datetime:
        return datetime.now(UTC) + timedelta(seconds=61)

    outcome = reconcile_once(Request(project.root), scheduler=SlurmScheduler(), clock=a_minute_on)
    reasons = [action.reason for action in outcome.plan.actions]
    released = f"release allocation job {first['id']}: idle 1m"
    assert any(released in reason for reason in reasons), reasons
    assert outcome.applied is not None
    project.wait_for("the release", lambda: held(project) == [])
    # Nothing needs it: no new job.
    again = project.recon("plan", ".")
    assert "no job ready; allocated when a run needs it (idle_release: 1m)" in again.stdout
    assert "+ submit" not in again.stdout, again.stdout

    # A new run needs it: a new job is made, and the run runs in it.
    project.repo.commit({"specs/second.yaml": step_run("second", "echo 2 > {outputs.out.path}")})
    plan = project.recon("plan", ".")
    assert "allocation: none held; run second needs it" in plan.stdout, plan.stdout
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (second,) = held(project)
    assert second["id"] != first["id"]
    assert steps(second["id"])["second"][1] == "COMPLETED"


def test_a_changed_partition_replaces_it_without_killing_a_running_step(
    project: Project,
) -> None:
    sleeper = step_run("sleeper", "sleep 20; echo slept > {outputs.out.path}")
    project.repo.commit({"specs/warm.yaml": warm(), "specs/sleeper.yaml": sleeper})
    project.apply()
    (old,) = held(project)
    deadline = time.monotonic() + 90
    while "submitted sleeper" not in (started := project.apply()).stdout:
        assert time.monotonic() < deadline, started.stdout
        time.sleep(1)
    (step_id,) = re.findall(r"submitted sleeper: job (\S+)", started.stdout)

    project.repo.commit({"specs/warm.yaml": warm(partition="gpu")})
    # Planned at once, seconds after the grant: slurmctld records a job in accounting only
    # every 5 s, so sacct's window may show neither the allocation nor its step yet (as it
    # surely does in test_slurm_adapter's ..._accounting_has_not_recorded_yet_is_observed).
    # The step is seen all the same, from squeue.
    plan = project.recon("plan", ".")
    assert "-/+ replace   warm" in plan.stdout, plan.stdout
    assert f"released once step {step_id} (run sleeper) ends" in plan.stdout, plan.stdout
    assert "does not show" not in plan.stdout, plan.stdout
    project.wait_for("the sleeper's step in sacct", lambda: "sleeper" in steps(old["id"]))
    assert steps(old["id"])["sleeper"][:2] == (step_id, "RUNNING")
    project.apply()
    new = [job for job in held(project) if job["id"] != old["id"]]
    assert len(new) == 1
    assert (
        subprocess.run(
            ["squeue", "-h", "-j", new[0]["id"], "-o", "%P"], capture_output=True, text=True
        ).stdout.strip()
        == "gpu"
    )
    # Meanwhile both exist, and the step goes on in the old one.
    assert {job["id"] for job in held(project)} == {old["id"], new[0]["id"]}
    assert steps(old["id"])["sleeper"][1] == "RUNNING"

    apply_until(project, "the old allocation's release", lambda: len(held(project)) == 1)
    assert steps(old["id"])["sleeper"][1:] == ("COMPLETED", "0:0")
    assert (project.root / "runs/sleeper/out.txt").read_text() == "slept\n"
    assert [job["id"] for job in held(project)] == [new[0]["id"]]


def test_an_allocation_that_left_the_repo_is_released(project: Project) -> None:
    project.repo.commit({"specs/warm.yaml": warm()})
    project.apply()
    (allocation,) = held(project)
    project.repo.remove("specs/warm.yaml")
    project.repo.commit(message="drop warm")
    # The commit declares nothing any more: releasing the project's only live job takes a
    # confirmation (docs/cli.md, "When a prune would empty the project").
    released = project.apply("--allow-prune-all")
    assert f"cancelled job {allocation['id']}" in released.stdout
    assert "allocation left the repo" in released.stdout
    project.wait_for("the release", lambda: held(project) == [])


def test_near_expiry_it_is_renewed_before_runs_need_it(project: Project) -> None:
    project.repo.commit({"specs/warm.yaml": warm(time_limit="2m", min_remaining="90s")})
    project.apply()
    (first,) = held(project)
    # Reused while more than 90 s of its 2 minutes are left...
    assert "~ reuse     warm" in project.recon("plan", ".").stdout
    # squeue's time left, which the plan reads too: counted from when Slurm started the
    # job, which under load can be a while after the apply.
    project.wait_for("less than 90 s left", lambda: _time_left(first["id"]) < 89)
    # ...then renewed: a new job is held before any run needs it, the old one released.
    plan = project.recon("plan", ".")
    assert "-/+ replace   warm           allocation renewed: job " + first["id"] in plan.stdout
    renewed = project.apply()
    assert f"cancelled job {first['id']}" in renewed.stdout
    (second,) = held(project)
    assert second["id"] != first["id"]

    project.repo.commit({"specs/quick.yaml": step_run("quick", "echo hi > {outputs.out.path}",
                                                      time_limit="1m")})  # fmt: skip
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert steps(second["id"])["quick"][1] == "COMPLETED"


def test_a_run_too_long_for_the_time_left_waits_for_the_renewal(project: Project) -> None:
    project.repo.commit({"specs/warm.yaml": warm(time_limit="3m", min_remaining="30s")})
    project.apply()
    (first,) = held(project)
    # The run asks 175 s: wait until less than that is left, counted from when Slurm
    # granted the job (under load that can be a while after the apply).
    project.wait_for("the allocation to run 5 s", lambda: _time_left(first["id"]) < 174)
    project.repo.commit({"specs/long.yaml": step_run("long", "true", time_limit="175s")})
    plan = project.recon("plan", ".")
    assert "waits for allocation warm's renewal: needs 2m 55s" in plan.stdout, plan.stdout
    assert "allocation renewed early: run long needs 2m 55s" in plan.stdout
    apply_until(project, "the run in a renewed job", lambda: bool(_runs_in(project, "long")))
    (where,) = _runs_in(project, "long")
    assert where != first["id"]


def _time_left(job_id: str) -> float:
    """Seconds squeue says a running job has left (``%L``: M:SS or H:MM:SS); infinite
    while it waits to start."""
    shown = subprocess.run(
        ["squeue", "-h", "-j", job_id, "-o", "%T|%L"], capture_output=True, text=True
    ).stdout.strip()
    state, _, left = shown.partition("|")
    if state != "RUNNING":
        return float("inf")
    seconds = 0.0
    for part in left.split(":"):
        seconds = seconds * 60 + float(part)
    return seconds


def _runs_in(project: Project, run: str) -> list[str]:
    return [job["id"] for job in allocations(project) if run in steps(job["id"])]


def test_a_lost_journal_finds_the_allocation_by_its_tag(project: Project) -> None:
    project.repo.commit({"specs/warm.yaml": warm()})
    project.apply()
    (allocation,) = held(project)
    for path in (project.root / ".recon").glob("journal.sqlite*"):
        path.unlink()
    healed = project.apply()
    assert f"adopted job {allocation['id']}" in healed.stdout
    assert "~ reuse     warm" in healed.stdout and "Apply complete: 0 submitted" in healed.stdout
    assert [job["id"] for job in allocations(project)] == [allocation["id"]]

    # Lost again, and no spec declares it any more: an orphan, released by its tag.
    for path in (project.root / ".recon").glob("journal.sqlite*"):
        path.unlink()
    project.repo.remove("specs/warm.yaml")
    project.repo.commit({"recon.yaml": _no_prune(project)}, message="drop warm")
    orphan = project.apply()
    assert "no spec declares and the journal does not know" in orphan.stdout, orphan.stdout
    project.wait_for("the orphan's release", lambda: held(project) == [])


def _no_prune(project: Project) -> str:
    return (project.root / "recon.yaml").read_text() + "prune: false\n"


def test_setup_runs_once_per_allocation_before_any_run(project: Project, tmp_path: Path) -> None:
    log = tmp_path / "setup.log"
    setup = f"setup:\n  - echo set up >> {log}\n  - sleep 2\n"
    project.repo.commit(
        {
            "specs/warm.yaml": warm(extra=setup),
            "specs/user.yaml": step_run("user", f"cat {log} > {{outputs.out.path}}"),
        }
    )
    project.apply()
    plan = project.recon("plan", ".")
    assert "  > setup     warm           setup starts in allocation job" in plan.stdout
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (project.root / "runs/user/out.txt").read_text() == "set up\n"
    project.apply()
    assert log.read_text() == "set up\n"  # once, however often the allocation is reused
    (allocation,) = held(project)
    assert (project.root / f".recon/allocations/warm/slurm-{allocation['id']}.0.out").exists()


def test_a_setup_that_fails_once_is_tried_again_in_a_new_job(
    project: Project, tmp_path: Path
) -> None:
    marker = tmp_path / "tried"
    # Fails the first time (leaving the marker), succeeds the second.
    flaky = f"setup:\n  - if [ ! -e {marker} ]; then touch {marker}; exit 1; fi\n"
    project.repo.commit(
        {
            "specs/warm.yaml": warm(extra=flaky),
            "specs/user.yaml": step_run("user", "echo ran > {outputs.out.path}"),
        }
    )
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert (project.root / "runs/user/out.txt").read_text() == "ran\n"
    first, second = allocations(project)
    assert first["hash"] == second["hash"]  # the same spec, allocated again
    assert first["state"].startswith("CANCELLED") and second["state"] == "RUNNING"
    plan = project.recon("plan", ".")
    assert "~ reuse     warm" in plan.stdout, plan.stdout


@pytest.mark.parametrize("options", ["", "  writable: true\n  workdir: /workspace\n"])
def test_a_container_is_refused_where_pyxis_is_not(project: Project, options: str) -> None:
    # The dev cluster has no pyxis (srun --help shows only Slurm's own --container): a
    # container, with or without pyxis's options, is refused before anything is made.
    container = "container:\n  image: ubuntu:22.04\n" + options
    project.repo.commit(
        {
            "specs/warm.yaml": warm(extra=container),
            "specs/user.yaml": step_run("user", "true"),
        }
    )
    plan = project.recon("plan", ".")
    assert "blocked   warm" in plan.stdout and "needs pyxis" in plan.stdout, plan.stdout
    assert "allocation warm is blocked" in plan.stdout
    project.apply()
    assert allocations(project) == []
