"""SlurmScheduler on the real dev cluster: submit hand-written tagged scripts, observe them.

Every test tags its jobs with a project name of its own and observes from its own start,
so tests (and anything else sharing the cluster) never see each other's jobs.
"""

from __future__ import annotations

import os
import re
import subprocess
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.desired.models import Allocation
from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.base import (
    AllocateRequest,
    Observation,
    ObservedJob,
    StepRequest,
    SubmitRequest,
)
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.slurm.testing import RecordingRunner
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from tests.projects import new_project_name
from tests.slurmrelease import SLURM_22_05, slurm_release

pytestmark = pytest.mark.slurm

TIMEOUT = 60.0
HEADER = "#!/bin/bash\n#SBATCH --time=5\n#SBATCH --mem=100M\n"


class Harness:
    """One test's view of the cluster: its own project name and observation window."""

    def __init__(self, workdir: Path, scheduler: SlurmScheduler) -> None:
        self.project = new_project_name("it")
        self.since = datetime.now(UTC) - timedelta(seconds=5)
        self.workdir = workdir
        self.scheduler = scheduler

    def tag(self, name: str, kind: str = "run") -> Tag:
        return Tag.model_validate(
            {
                "project": self.project,
                "deployment": "0123456789ab",
                "kind": kind,
                "name": name,
                "spec_hash": "0123456789abcdef",
            }
        )

    def submit(self, name: str, body: str, dependencies: Sequence[str] = ()) -> str:
        script = HEADER + f"#SBATCH --output={self.workdir}/{name}-%j.out\n" + body
        request = SubmitRequest(
            script=script,
            workdir=self.workdir,
            dependencies=tuple(dependencies),
            tag=self.tag(name),
        )
        return self.scheduler.submit(request)

    def job(self, observation: Observation, name: str) -> ObservedJob | None:
        found = observation.find(self.project, name)
        assert len(found) <= 1, found
        return found[0] if found else None

    def wait(self, name: str, until: Callable[[ObservedJob], bool]) -> ObservedJob:
        """Observe every half second until the job of ``name`` satisfies ``until``."""
        deadline = time.monotonic() + TIMEOUT
        job = None
        while time.monotonic() < deadline:
            job = self.job(self.scheduler.observe(self.since), name)
            if job is not None and until(job):
                return job
            time.sleep(0.5)
        raise AssertionError(f"{name} not as expected after {TIMEOUT} s: {job}")


def has(*healths: Health) -> Callable[[ObservedJob], bool]:
    return lambda job: job.health in healths


def final(job: ObservedJob) -> bool:
    """Every component over, and known to sacct (its steps and exit codes are in)."""
    return job.finished and all(row.exit_code is not None for row in job.components)


@pytest.fixture
def harness(tmp_path: Path) -> Harness:
    return Harness(tmp_path, SlurmScheduler())


def test_a_plain_run_completes(harness: Harness) -> None:
    job_id = harness.submit("plain", "#SBATCH --partition=cpu\necho hello from $SLURM_JOB_ID\n")
    job = harness.wait("plain", final)
    assert (job.job_id, job.tag, job.health) == (job_id, harness.tag("plain"), Health.SUCCEEDED)
    (component,) = job.components
    assert (component.state, component.exit_code, component.partition) == (
        SlurmState.COMPLETED,
        0,
        "cpu",
    )
    assert component.name == f"{harness.project}.plain"
    assert "batch" in {step.step for step in job.steps}
    output = (harness.workdir / f"plain-{job_id}.out").read_text()
    assert output == f"hello from {job_id}\n"


def test_a_gpu_run_sees_the_gpus_it_asked_for(harness: Harness) -> None:
    body = (
        "#SBATCH --partition=gpu\n#SBATCH --gres=gpu:a100:2\n"
        "echo CUDA_VISIBLE_DEVICES=$CUDA_VISIBLE_DEVICES\n"
        "scontrol show job -d $SLURM_JOB_ID | grep -o 'IDX:[0-9,-]*'\n"
    )
    job_id = harness.submit("gpu", body)
    job = harness.wait("gpu", final)
    assert job.health is Health.SUCCEEDED and job.components[0].nodes == "gpu1"
    cuda, index = (harness.workdir / f"gpu-{job_id}.out").read_text().splitlines()
    # Slurm hands out the lowest free devices; on an idle gpu1 that is 0 and 1. Whatever it
    # picked, the job's CUDA_VISIBLE_DEVICES must be the two devices Slurm says it holds.
    assert cuda == f"CUDA_VISIBLE_DEVICES={_expand(index.removeprefix('IDX:'))}"
    assert len(cuda.split("=")[1].split(",")) == 2


def _expand(indices: str) -> str:
    """Slurm's ``0-1,3`` as ``0,1,3``."""
    out: list[int] = []
    for part in indices.split(","):
        low, _, high = part.partition("-")
        out += range(int(low), int(high or low) + 1)
    return ",".join(map(str, out))


