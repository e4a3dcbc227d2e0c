"""The dev cluster ends jobs the ways a long run meets on a real cluster: preempted and
requeued by a higher partition's job, killed past its memory. Each is read back as the
SlurmState recon sees.

Raw sbatch, no recon: these hold the cluster itself to what recon's retries and
checkpoints rely on, on whichever release the tests run under. The time limit and its
warning signal, and memory once more, are in the contract suite (tests/contract/
test_limits.py), on this cluster and the local backend alike. Every job is cancelled at
the end, whatever happened.
"""

from __future__ import annotations

import re
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from reconciler.scheduler.states import SlurmState, parse_state
from tests.projects import new_project_name

pytestmark = pytest.mark.slurm


def slurm(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


def sbatch(*options: str) -> str:
    return slurm("sbatch", "--parsable", *options).strip().split(";")[0]


@pytest.fixture
def jobs() -> Iterator[list[str]]:
    """Job ids a test submits; all cancelled when it ends."""
    made: list[str] = []
    yield made
    if made:
        subprocess.run(["scancel", *made], capture_output=True, check=False, timeout=30)


def records(job_id: str) -> list[SlurmState]:
    """The job's states in sacct, one per time it ran (--duplicates: a requeued job keeps
    its id, and each run before the requeue stays as a record of its own)."""
    out = slurm(
        "sacct", "--parsable2", "--noheader", "--allocations", "--duplicates",
        "-j", job_id, "-o", "State",
    )  # fmt: skip
    parsed = [parse_state(line) for line in out.splitlines()]
    return [found[0] for found in parsed if found is not None]


def wait_for(what: str, check: Callable[[], bool], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"not in {timeout:.0f} s: {what}")
        time.sleep(1)


def final_state(job_id: str, timeout: float) -> SlurmState:
    ended: list[SlurmState] = []

    def ended_now() -> bool:
        ended[:] = [s for s in records(job_id) if s not in _LIVE]
        return bool(ended)

    wait_for(f"job {job_id} ends", ended_now, timeout)
    return ended[-1]


_LIVE = {SlurmState.PENDING, SlurmState.RUNNING, SlurmState.COMPLETING, SlurmState.REQUEUED}


def runs(log: Path) -> list[str]:
    """The restart count each run of the job wrote, one per run."""
    return re.findall(r"^ran ?(\d*)$", log.read_text(), re.MULTILINE)


def test_a_preempt_job_is_requeued_when_a_gpu_job_needs_its_node_and_runs_again(
    tmp_path: Path, jobs: list[str]
) -> None:
    name = new_project_name("preempt")
    log = tmp_path / "low.out"
    # Both ask for all four GPUs of gpu1: the gpu job can only start by taking the
    # preempt job's place. A batch job is requeueable by default (JobRequeue=1);
    # --requeue says so whatever the cluster's default. Appended, so each run shows.
    low = sbatch(
        "--partition=preempt", "--gres=gpu:a100:4", "--requeue", "--time=10",
        f"--job-name={name}-low", f"--output={log}", "--open-mode=append",
        "--wrap", "echo ran $SLURM_RESTART_COUNT; sleep 600",
    )  # fmt: skip
    jobs.append(low)
    wait_for(f"{low} runs", lambda: slurm("squeue", "-h", "-j", low, "-o", "%T") == "RUNNING\n", 90)

    high = sbatch(
        "--partition=gpu", "--gres=gpu:a100:4", "--time=5",
        f"--job-name={name}-high", f"--output={tmp_path}/high-%j.out",
        "--wrap", "sleep 5",
    )  # fmt: skip
    jobs.append(high)

    wait_for(f"{low} preempted", lambda: SlurmState.PREEMPTED in records(low), 60)
    # Requeued under the same id, waiting to run again; the gpu job got the node.
    shown = slurm("scontrol", "show", "job", low)
    assert re.search(r"JobState=PENDING\b", shown), shown
    assert re.search(r"Restarts=1\b", shown), shown
    assert final_state(high, 60) is SlurmState.COMPLETED
    # Once the gpu job is done and the credential's lifetime has passed (AuthInfo=
    # cred_expire=30: 30 s), the same job runs again, its script from the start: about a
    # minute after the preemption here, where the default lifetime made it over two.
    wait_for(f"{low} runs again", lambda: len(runs(log)) == 2, 90)
    assert runs(log) == ["", "1"]  # SLURM_RESTART_COUNT: unset at first, then 1
    assert "DUE TO PREEMPTION" in log.read_text()
    assert records(low)[0] is SlurmState.PREEMPTED


def test_a_job_past_its_memory_ends_out_of_memory(tmp_path: Path, jobs: list[str]) -> None:
    name = new_project_name("oom")
    # 400 MB written byte by byte (so resident, not only reserved) under a 100 MB limit.
    job = sbatch(
        "--partition=cpu", "--mem=100M", "--time=5",
        f"--job-name={name}", f"--output={tmp_path}/%j.out",
        "--wrap", "python3 -c 'held = b\"x\" * (400 << 20)'",
    )  # fmt: skip
    jobs.append(job)

    assert final_state(job, 60) is SlurmState.OUT_OF_MEMORY
    assert "oom" in (tmp_path / f"{job}.out").read_text().lower()
