"""Allocations on every backend: one is held running under its own tag and released
cancelled; where steps run in allocations (StepScheduler: Slurm, and both doubles), each
step is observed as a job of its run, with its id, its exit code and its logs."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.scheduler.base import StepRequest, StepScheduler
from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import LOCAL_NO_STEPS, Harness, final, has

# What Container.features can name: a backend offers a subset.
CONTAINER_FEATURES = frozenset({"image", "writable", "workdir"})


def test_an_allocation_is_held_running_under_its_tag_then_released_cancelled(
    backend: Harness,
) -> None:
    job_id = backend.allocate("hold")
    held = backend.wait("hold", has(Health.RUNNING))
    assert (held.job_id, held.tag, held.finished) == (
        job_id,
        backend.tag("hold", kind="alloc"),
        False,
    )
    (component,) = held.components
    assert component.start is not None and component.nodes
    assert component.time_left is not None and component.time_left.total_seconds() > 0
    backend.scheduler.release(job_id)
    released = backend.wait("hold", final)
    assert (released.job_id, released.health) == (job_id, Health.CANCELLED)
    assert released.components[0].state is SlurmState.CANCELLED
    backend.scheduler.release(job_id)  # gone already is fine


def test_only_the_local_backend_runs_no_steps(backend: Harness) -> None:
    assert isinstance(backend.scheduler, StepScheduler) == (backend.kind != "local")


def _step(backend: Harness, allocation_id: str, name: str, body: str) -> StepRequest:
    script = backend.workdir / f"{name}.sh"
    script.write_text(body + "\n")
    return StepRequest(
        allocation_id=allocation_id, script=script, workdir=backend.workdir,
        log_dir=backend.workdir, shape=None, tag=backend.tag(name),
    )  # fmt: skip


@pytest.mark.beyond(local=LOCAL_NO_STEPS)
def test_each_step_is_observed_as_a_job_of_its_run_with_its_exit_code_and_logs(
    backend: Harness,
) -> None:
    scheduler = backend.scheduler
    assert isinstance(scheduler, StepScheduler)
    alloc_id = backend.allocate("room")
    backend.wait("room", has(Health.RUNNING))
    ok = _step(backend, alloc_id, "ok", 'echo "step $SLURM_STEP_ID of $SLURM_JOB_ID"')
    bad = _step(backend, alloc_id, "bad", "echo failing >&2; exit 3")
    # Steps are numbered from 0 in the order they start; both fit at once (they overlap).
    assert scheduler.start_step(ok) == f"{alloc_id}.0"
    assert scheduler.start_step(bad) == f"{alloc_id}.1"

    done = backend.wait("ok", final)
    assert (done.job_id, done.tag, done.health) == (f"{alloc_id}.0", ok.tag, Health.SUCCEEDED)
    assert (done.components[0].state, done.components[0].exit_code) == (SlurmState.COMPLETED, 0)
    failed = backend.wait("bad", final)
    assert (failed.job_id, failed.health) == (f"{alloc_id}.1", Health.FAILED)
    assert (failed.components[0].state, failed.components[0].exit_code) == (SlurmState.FAILED, 3)
    logs = Path(backend.workdir)
    assert (logs / f"slurm-{alloc_id}.0.out").read_text() == f"step 0 of {alloc_id}\n"
    assert (logs / f"slurm-{alloc_id}.1.err").read_text() == "failing\n"

    # The allocation outlives its steps, and lists them under its own id.
    room = backend.job("room")
    assert room is not None and room.health is Health.RUNNING
    named = {row.step_tag.name: row.job_id for row in room.steps if row.step_tag is not None}
    assert named == {"ok": f"{alloc_id}.0", "bad": f"{alloc_id}.1"}
    assert room.live_steps == ()
    backend.scheduler.release(alloc_id)
    # Its own row ends cancelled; its health folds in the failed step, as any job's does.
    released = backend.wait("room", final)
    assert (released.components[0].state, released.health) == (
        SlurmState.CANCELLED,
        Health.FAILED,
    )


@pytest.mark.beyond(local=LOCAL_NO_STEPS)
def test_containers_are_named_in_the_words_of_container_features(backend: Harness) -> None:
    scheduler = backend.scheduler
    assert isinstance(scheduler, StepScheduler)
    offered = scheduler.containers()
    assert offered <= CONTAINER_FEATURES
    # Without `image` no container runs at all: the other features come with it.
    assert not offered or "image" in offered