HET = (
    "#SBATCH --partition=cpu --cpus-per-task=1\n"
    "#SBATCH hetjob\n"
    "#SBATCH --partition=gpu --cpus-per-task=1 --gres=gpu:a100:1\n"
    "srun --het-group=1 bash -c 'echo component 1 on $(hostname)'\n"
)
HET_SLEEP = HET.replace("srun --het-group=1 bash -c 'echo component 1 on $(hostname)'", "sleep 300")


def test_a_het_job_is_one_job_with_both_components(harness: Harness) -> None:
    job_id = harness.submit("het", HET)
    job = harness.wait("het", final)
    assert job.job_id == job_id and job.health is Health.SUCCEEDED
    components = job.components
    assert [(c.job_id, c.het_offset, c.partition) for c in components] == [
        (f"{job_id}+0", 0, "cpu"),
        (f"{job_id}+1", 1, "gpu"),
    ]
    # sbatch propagates --comment to every component, so each carries the tag.
    assert all(c.tag == harness.tag("het") for c in components)
    owners = {step.job_id.split(".")[0] for step in job.steps}
    assert owners == {f"{job_id}+0", f"{job_id}+1"}  # the batch step, and the srun step


def test_a_failed_upstream_gets_its_dependent_cancelled_never_run(harness: Harness) -> None:
    # The upstream lives a few seconds: a dependency on a job slurmctld has already
    # forgotten (MinJobAge) is taken as met, and the dependent would run.
    upstream = harness.submit("up", "#SBATCH --partition=cpu\nsleep 3\nexit 1\n")
    downstream = harness.submit("down", "#SBATCH --partition=cpu\necho ran\n", [upstream])
    failed = harness.wait("up", final)
    assert failed.health is Health.FAILED and failed.components[0].exit_code == 1
    cancelled = harness.wait("down", final)
    assert (cancelled.job_id, cancelled.health) == (downstream, Health.CANCELLED)
    (component,) = cancelled.components
    assert component.reason is not None and component.reason.startswith("Dependency")
    assert (component.start, component.nodes, cancelled.steps) == (None, None, ())
    assert not list(harness.workdir.glob("down-*.out"))


def test_cancel_ends_a_running_job_and_cancelling_again_is_fine(harness: Harness) -> None:
    job_id = harness.submit("sleeper", "#SBATCH --partition=cpu\nsleep 300\n")
    harness.wait("sleeper", has(Health.RUNNING))
    harness.scheduler.cancel(job_id)
    job = harness.wait("sleeper", lambda j: final(j) and j.components[0].cancelled_by is not None)
    assert job.health is Health.CANCELLED
    assert job.components[0].cancelled_by == os.getuid()
    harness.scheduler.cancel(job_id)


def test_cancelling_a_het_leader_cancels_every_component(harness: Harness) -> None:
    job_id = harness.submit("hetsleep", HET_SLEEP)
    running = harness.wait("hetsleep", has(Health.RUNNING))
    assert len(running.components) == 2
    harness.scheduler.cancel(job_id)
    job = harness.wait("hetsleep", final)
    assert [c.state for c in job.components] == [SlurmState.CANCELLED, SlurmState.CANCELLED]


def test_a_requeued_job_is_pending_again_not_cancelled(tmp_path: Path) -> None:
    recording = RecordingRunner()
    # One sacct call after the other: the last one's text is the jobs' in full.
    harness = Harness(tmp_path, SlurmScheduler(recording, history_at_once=False))
    job_id = harness.submit("requeued", "#SBATCH --partition=cpu\nsleep 300\n")
    harness.wait("requeued", lambda j: any(step.step == "batch" for step in j.steps))
    stale_step = re.compile(rf"^{job_id}\.batch\|[^|]*\|CANCELLED", re.MULTILINE)
    try:
        subprocess.run(["scontrol", "requeue", job_id], check=True, timeout=30)
        # For a few seconds sacct still holds the first run, its batch step CANCELLED by the
        # requeue, while squeue has the job pending again: that must not read as cancelled.
        deadline = time.monotonic() + TIMEOUT
        while True:
            job = harness.job(harness.scheduler.observe(harness.since), "requeued")
            assert job is not None
            if job.components[0].state is SlurmState.PENDING:
                assert (job.health, job.steps) == (Health.PENDING, ())
                if stale_step.search(recording.stdout["sacct"]):
                    break
            assert time.monotonic() < deadline, "never saw sacct hold the first run"
            time.sleep(0.2)
    finally:
        harness.scheduler.cancel(job_id)


