"""LocalScheduler beyond the contract: what only a local backend can promise or show.

Real processes, short scripts: CPUs never oversubscribed, process groups ended, stray
processes reaped, time limits, the job's environment, refusals, allocations.
"""

from __future__ import annotations

import json
import os
import signal
import stat
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.desired.models import Allocation
from reconciler.errors import PermanentSchedulerError, TransientSchedulerError
from reconciler.scheduler.base import AllocateRequest, ArrayRequest, JobRecord, SubmitRequest
from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.local.scheduler import CLOCK_STEP_BACK
from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import Harness, final, has, quoted

Local = Callable[..., Harness]


@pytest.fixture
def local(tmp_path: Path) -> Iterator[Local]:
    """Makes the test's harness (CPUs as asked); its jobs are cancelled when it ends."""
    made: list[Harness] = []

    def make(cpus: int = 2) -> Harness:
        workdir = tmp_path / "work"
        workdir.mkdir(exist_ok=True)
        made.append(Harness(LocalScheduler(tmp_path / "state", cpus=cpus), workdir))
        return made[-1]

    yield make
    for harness in made:
        harness.cancel_all()


@pytest.fixture
def harness(local: Local) -> Harness:
    return local()


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is dead too: it only waits for its parent (init here) to reap it.
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rsplit(")", 1)[1].split()[0] != "Z"


