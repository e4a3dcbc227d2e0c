"""The local backend's GPUs and cores, on real processes: what a job is handed is what it sees.

GPUs are declared with ``RECON_LOCAL_GPUS`` (this machine has none) or found by a stand-in
``nvidia-smi`` on PATH; each job reads ``CUDA_VISIBLE_DEVICES`` and its CPU affinity from
inside, into its log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.scheduler.base import Held
from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.select import select_scheduler
from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import Harness, final, has
from tests.docs import shown_block
from tests.gitrepo import GitRepo
from tests.projects import new_project_name

# The job blocks until a file named after it exists, so the test decides when it ends.
HOLD = (
    'echo "$CUDA_VISIBLE_DEVICES"\nwhile [ ! -e "$RELEASE_DIR/$SLURM_JOB_ID" ]; do sleep 0.05; done'
)
AFFINITY = f"{sys.executable} -c 'import os; print(sorted(os.sched_getaffinity(0)))'"


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    made = tmp_path / "work"
    made.mkdir()
    return made


@pytest.fixture
def two_gpus(tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Harness]:
    """A machine declared with two GPUs (and CPUs to spare: only GPUs make jobs wait)."""
    monkeypatch.setenv("RECON_LOCAL_GPUS", "2")
    monkeypatch.setenv("RECON_LOCAL_CPUS", "8")
    monkeypatch.setenv("RELEASE_DIR", str(tmp_path))
    harness = Harness(select_scheduler("local", tmp_path / "state"), workdir)
    yield harness
    harness.cancel_all()


def first_line(harness: Harness, name: str, job_id: str) -> str:
    """The first line the job wrote to its log, once it has written one."""
    log = harness.log(name, job_id)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if log.exists() and log.read_text().endswith("\n"):
            return log.read_text().splitlines()[0]
        time.sleep(0.05)
    raise AssertionError(f"{name} wrote nothing to {log}")


def release(tmp_path: Path, job_id: str) -> None:
    (tmp_path / job_id).touch()


def test_two_gpu_jobs_get_different_devices_and_a_third_waits_for_one(
    two_gpus: Harness, tmp_path: Path
) -> None:
    harness = two_gpus
    first = harness.submit("first", HOLD, header=["--gres=gpu:a100:1"])
    second = harness.submit("second", HOLD, header=["--gres=gpu:1"])
    third = harness.submit("third", HOLD, header=["--gpus=1"])
    for name in ("first", "second"):
        (row,) = harness.wait(name, has(Health.RUNNING)).components
        # What it holds, as sacct's AllocTRES would say it: `recon cost` counts its GPU.
        assert row.held == Held(cpus=1, gpus=1, nodes=1)
    devices = {first_line(harness, "first", first), first_line(harness, "second", second)}
    assert devices == {"0", "1"}
    waiting = harness.job("third")
    assert waiting is not None
    (row,) = waiting.components
    assert (row.state, row.reason) == (SlurmState.PENDING, "Resources")
    # The first ends: the third starts on the device it held, and on no other.
    release(tmp_path, first)
    harness.wait("first", final)
    harness.wait("third", has(Health.RUNNING))
    assert first_line(harness, "third", third) == first_line(harness, "first", first)
    for job_id in (second, third):
        release(tmp_path, job_id)
    assert harness.wait("third", final).health is Health.SUCCEEDED


def test_a_job_asking_two_gpus_sees_both_and_one_asking_none_is_handed_none(
    two_gpus: Harness, tmp_path: Path
) -> None:
    harness = two_gpus
    both = harness.submit("both", HOLD, header=["--gres=gpu:2"])
    harness.wait("both", has(Health.RUNNING))
    assert first_line(harness, "both", both) == "0,1"
    # A job asking no GPU is not kept waiting by the GPUs held, nor handed one.
    plain = harness.submit("plain", 'echo "${SLURM_JOB_GPUS:-none}"')
    assert harness.wait("plain", final).health is Health.SUCCEEDED
    assert first_line(harness, "plain", plain) == "none"
    release(tmp_path, both)


def test_on_a_machine_with_no_gpu_a_gpu_job_never_runs(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend itself never runs it (the plan refuses such a run before: see
    test_a_gpu_run_is_blocked_on_a_machine_with_no_gpu)."""
    monkeypatch.setenv("RECON_LOCAL_GPUS", "none")
    harness = Harness(select_scheduler("local", tmp_path / "state"), workdir)
    try:
        harness.submit("gpu", "echo ran", header=["--gres=gpu:1"])
        harness.submit("cpu", "echo ran")
        assert harness.wait("cpu", final).health is Health.SUCCEEDED
        job = harness.job("gpu")
        assert job is not None
        (row,) = job.components
        assert (row.state, row.reason) == (SlurmState.PENDING, "PartitionConfig")
    finally:
        harness.cancel_all()