def test_one_observe_pass_runs_one_squeue_and_two_saccts(tmp_path: Path) -> None:
    """sacct's jobs' own rows, then recon's jobs among them in full: the three named."""
    recording = RecordingRunner()
    harness = Harness(tmp_path, SlurmScheduler(recording))
    # This project's allocations alone are asked for their steps: another's, running on
    # the shared cluster, would add a squeue. One sacct call after the other, to count.
    harness.scheduler = SlurmScheduler(recording, project=harness.project, history_at_once=False)
    made = [harness.submit(f"count{i}", "#SBATCH --partition=cpu\nsleep 1\n") for i in range(3)]
    recording.calls.clear()
    observation = harness.scheduler.observe(harness.since)
    assert recording.commands() == ["squeue", "sacct", "sacct"]
    assert "--allocations" in recording.calls[1]
    (named,) = [a for a in recording.calls[2] if a.startswith("--jobs=")]
    assert set(made) <= set(named.removeprefix("--jobs=").split(","))
    assert observation.complete
    assert len([j for j in observation.jobs if j.tag.project == harness.project]) == 3


def test_when_sacct_fails_live_jobs_are_seen_and_the_pass_is_incomplete(tmp_path: Path) -> None:
    message = "sacct: error: Problem talking to the database: Connection refused"
    harness = Harness(tmp_path, SlurmScheduler(RecordingRunner(fail={"sacct": message})))
    job_id = harness.submit("live", "#SBATCH --partition=cpu\nsleep 300\n")
    try:
        observation = harness.scheduler.observe(harness.since)
        assert not observation.complete
        assert any("Problem talking to the database" in p for p in observation.problems)
        job = harness.job(observation, "live")
        assert job is not None and job.job_id == job_id
        assert job.components[0].source == "squeue"
    finally:
        harness.scheduler.cancel(job_id)


def test_a_bad_partition_is_refused_with_slurms_own_message(harness: Harness) -> None:
    with pytest.raises(PermanentSchedulerError, match="Invalid partition name specified"):
        harness.submit("nowhere", "#SBATCH --partition=recon-no-such-partition\necho x\n")


def test_an_allocation_is_held_then_released(harness: Harness) -> None:
    tag = harness.tag("ws", kind="alloc")
    spec = Allocation.model_validate(
        {"kind": "Allocation", "name": "ws", "time_limit": 10,
         "resources": {"partition": "cpu", "cpus": 1, "memory": "100MiB"}}
    )  # fmt: skip
    request = AllocateRequest(allocation=spec, tag=tag)
    job_id = harness.scheduler.allocate(request)
    assert re.fullmatch(r"\d+", job_id)
    held = harness.wait("ws", has(Health.RUNNING))
    assert (held.job_id, held.tag.kind) == (job_id, "alloc")
    harness.scheduler.release(job_id)
    assert harness.wait("ws", final).health is Health.CANCELLED


def test_a_step_in_an_allocation_accounting_has_not_recorded_yet_is_observed(
    tmp_path: Path,
) -> None:
    """slurmctld records a job in accounting only on its next pass (every 5 s): sacct's
    window lists neither a fresh allocation nor the steps started in it until then. Such a
    step is observed from squeue. Tried until one pass meets that window (on 22.05 almost
    always the first: the pass comes within a second of the grant). 24.11 records the
    allocation as it grants it: there the window lists it at once, and every attempt
    checks the step is observed all the same."""
    recording = RecordingRunner()
    # One sacct call after the other: the last one's text is the window's in full.
    harness = Harness(tmp_path, SlurmScheduler(recording, project=None, history_at_once=False))
    spec = Allocation.model_validate(
        {"kind": "Allocation", "name": "fresh", "time_limit": 10,
         "resources": {"partition": "cpu", "cpus": 1, "memory": "100MiB"}}
    )  # fmt: skip
    script = tmp_path / "step.sh"
    script.write_text("sleep 30\n")
    unrecorded = []
    for attempt in range(4):
        job_id = harness.scheduler.allocate(
            AllocateRequest(allocation=spec, tag=harness.tag(f"fresh{attempt}", kind="alloc"))
        )
        try:
            step = StepRequest(
                allocation_id=job_id, script=script, workdir=tmp_path, log_dir=tmp_path,
                shape=None, tag=harness.tag(f"step{attempt}"),
            )  # fmt: skip
            step_id = harness.scheduler.start_step(step)
            assert step_id == f"{job_id}.0"
            observation = harness.scheduler.observe(harness.since)
            job = harness.job(observation, f"step{attempt}")
            assert job is not None and job.job_id == step_id, observation
            assert job.health is Health.RUNNING and observation.complete
            window = recording.stdout["sacct"].splitlines()
            if not any(line.split("|")[0].split(".")[0] == job_id for line in window):
                unrecorded.append(job_id)
                break
        finally:
            harness.scheduler.release(job_id)
    if slurm_release() == SLURM_22_05:
        assert unrecorded, "every allocation was in sacct's window already: the case was not met"
