"""CPUs on every backend: a job asking more than the scheduler has at all is accepted and
waits, never running, with Slurm's reason, until it is cancelled."""

from __future__ import annotations

import time

from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import Harness, final


def test_a_job_asking_more_cpus_than_exist_waits_and_never_runs(backend: Harness) -> None:
    job_id = backend.submit("huge", "echo ran", header=["--cpus-per-task=4096"])
    # Slurm sets the reason at its next scheduling cycle; locally it is there at once.
    backend.wait("huge", lambda job: job.components[0].reason == "PartitionConfig")
    time.sleep(2)
    job = backend.job("huge")
    assert job is not None and job.health is Health.PENDING
    assert (job.components[0].start, job.components[0].nodes) == (None, None)
    backend.scheduler.cancel(job_id)
    cancelled = backend.wait("huge", final)
    assert cancelled.components[0].state is SlurmState.CANCELLED
    assert not backend.log("huge", job_id).exists()