def test_a_job_sees_only_the_cores_of_its_cpus(tmp_path: Path, workdir: Path) -> None:
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("needs a machine with two cores at least")
    harness = Harness(LocalScheduler(tmp_path / "state", cpus=len(cores), gpus=()), workdir)
    hold = f"{AFFINITY}\nwhile [ ! -e {tmp_path}/$SLURM_JOB_ID ]; do sleep 0.05; done"
    try:
        one = harness.submit("one", hold, header=["--cpus-per-task=1"])
        other = harness.submit("other", hold, header=["--cpus-per-task=1"])
        seen = [first_line(harness, "one", one), first_line(harness, "other", other)]
        # One core each, and not the same one.
        assert seen == [str(cores[:1]), str(cores[1:2])]
        for job_id in (one, other):
            release(tmp_path, job_id)
        harness.wait("other", final)
        every = harness.submit("every", AFFINITY, header=[f"--cpus-per-task={len(cores)}"])
        assert harness.wait("every", final).health is Health.SUCCEEDED
        assert first_line(harness, "every", every) == str(cores)
    finally:
        harness.cancel_all()


def test_an_inheriting_job_gets_the_submitters_environment_and_no_value_on_disk(
    tmp_path: Path, workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = uuid.uuid4().hex
    monkeypatch.setenv("AN_UNLISTED_TOKEN", secret)
    monkeypatch.setenv("SLURM_FROM_AN_OUTER_JOB", "leaked")
    scheduler = LocalScheduler(tmp_path / "state", cpus=1, gpus=())
    harness = Harness(scheduler, workdir)
    body = 'echo "$AN_UNLISTED_TOKEN ${SLURM_FROM_AN_OUTER_JOB:-unset} $SLURM_JOB_ID"'
    job_id = harness.submit("inherit", body)
    try:
        assert harness.wait("inherit", final).health is Health.SUCCEEDED
    finally:
        harness.cancel_all()
    assert first_line(harness, "inherit", job_id) == f"{secret} unset {job_id}"
    stored = scheduler.root / "jobs" / job_id
    assert all(secret not in path.read_text() for path in stored.iterdir() if path.is_file())


GPU_RUN = """\
kind: Run
name: train
command: 'echo "$CUDA_VISIBLE_DEVICES $AN_UNLISTED_SETTING" > {outputs.out.path}'
resources: {gpus: "a100:1"}
environment: {inherit: true}
outputs:
  out: out.txt
"""
NO_GPU = (
    "does not fit the cluster: asks 1 GPU in all; this machine has none (the local backend "
    "hands out only the GPUs that RECON_LOCAL_GPUS or recon.yaml's local.gpus declares or, "
    "where neither does, that nvidia-smi -L lists)"
)


def gpu_project(tmp_path: Path, nvidia_smi: str) -> tuple[GitRepo, dict[str, str]]:
    """A project of one GPU run, and the environment to run recon in: a stand-in
    ``nvidia-smi`` running ``nvidia_smi`` first on PATH, no RECON_LOCAL_GPUS."""
    repo = GitRepo(tmp_path / "repo")
    repo.write({"recon.yaml": f"project: {new_project_name('gpu')}\nscheduler: local\n"})
    repo.commit({"specs/train.yaml": GPU_RUN})
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "nvidia-smi").write_text(f"#!/bin/sh\n{nvidia_smi}\n")
    (bin_dir / "nvidia-smi").chmod(0o755)
    env = {
        "PATH": f"{bin_dir}:/usr/bin:/bin",
        "HOME": str(repo.root),
        "RECON_LOCAL_CPUS": "2",
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    return repo, env


def recon(repo: GitRepo, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        cwd=repo.root,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )


def test_a_gpu_run_is_blocked_on_a_machine_with_no_gpu(tmp_path: Path) -> None:
    failing = (
        "echo 'NVIDIA-SMI has failed because it could not communicate with the driver'; exit 9"
    )
    repo, env = gpu_project(tmp_path, failing)
    planned = recon(repo, env, "plan", ".")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    assert f"  ! blocked   train          {NO_GPU}\n" in planned.stdout, planned.stdout
    shown = shown_block(
        "docs/specs.md: ! blocked   train          does not fit the cluster: asks 1"
    )
    assert shown.body in planned.stdout, f"{shown.where}: the planner prints\n{planned.stdout}"
    applied = recon(repo, env, "apply", ".", "--auto-approve")
    assert "No changes to the cluster; 1 run blocked." in applied.stdout, applied.stdout
    (row,) = json.loads(recon(repo, env, "status", ".", "--format", "json").stdout)
    assert (row["name"], row["health"], row["cause"]) == ("train", "blocked", "does_not_fit")
    assert row["reason"] == f"blocked: {NO_GPU}"
    # Nothing was submitted: no job ran without its GPU.
    assert not (repo.root / ".recon" / "local" / "jobs").exists()


def test_a_gpu_run_gets_the_gpu_nvidia_smi_lists_and_the_appliers_environment(
    tmp_path: Path,
) -> None:
    listed = "echo 'GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5a1c0f3e-0000-0000-0000-000000000000)'"
    repo, env = gpu_project(tmp_path, listed)
    planned = recon(repo, env, "plan", ".")
    # The plan says the run takes the environment of whoever applies, and it does.
    assert "Results depend on who applies: run train takes the environment" in planned.stdout
    done = recon(
        repo, {**env, "AN_UNLISTED_SETTING": "applier's"}, "apply", ".", "--auto-approve", "--wait"
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert (repo.root / "runs/train/out.txt").read_text() == "0 applier's\n"
