"""A job's life on every backend: it completes, fails with its exit code, is cancelled."""

from __future__ import annotations

import os
import time
from dataclasses import replace

import pytest

from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import (
    SIM_NO_ACCOUNTING,
    SIM_NO_HET,
    SIM_RUNS_AT_ITS_END,
    Harness,
    final,
    has,
    quoted,
)


def test_a_job_completes_tagged_and_logs_where_its_script_says(backend: Harness) -> None:
    job_id = backend.submit("plain", 'echo "hello from $SLURM_JOB_ID"')
    job = backend.wait("plain", final)
    assert (job.job_id, job.tag, job.health) == (job_id, backend.tag("plain"), Health.SUCCEEDED)
    (component,) = job.components
    assert (component.state, component.exit_code) == (SlurmState.COMPLETED, 0)
    assert component.name == f"{backend.project}.plain"
    assert component.submit is not None and component.start is not None
    assert component.end is not None and component.submit <= component.start <= component.end
    assert backend.log("plain", job_id).read_text() == f"hello from {job_id}\n"


def test_a_failure_carries_its_exit_code(backend: Harness) -> None:
    job_id = backend.submit("broken", "echo trying; exit 3")
    job = backend.wait("broken", final)
    assert (job.job_id, job.health) == (job_id, Health.FAILED)
    (component,) = job.components
    assert (component.state, component.exit_code) == (SlurmState.FAILED, 3)
    assert backend.log("broken", job_id).read_text() == "trying\n"


@pytest.mark.beyond(simcluster=SIM_RUNS_AT_ITS_END)
def test_cancel_ends_a_running_job_and_cancelling_again_is_fine(backend: Harness) -> None:
    beats = backend.workdir / "beats"
    job_id = backend.submit("sleeper", f"while :; do echo beat >> {quoted(beats)}; sleep 0.1; done")
    backend.wait("sleeper", lambda job: job.health is Health.RUNNING and beats.exists())
    backend.scheduler.cancel(job_id)
    job = backend.wait("sleeper", final)
    assert job.health is Health.CANCELLED
    (component,) = job.components
    assert (component.state, component.cancelled_by) == (SlurmState.CANCELLED, os.getuid())
    # Its processes are gone, not just its record: the heart stops beating.
    time.sleep(0.5)
    stopped = beats.stat().st_size
    time.sleep(1.0)
    assert beats.stat().st_size == stopped
    backend.scheduler.cancel(job_id)
    again = backend.job("sleeper")
    # The same end. Not the same rows: squeue drops an ended job after a while, and
    # accounting completes its record (the elapsed time of a job cancelled under load).
    assert again is not None and (again.job_id, again.health) == (job.job_id, job.health)
    assert [(c.state, c.cancelled_by) for c in again.components] == [
        (c.state, c.cancelled_by) for c in job.components
    ]


def test_a_cancelled_job_is_observed_cancelled_by_its_user_with_exit_code_0(
    backend: Harness,
) -> None:
    """What sacct says of a job scancel ended (CANCELLED by <uid>, ExitCode 0:0 or 0:15),
    which the doubles answer too; cancelling it again is fine."""
    started = backend.workdir / "started"
    job_id = backend.submit("stopped", f"touch {quoted(started)}; sleep 30")

    # Once its script runs and accounting lists its batch step: Slurm lists a job RUNNING
    # while slurmd still launches it, and a batch step cancelled in its first moments may
    # end FAILED (22.05 under load: the job CANCELLED by its user, its batch step FAILED
    # 15:0 in the same second). The simcluster runs a script only when the job ends, so it
    # cannot be waited for there.
    def running(job: ObservedJob) -> bool:
        if backend.cluster is not None:
            return job.health is Health.RUNNING
        launched = backend.kind != "slurm" or any(step.step == "batch" for step in job.steps)
        return job.health is Health.RUNNING and started.exists() and launched

    backend.wait("stopped", running)
    backend.scheduler.cancel(job_id)
    job = backend.wait("stopped", final)
    (component,) = job.components
    assert (job.job_id, job.health, job.finished) == (job_id, Health.CANCELLED, True), job.rows
    assert (component.state, component.cancelled_by, component.exit_code) == (
        SlurmState.CANCELLED,
        os.getuid(),
        0,
    )
    assert component.start is not None and component.end is not None
    assert component.start <= component.end
    backend.scheduler.cancel(job_id)


def test_cancelling_a_job_that_never_existed_is_fine(backend: Harness) -> None:
    backend.scheduler.cancel("999999999")


HET = [
    "--partition=cpu",
    "--cpus-per-task=1",
    "hetjob",
    "--partition=gpu",
    "--cpus-per-task=1",
]


@pytest.mark.beyond(simcluster=SIM_NO_HET)
def test_a_het_job_is_one_job_whose_components_run_together(backend: Harness) -> None:
    body = (
        'echo "nodes known: ${SLURM_JOB_NODELIST_HET_GROUP_0:+0}'
        ' ${SLURM_JOB_NODELIST_HET_GROUP_1:+1}"\n'
        "srun --het-group=1 echo from component 1"
    )
    job_id = backend.submit("het", body, header=HET)
    job = backend.wait("het", final)
    assert (job.job_id, job.health) == (job_id, Health.SUCCEEDED)
    assert [(c.job_id, c.het_offset, c.tag) for c in job.components] == [
        (f"{job_id}+0", 0, backend.tag("het")),
        (f"{job_id}+1", 1, backend.tag("het")),
    ]
    assert backend.log("het", job_id).read_text() == "nodes known: 0 1\nfrom component 1\n"


