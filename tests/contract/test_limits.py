"""A job's limits on every backend: past its memory it ends OUT_OF_MEMORY, and past its
time limit it ends TIMEOUT, warned first by the signal it asked for (``--signal``).

Every script the harness makes asks ``--mem=100M``. On Slurm a cgroup caps the job
(the dev cluster's task/cgroup); locally the supervisor reads the job's resident memory.
A time limit of ``0:05`` is 5 s locally and one minute on Slurm (its limits are whole
minutes), which ends the job 60 to 90 s after it starts (it checks limits every 30 s).
"""

from __future__ import annotations

import re

import pytest

from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import SIM_NO_LIMITS, Harness, final

# Written byte by byte, so resident, not only reserved; held, so a look once a second
# cannot miss it.
HOG = "python3 -c 'import time; held = b\"x\" * (400 << 20); time.sleep(60)'"
SLURM_TIMEOUT = 150.0


@pytest.mark.beyond(simcluster=SIM_NO_LIMITS)
def test_a_job_past_its_memory_ends_out_of_memory(backend: Harness) -> None:
    job_id = backend.submit("hog", HOG)
    job = backend.wait("hog", final)
    (component,) = job.components
    assert (job.job_id, component.state, job.health) == (
        job_id,
        SlurmState.OUT_OF_MEMORY,
        Health.FAILED,
    )
    # Both say why in the job's log (slurmstepd: "oom-kill" or "oom_kill"; locally --mem).
    assert re.search(r"oom.kill|over its --mem", backend.log("hog", job_id).read_text())


def test_a_job_within_its_memory_completes(backend: Harness) -> None:
    backend.submit("small", "python3 -c 'import time; held = b\"x\" * (20 << 20); time.sleep(2)'")
    assert backend.wait("small", final).components[0].state is SlurmState.COMPLETED


@pytest.mark.beyond(simcluster=SIM_NO_LIMITS)
def test_a_job_past_its_time_limit_is_warned_then_times_out(backend: Harness) -> None:
    # The trap runs as soon as `wait` returns on the signal (a foreground sleep would hold
    # it back); `|| true` because set -e would end the script on that return.
    job_id = backend.submit(
        "slow",
        "started=$SECONDS\n"
        "trap 'echo \"USR1 after $((SECONDS - started)) s\"' USR1\n"
        "while true; do sleep 1 & wait $! || true; done",
        header=["--time=0:05", "--signal=B:USR1@3"],
    )
    job = backend.wait("slow", final, timeout=SLURM_TIMEOUT)
    (component,) = job.components
    assert (job.job_id, component.state, job.health) == (job_id, SlurmState.TIMEOUT, Health.FAILED)
    warned = re.findall(r"USR1 after (\d+) s", backend.log("slow", job_id).read_text())
    assert len(warned) == 1, backend.log("slow", job_id).read_text()
    assert component.elapsed is not None
    # Locally 3 s before the 5 s limit; Slurm may send it "up to 60 seconds earlier".
    assert int(warned[0]) < component.elapsed.total_seconds()
    if backend.slurm_release() is None:
        assert int(warned[0]) == 2 and component.elapsed.total_seconds() < 5 + 2
