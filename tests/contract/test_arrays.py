"""Job arrays on every backend: each task runs the script once with its own index, at most
``max_parallel`` at once, fails and is cancelled alone, and a dependent waits for them all.
"""

from __future__ import annotations

from collections.abc import Callable
from itertools import pairwise

import pytest

from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.base import ArrayRequest, ObservedJob
from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import Harness, final, quoted


def tasks_final(indices: set[int]) -> Callable[[ObservedJob], bool]:
    """The array lists exactly ``indices`` as tasks, and each of them is final."""

    def check(job: ObservedJob) -> bool:
        tasks = job.tasks()
        return set(tasks) == indices and all(final(task) for task in tasks.values())

    return check


def test_each_task_sees_its_own_index_and_at_most_max_parallel_run(backend: Harness) -> None:
    marks = backend.workdir
    body = (
        f'echo "$SLURM_ARRAY_TASK_ID $SLURM_ARRAY_JOB_ID" > {quoted(marks)}/task-'
        "$SLURM_ARRAY_TASK_ID\nsleep 1"
    )
    array_id = backend.submit("sweep", body, array=ArrayRequest(indices=(0, 2, 5), max_parallel=1))
    job = backend.wait("sweep", tasks_final({0, 2, 5}))
    assert job.job_id == array_id
    tasks = job.tasks()
    assert [task.job_id for task in tasks.values()] == [f"{array_id}_{i}" for i in (0, 2, 5)]
    for index, task in tasks.items():
        assert task.tag == job.tag
        assert (task.health, task.components[0].state) == (Health.SUCCEEDED, SlurmState.COMPLETED)
        assert (marks / f"task-{index}").read_text() == f"{index} {array_id}\n"
        assert backend.workdir.joinpath(f"sweep-{array_id}_{index}.out").exists()
    assert not (marks / "task-1").exists()
    # One at a time: each task started once the one before it had ended.
    spans = sorted((task.components[0].start, task.components[0].end) for task in tasks.values())
    for (_, end), (start, _) in pairwise(spans):
        assert end is not None and start is not None and start >= end
    assert job.health is Health.SUCCEEDED


def test_a_task_that_exits_1_fails_alone(backend: Harness) -> None:
    body = '[ "$SLURM_ARRAY_TASK_ID" != 1 ] || exit 1'
    backend.submit("sweep", body, array=ArrayRequest(indices=(0, 1, 2)))
    job = backend.wait("sweep", tasks_final({0, 1, 2}))
    tasks = job.tasks()
    failed = tasks[1].components[0]
    assert (failed.state, failed.exit_code) == (SlurmState.FAILED, 1)
    assert [tasks[i].health for i in (0, 2)] == [Health.SUCCEEDED, Health.SUCCEEDED]
    assert job.health is Health.FAILED  # any failure trumps, for the array as a whole


def test_cancelling_one_task_leaves_the_others(backend: Harness) -> None:
    marks = backend.workdir
    body = (
        f'[ "$SLURM_ARRAY_TASK_ID" != 0 ] || sleep 300\n'
        f"touch {quoted(marks)}/ran-$SLURM_ARRAY_TASK_ID"
    )
    array_id = backend.submit("sweep", body, array=ArrayRequest(indices=(0, 1, 2), max_parallel=1))
    backend.wait("sweep", lambda job: job.tasks()[0].health is Health.RUNNING)
    backend.scheduler.cancel(f"{array_id}_2")  # still waiting: forgotten, on Slurm as here
    backend.scheduler.cancel(f"{array_id}_0")  # running: ends CANCELLED
    job = backend.wait("sweep", tasks_final({0, 1}))
    tasks = job.tasks()
    assert tasks[0].components[0].state is SlurmState.CANCELLED
    assert tasks[1].health is Health.SUCCEEDED
    assert (marks / "ran-1").exists()
    assert not (marks / "ran-0").exists() and not (marks / "ran-2").exists()


def test_a_dependency_on_an_array_waits_for_every_task(backend: Harness) -> None:
    marks = backend.workdir
    body = f"sleep $SLURM_ARRAY_TASK_ID\ntouch {quoted(marks)}/done-$SLURM_ARRAY_TASK_ID"
    array_id = backend.submit("sweep", body, array=ArrayRequest(indices=(0, 1, 2)))
    gather = f"ls {quoted(marks)} | grep -c '^done-'"
    gather_id = backend.submit("gather", gather, dependencies=[array_id])
    first_id = backend.submit("first", "true", dependencies=[f"{array_id}_0"])
    sweep = backend.wait("sweep", tasks_final({0, 1, 2}))
    gathered = backend.wait("gather", final)
    first = backend.wait("first", final)
    assert (gathered.health, first.health) == (Health.SUCCEEDED, Health.SUCCEEDED)
    ends = {i: task.components[0].end for i, task in sweep.tasks().items()}
    start = gathered.components[0].start
    assert start is not None and all(end is not None and start >= end for end in ends.values())
    first_start, task_end = first.components[0].start, ends[0]
    assert first_start is not None and task_end is not None and first_start >= task_end
    assert backend.log("gather", gather_id).read_text() == "3\n"
    assert backend.log("first", first_id).exists()


def test_the_dependent_of_an_array_with_a_failed_task_never_runs(backend: Harness) -> None:
    body = 'sleep 2; [ "$SLURM_ARRAY_TASK_ID" != 1 ] || exit 1'
    array_id = backend.submit("sweep", body, array=ArrayRequest(indices=(0, 1)))
    down_id = backend.submit("down", "echo ran", dependencies=[array_id])
    backend.wait("sweep", tasks_final({0, 1}))
    down = backend.wait("down", final)
    assert down.health is Health.CANCELLED
    reason = down.components[0].reason
    assert reason is not None and reason.startswith("Dependency")
    assert not backend.log("down", down_id).exists()


def test_an_arrays_indices_must_be_below_max_array_size(backend: Harness) -> None:
    """MaxArraySize, as sweeps split arrays by it: the highest index it allows runs, the
    next is refused at submission and leaves no job."""
    size = backend.scheduler.max_array_size()
    assert size >= 2 and backend.scheduler.max_array_size() == size
    edge = size - 1
    array_id = backend.submit(
        "edge", "echo $SLURM_ARRAY_TASK_ID", array=ArrayRequest(indices=(edge,))
    )
    with pytest.raises(PermanentSchedulerError):
        backend.submit("over", "true", array=ArrayRequest(indices=(0, size)))
    job = backend.wait("edge", tasks_final({edge}))
    assert job.health is Health.SUCCEEDED
    assert backend.workdir.joinpath(f"edge-{array_id}_{edge}.out").read_text() == f"{edge}\n"
    assert backend.job("over") is None
