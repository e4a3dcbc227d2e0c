"""CPUs on every backend: a job asking more than the scheduler has at all never runs. It
is accepted and waits, with Slurm's reason, until it is cancelled; or, on Slurm 24.11, it
is refused at submission (tests/unit/test_slurm_releases.py has both releases' words)."""

from __future__ import annotations

import time

import pytest

from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import Harness, final
from tests.slurmrelease import SLURM_24_11


def test_a_job_asking_more_cpus_than_exist_waits_and_never_runs(backend: Harness) -> None:
    if backend.slurm_release() == SLURM_24_11:
        with pytest.raises(PermanentSchedulerError, match="node configuration is not available"):
            backend.submit("huge", "echo ran", header=["--cpus-per-task=4096"])
        # slurmctld made the job all the same, and failed it before it ever started.
        refused = backend.wait("huge", final)
        assert refused.health is Health.FAILED
        assert (refused.components[0].start, refused.components[0].nodes) == (None, None)
        assert not list(backend.workdir.iterdir())  # no log: it never ran
        return
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