def wait_dead(pid: int, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while alive(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def only(harness: Harness, name: str) -> JobRecord:
    job = harness.job(name)
    assert job is not None
    (component,) = job.components
    return component


def test_jobs_never_hold_more_cpus_than_there_are(local: Local) -> None:
    harness = local(cpus=2)
    first = harness.submit("first", "sleep 1", header=["--cpus-per-task=2"])
    harness.submit("second", "sleep 0.2", header=["--cpus-per-task=1"])
    harness.wait("first", has(Health.RUNNING))
    second = only(harness, "second")
    assert (second.state, second.reason) == (SlurmState.PENDING, "Resources")
    one, two = harness.wait("first", final), harness.wait("second", final)
    one_end, two_start = one.components[0].end, two.components[0].start
    assert one_end is not None and two_start is not None and two_start >= one_end
    assert one.job_id == first


def test_a_job_behind_a_waiting_one_waits_with_priority(local: Local) -> None:
    harness = local(cpus=2)
    harness.submit("running", "sleep 30", header=["--cpus-per-task=1"])
    harness.wait("running", has(Health.RUNNING))
    harness.submit("big", "true", header=["--cpus-per-task=2"])
    harness.submit("small", "true", header=["--cpus-per-task=1"])
    assert (only(harness, "big").reason, only(harness, "small").reason) == (
        "Resources",
        "Priority",
    )


def test_cancel_ends_every_process_of_the_job(harness: Harness) -> None:
    pid_file = harness.workdir / "child.pid"
    job_id = harness.submit("parent", f"sleep 300 & echo $! > {quoted(pid_file)}; wait")
    harness.wait("parent", lambda job: job.health is Health.RUNNING and pid_file.exists())
    child = int(pid_file.read_text())
    assert alive(child)
    harness.scheduler.cancel(job_id)
    harness.wait("parent", final)
    assert wait_dead(child)


def test_processes_a_job_leaves_behind_are_ended_with_it(harness: Harness) -> None:
    pid_file = harness.workdir / "stray.pid"
    harness.submit("leaver", f"sleep 300 & echo $! > {quoted(pid_file)}")
    job = harness.wait("leaver", final)
    assert job.health is Health.SUCCEEDED
    assert wait_dead(int(pid_file.read_text()))


def test_a_job_past_its_time_limit_times_out(harness: Harness) -> None:
    job_id = harness.submit("slow", "sleep 30", header=["--time=0:01"])
    job = harness.wait("slow", final)
    (component,) = job.components
    assert (job.job_id, component.state, component.reason) == (
        job_id,
        SlurmState.TIMEOUT,
        "TimeLimit",
    )
    assert job.health is Health.FAILED


def test_a_running_job_with_a_limit_shows_its_time_left(harness: Harness) -> None:
    harness.submit("limited", "sleep 30", header=["--time=10"])
    job = harness.wait("limited", has(Health.RUNNING))
    left = job.components[0].time_left
    assert left is not None and 9 * 60 < left.total_seconds() <= 10 * 60


def test_the_job_environment(harness: Harness, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SLURM_FROM_AN_OUTER_JOB", "leaked")
    monkeypatch.setenv("RECON_TEST_VALUE", "kept")
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    body = (
        'echo "$SLURM_JOB_ID ${SLURM_FROM_AN_OUTER_JOB:-unset} $RECON_TEST_VALUE'
        ' ${CUDA_VISIBLE_DEVICES:-none} $SLURM_CPUS_PER_TASK $(pwd)"\n'
        "command -v srun"
    )
    job_id = harness.submit("env", body, header=["--cpus-per-task=2"])
    assert harness.wait("env", final).health is Health.SUCCEEDED
    values, srun = harness.log("env", job_id).read_text().splitlines()
    assert values == f"{job_id} unset kept none 2 {harness.workdir}"
    assert srun == str(tmp_root(harness) / "local" / "bin" / "srun")


def tmp_root(harness: Harness) -> Path:
    assert isinstance(harness.scheduler, LocalScheduler)
    return harness.scheduler.root.parent


def test_srun_runs_its_command_whatever_its_options(harness: Harness) -> None:
    body = (
        "srun --het-group=1 -n 2 --label --cpus-per-task 1 -c1 printf '%s\\n' one\n"
        "srun -- printf '%s\\n' two\n"
        "srun --exclusive printf '%s\\n' three\n"
        "! srun --ntasks=1 2>/dev/null"
    )
    job_id = harness.submit("srun", body)
    assert harness.wait("srun", final).health is Health.SUCCEEDED
    assert harness.log("srun", job_id).read_text() == "one\ntwo\nthree\n"


def test_stderr_goes_where_error_says(harness: Harness) -> None:
    job_id = harness.submit(
        "split", "echo out; echo err >&2", header=[f"--error={harness.workdir}/e-%j.err"]
    )
    harness.wait("split", final)
    assert harness.log("split", job_id).read_text() == "out\n"
    assert (harness.workdir / f"e-{job_id}.err").read_text() == "err\n"


def test_without_output_the_log_is_slurms_default_in_the_workdir(harness: Harness) -> None:
    script = "#!/bin/sh\necho default\n"
    job_id = harness.scheduler.submit(
        SubmitRequest(script=script, workdir=harness.workdir, tag=harness.tag("default"))
    )
    harness.job_ids.append(job_id)
    harness.wait("default", final)
    assert (harness.workdir / f"slurm-{job_id}.out").read_text() == "default\n"


def test_a_log_directory_that_does_not_exist_fails_the_job(harness: Harness) -> None:
    job_id = harness.submit("nolog", "echo ran", header=["--output=/nonexistent/dir/%j.out"])
    job = harness.wait("nolog", final)
    assert (job.job_id, job.health, job.components[0].start is not None) == (
        job_id,
        Health.FAILED,
        True,
    )


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ("echo no shebang\n", "does not start with #!"),
        ("#!/bin/sh\n#SBATCH --cpus-per-task=lots\ntrue\n", "--cpus-per-task=lots"),
    ],
)
def test_scripts_sbatch_would_refuse_are_refused(
    harness: Harness, script: str, message: str
) -> None:
    request = SubmitRequest(script=script, workdir=harness.workdir, tag=harness.tag("bad"))
    with pytest.raises(PermanentSchedulerError, match=message):
        harness.scheduler.submit(request)


def test_a_dependency_on_an_unknown_job_is_refused(harness: Harness) -> None:
    with pytest.raises(PermanentSchedulerError, match="Job dependency problem"):
        harness.submit("orphan", "true", dependencies=["4242"])


def test_ids_increase_from_one(harness: Harness) -> None:
    ids = [harness.submit(f"n{index}", "true") for index in range(3)]
    assert ids == ["1", "2", "3"]


def test_observing_a_state_dir_with_no_jobs_leaves_no_trace(tmp_path: Path) -> None:
    scheduler = LocalScheduler(tmp_path / "state")
    observation = scheduler.observe(Harness(scheduler, tmp_path).since)
    assert (observation.jobs, observation.complete) == ((), True)
    assert not (tmp_path / "state").exists()


def test_the_window_keeps_old_jobs_only_while_alive(harness: Harness) -> None:
    harness.submit("old-done", "true")
    harness.submit("old-running", "sleep 30")
    harness.wait("old-done", final)
    harness.wait("old-running", has(Health.RUNNING))
    later = harness.observe().taken_at
    names = {job.tag.name for job in harness.scheduler.observe(later).jobs}
    assert names == {"old-running"}


def allocation_spec(cpus: int, minutes: int) -> Allocation:
    return Allocation.model_validate(
        {"kind": "Allocation", "name": "ws", "time_limit": minutes,
         "resources": {"partition": "cpu", "cpus": cpus}}
    )  # fmt: skip


def test_an_allocation_holds_its_cpus_until_released(local: Local) -> None:
    harness = local(cpus=2)
    tag = harness.tag("ws").model_copy(update={"kind": "alloc"})
    job_id = harness.scheduler.allocate(
        AllocateRequest(allocation=allocation_spec(cpus=2, minutes=10), tag=tag)
    )
    held = harness.job("ws")
    assert held is not None and (held.job_id, held.health) == (job_id, Health.RUNNING)
    harness.submit("squeezed", "true")
    assert only(harness, "squeezed").reason == "Resources"
    harness.scheduler.release(job_id)
    assert harness.wait("ws", final).health is Health.CANCELLED
    assert harness.wait("squeezed", final).health is Health.SUCCEEDED


def test_a_killed_supervisor_reads_as_node_fail_and_its_cpus_are_given_on(
    local: Local,
) -> None:
    harness = local(cpus=1)
    job_id = harness.submit("victim", "sleep 300")
    harness.submit("next", "true")
    pid_file = tmp_root(harness) / "local" / "jobs" / job_id / "pid.json"
    harness.wait("victim", lambda job: job.health is Health.RUNNING and pid_file.exists())
    supervisor, group = _pids(pid_file.read_text())
    os.kill(supervisor, signal.SIGKILL)
    assert wait_dead(supervisor)
    lost = harness.wait("victim", lambda job: job.finished)
    assert (lost.components[0].state, lost.components[0].reason) == (
        SlurmState.NODE_FAIL,
        "SupervisorLost",
    )
    # Nothing ran a dispatch pass when the supervisor died; observing did.
    assert harness.wait("next", final).health is Health.SUCCEEDED
    os.killpg(group, signal.SIGKILL)


def _pids(text: str) -> tuple[int, int]:
    data = json.loads(text)
    return int(data["supervisor"]), int(data["group"])


def test_a_state_dir_that_cannot_be_written_stops_the_submit(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    scheduler = LocalScheduler(blocker / "state")
    request = SubmitRequest(
        script="#!/bin/sh\ntrue\n", workdir=tmp_path, tag=Harness(scheduler, tmp_path).tag("x")
    )
    with pytest.raises(TransientSchedulerError, match="state directory is writable"):
        scheduler.submit(request)


def test_secrets_in_the_environment_reach_an_inheriting_job_but_stay_off_disk(
    harness: Harness, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s3cr3t-value")
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    # No declared environment: the submitter's, whole, as the plan says an inheriting run
    # gets it; its values are passed by name.
    job_id = harness.submit("secret", 'echo "${AWS_SECRET_ACCESS_KEY:-unset} $LC_ALL"')
    assert harness.wait("secret", final).health is Health.SUCCEEDED
    assert harness.log("secret", job_id).read_text() == "s3cr3t-value C.UTF-8\n"
    job_dir = tmp_root(harness) / "local" / "jobs" / job_id
    for path in (p for p in job_dir.rglob("*") if p.is_file()):
        assert b"s3cr3t-value" not in path.read_bytes(), path
    assert stat.S_IMODE((job_dir / "env.json").stat().st_mode) == 0o600
    assert stat.S_IMODE(job_dir.parent.stat().st_mode) == 0o700


# --- job arrays (the contract suite holds both backends to the rest) ---------------------


def test_an_array_index_at_or_past_max_array_size_is_refused(harness: Harness) -> None:
    size = harness.scheduler.max_array_size()
    with pytest.raises(PermanentSchedulerError, match="Invalid job array specification"):
        harness.submit("big", "true", array=ArrayRequest(indices=(0, size)))
    assert harness.observe().jobs == ()


def test_a_dependency_on_an_array_task_that_does_not_exist_is_refused(harness: Harness) -> None:
    array_id = harness.submit("sweep", "true", array=ArrayRequest(indices=(0, 1)))
    with pytest.raises(PermanentSchedulerError, match=f"no local job {array_id}_2"):
        harness.submit("down", "true", dependencies=[f"{array_id}_2"])


def test_cancelling_an_array_ends_every_task_and_waiting_ones_read_as_one_range(
    harness: Harness,
) -> None:
    array_id = harness.submit(
        "sweep", "sleep 300", array=ArrayRequest(indices=(0, 1, 2, 3), max_parallel=1)
    )
    harness.wait("sweep", lambda job: job.tasks()[0].health is Health.RUNNING)
    waiting = harness.job("sweep")
    assert waiting is not None
    assert [(row.job_id, row.reason) for row in waiting.components] == [
        (f"{array_id}_0", None),
        (f"{array_id}_[1-3%1]", "JobArrayTaskLimit"),
    ]
    harness.scheduler.cancel(array_id)
    job = harness.wait("sweep", final)
    assert [row.job_id for row in job.components] == [f"{array_id}_0", f"{array_id}_[1-3]"]
    assert {task.components[0].state for task in job.tasks().values()} == {SlurmState.CANCELLED}
    assert list(job.tasks()) == [0, 1, 2, 3]


def test_an_array_is_reported_whole_while_any_task_is_in_the_window(harness: Harness) -> None:
    body = '[ "$SLURM_ARRAY_TASK_ID" = 0 ] || sleep 300'
    harness.submit("sweep", body, array=ArrayRequest(indices=(0, 1)))
    harness.wait("sweep", lambda job: final(job.tasks()[0]))
    # A window that starts long after the submit: task 0 is neither in it nor still
    # alive, task 1 runs on; the array is read and reported with both.
    later = harness.observe().taken_at + 2 * CLOCK_STEP_BACK
    (job,) = harness.scheduler.observe(later).jobs
    assert list(job.tasks()) == [0, 1]