def test_a_running_job_is_seen_running_with_its_start(backend: Harness) -> None:
    job_id = backend.submit("runner", "sleep 30")
    job = backend.wait("runner", has(Health.RUNNING))
    (component,) = job.components
    assert (job.job_id, component.state, component.end) == (job_id, SlurmState.RUNNING, None)
    assert component.start is not None and component.nodes
    backend.scheduler.cancel(job_id)


def test_a_finished_job_reports_what_it_held_and_for_how_long(backend: Harness) -> None:
    """Accounting for `recon cost`: what each component held (CPUs; GPUs where asked)
    and its elapsed time, as sacct's AllocTRES and ElapsedRaw say it, on every backend."""
    from reconciler.scheduler.usage import usage_of

    backend.submit("held", "sleep 2", header=["--cpus-per-task=2"])
    job = backend.wait("held", final)
    (component,) = job.components
    assert component.held is not None and component.held.cpus == 2
    assert component.elapsed is not None and component.elapsed.total_seconds() >= 1
    assert component.start is not None and component.end is not None
    usage = usage_of(job)
    assert usage is not None and usage.cpus == 2
    assert usage.cpu_s == 2 * component.elapsed.total_seconds() and usage.gpu_s == 0


@pytest.mark.beyond(simcluster=SIM_NO_ACCOUNTING)
def test_the_accounting_of_an_ended_job_is_asked_by_its_id(backend: Harness) -> None:
    """`recon cost`'s back-fill: a job named by its id, long after a pass would look for
    it, reads as the pass read it (the same usage); an id the scheduler never handed out
    is simply not there."""
    from datetime import UTC, datetime, timedelta

    from reconciler.scheduler.base import AccountingScheduler
    from reconciler.scheduler.usage import usage_of

    job_id = backend.submit("held", "sleep 1", header=["--cpus-per-task=2"])
    seen = backend.wait("held", final)
    assert isinstance(backend.scheduler, AccountingScheduler)
    until = datetime.now(UTC) + timedelta(minutes=1)
    # Accounting alone names the job by its tag only once slurmdbd has its end (the
    # comment comes with it; a pass reads it from squeue until then): back-fill asks
    # long after, the test waits for it.
    deadline = time.monotonic() + 60
    while True:
        listed = backend.scheduler.accounting([job_id, "99999997"], backend.since, until)
        named = [job for job in listed.jobs if job.tag.project == backend.project]
        if named or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    (found,) = named
    assert found.job_id == job_id and {job.job_id for job in listed.jobs} <= {job_id}
    usage, seen_usage = usage_of(found), usage_of(seen)
    assert usage is not None and seen_usage is not None
    # The time limit is the job's own (--time=5) from accounting; a pass that still saw
    # the job in squeue took it from there, one that did not may not have it.
    assert usage.time_limit_s == 300
    assert replace(usage, time_limit_s=None) == replace(seen_usage, time_limit_s=None)


# A job that holds about 200 MiB (every page written, so it is resident) and keeps one CPU
# busy for 4 s: longer than the dev clusters' accounting samples (JobAcctGatherFrequency
# task=2), so a sampling gatherer sees its peak too.
HUNGRY = """python3 - <<'PY'
import time
block = bytearray(200 * 1024 * 1024)
for page in range(0, len(block), 4096):
    block[page] = 1
start = time.process_time()
while time.process_time() - start < 4:
    pass
PY"""


def _gatherer(backend: Harness) -> str:
    """The scheduler's accounting gatherer: Slurm's JobAcctGatherType; the local
    backend's own measure of its children; none in the doubles, which run scripts
    unmeasured."""
    import subprocess

    if backend.kind != "slurm":
        return "local" if backend.kind == "local" else "jobacct_gather/none"
    shown = subprocess.run(["scontrol", "show", "config"], capture_output=True, text=True)
    line = next(line for line in shown.stdout.splitlines() if line.startswith("JobAcctGatherType"))
    return line.partition("=")[2].strip()


def test_a_finished_job_reports_its_peak_memory_and_cpu_time(backend: Harness) -> None:
    """Right-sizing's figures (sacct's MaxRSS and TotalCPU; the local backend's rusage of
    the script): a job that held ~200 MiB and 4 s of CPU shows them. Where Slurm runs no
    gatherer they are unknown, never read as zero."""
    from reconciler.scheduler.usage import usage_of

    backend.submit("hungry", HUNGRY, header=["--mem=1G"])
    job = backend.wait("hungry", final)
    assert job.health is Health.SUCCEEDED
    if backend.kind == "slurm":  # the batch step's accounting follows its end
        deadline = time.monotonic() + 30
        while not any(row.peak_memory_mb for row in job.rows) and time.monotonic() < deadline:
            time.sleep(1)
            job = backend.job("hungry") or job
    usage = usage_of(job)
    assert usage is not None
    if _gatherer(backend) == "jobacct_gather/none":
        assert (usage.peak_memory_mb, usage.cpu_time_s) == (None, None)
        return
    assert usage.peak_memory_mb is not None and 200 <= usage.peak_memory_mb <= 400
    assert usage.cpu_time_s is not None and 3.5 <= usage.cpu_time_s <= 4 + usage.elapsed_s
