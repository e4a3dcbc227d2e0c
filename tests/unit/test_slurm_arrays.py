"""Job arrays through the Slurm adapter: squeue and sacct text as Slurm 22.05 printed it for
``sbatch --array=0,2,5-9%2`` (task 2 exits 1, task 7 cancelled while pending), folded
task by task, and the commands an array costs."""

# ruff: noqa: E501  (Slurm's rows are kept verbatim, whatever their length)

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from reconciler.errors import ObservationError
from reconciler.scheduler.base import (
    ArrayRequest,
    JobRecord,
    Observation,
    ObservedJob,
    SubmitRequest,
)
from reconciler.scheduler.slurm import SlurmScheduler, combine
from reconciler.scheduler.slurm.parse import parse_sacct, parse_squeue
from reconciler.scheduler.slurm.testing import ScriptedRunner, failed, ok
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag

TAG = "recon2:arrprobe:0123456789ab:run:arr:0123456789abcdef"
TAKEN = datetime(2026, 12, 1, 17, 34, 30, tzinfo=UTC)
HEAD = "14769_{}|{}|{}|{}|{}|cpu|2026-12-01T17:34:22|{}|UNLIMITED|/tmp/arrprobe|probe.arr|" + TAG


def live(task: str, raw: int, state: str, reason: str = "None", start: str = "") -> str:
    nodes = "" if state == "PENDING" else "cpu1"
    return HEAD.format(task, raw, state, reason, nodes, start or "N/A")


# squeue at 17:34:26: tasks 0 and 2 ended, 5 and 6 running, 8 and 9 pending (7 cancelled).
SQUEUE = "\n".join(
    [
        live("0", 14770, "COMPLETED", start="2026-12-01T17:34:22"),
        live("2", 14771, "FAILED", "NonZeroExitCode", "2026-12-01T17:34:22"),
        live("[8-9%2]", 14769, "PENDING", "JobArrayTaskLimit"),
        live("5", 14772, "RUNNING", start="2026-12-01T17:34:25"),
        live("6", 14773, "RUNNING", start="2026-12-01T17:34:25"),
    ]
)
# sacct a moment later: it has not heard that 5 and 6 started (the range still holds them).
SACCT = f"""\
14769_0|14770|COMPLETED|0:0|None|2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1|cpu||||||/tmp/arrprobe|probe.arr|{TAG}
14769_0.batch|14770.batch|COMPLETED|0:0||2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1||||||||batch|
14769_2|14771|FAILED|1:0|None|2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1|cpu||||||/tmp/arrprobe|probe.arr|{TAG}
14769_2.batch|14771.batch|FAILED|1:0||2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1||||||||batch|
14769_[5-6,8-9%2]|14769|PENDING|0:0|JobArrayTaskLimit|2026-12-01T17:34:22|Unknown|Unknown|None assigned|cpu||||||/tmp/arrprobe|probe.arr|
"""


def observe(squeue: str, sacct: str) -> Observation:
    return combine.combine(parse_squeue(squeue, UTC), parse_sacct(sacct, UTC), TAKEN)


def states(job: ObservedJob) -> dict[int, SlurmState]:
    return {index: task.components[0].state for index, task in job.tasks().items()}


def test_an_array_is_one_job_and_each_task_has_its_own_state() -> None:
    observation = observe(SQUEUE, SACCT)
    (job,) = observation.jobs
    assert (job.job_id, job.tag.format()) == ("14769", TAG)
    assert states(job) == {
        0: SlurmState.COMPLETED,
        2: SlurmState.FAILED,
        5: SlurmState.RUNNING,
        6: SlurmState.RUNNING,
        8: SlurmState.PENDING,
        9: SlurmState.PENDING,
    }
    tasks = job.tasks()
    assert [row.job_id for row in tasks[2].rows] == ["14769_2", "14769_2.batch"]
    assert tasks[2].components[0].exit_code == 1
    assert (tasks[2].health, tasks[0].health) == (Health.FAILED, Health.SUCCEEDED)
    # sacct's stale range is gone: squeue shows every task it holds.
    assert [row.job_id for row in job.components] == [
        "14769_0", "14769_2", "14769_5", "14769_6", "14769_[8-9%2]",
    ]  # fmt: skip
    assert observation.complete


def test_a_task_sacct_saw_start_after_squeue_looked_reads_as_started() -> None:
    # squeue at 17:34:23 still holds 5 in its pending range; sacct, asked after it, has 5.
    squeue = "\n".join(
        [
            live("[5-6,8-9%2]", 14769, "PENDING", "JobArrayTaskLimit"),
            live("0", 14770, "RUNNING", start="2026-12-01T17:34:22"),
            live("2", 14771, "RUNNING", start="2026-12-01T17:34:22"),
        ]
    )
    sacct = """\
14769_5|14772|RUNNING|0:0|None|2026-12-01T17:34:22|2026-12-01T17:34:25|Unknown|cpu1|cpu||||||/tmp/arrprobe|probe.arr|
14769_5.batch|14772.batch|RUNNING|0:0||2026-12-01T17:34:25|2026-12-01T17:34:25|Unknown|cpu1||||||||batch|
14769_[6,8-9%2]|14769|PENDING|0:0|JobArrayTaskLimit|2026-12-01T17:34:22|Unknown|Unknown|None assigned|cpu||||||/tmp/arrprobe|probe.arr|
"""
    (job,) = observe(squeue, sacct).jobs
    assert states(job) == {
        0: SlurmState.RUNNING,
        2: SlurmState.RUNNING,
        5: SlurmState.RUNNING,
        6: SlurmState.PENDING,
        8: SlurmState.PENDING,
        9: SlurmState.PENDING,
    }
    assert [row.job_id for row in job.tasks()[5].rows] == ["14769_5", "14769_5.batch"]


def test_a_task_squeue_forgot_while_sacct_lags_stays_rather_than_vanish() -> None:
    # Task 5 ended more than MinJobAge ago (squeue dropped it); sacct still has it running.
    squeue = live("9", 14769, "RUNNING", start="2026-12-01T17:34:29")
    sacct = """\
14769_5|14772|RUNNING|0:0|None|2026-12-01T17:34:22|2026-12-01T17:34:25|Unknown|cpu1|cpu||||||/tmp/arrprobe|probe.arr|
14769_[9]|14769|PENDING|0:0|JobArrayTaskLimit|2026-12-01T17:34:22|Unknown|Unknown|None assigned|cpu||||||/tmp/arrprobe|probe.arr|
"""
    (job,) = observe(squeue, sacct).jobs
    assert states(job) == {5: SlurmState.RUNNING, 9: SlurmState.RUNNING}


def test_tasks_of_sacct_range_that_squeue_shows_nowhere_stay_pending() -> None:
    squeue = live("5", 14772, "RUNNING", start="2026-12-01T17:34:25")
    sacct = "14769_[5-6%2]|14769|PENDING|0:0|JobArrayTaskLimit|2026-12-01T17:34:22|Unknown|Unknown|None assigned|cpu||||||/tmp/arrprobe|probe.arr|\n"
    (job,) = observe(squeue, sacct).jobs
    assert [row.job_id for row in job.components] == ["14769_5", "14769_[6]"]
    assert states(job) == {5: SlurmState.RUNNING, 6: SlurmState.PENDING}


def test_a_task_that_ended_by_squeue_while_sacct_runs_it_is_not_final() -> None:
    squeue = live("0", 14770, "COMPLETED", start="2026-12-01T17:34:22")
    sacct = """\
14769_0|14770|RUNNING|0:0|None|2026-12-01T17:34:22|2026-12-01T17:34:22|Unknown|cpu1|cpu||||||/tmp/arrprobe|probe.arr|
14769_0.batch|14770.batch|RUNNING|0:0||2026-12-01T17:34:22|2026-12-01T17:34:22|Unknown|cpu1||||||||batch|
"""
    (job,) = observe(squeue, sacct).jobs
    task = job.tasks()[0]
    assert task.components[0].state is SlurmState.COMPLETING
    assert (task.finished, job.finished) == (False, False)


def test_a_range_squeue_prints_badly_is_a_row_that_could_not_be_read() -> None:
    observation = observe(live("[9-5]", 14769, "PENDING"), "")
    assert observation.jobs == ()
    assert not observation.complete
    assert "unknown array task range" in observation.problems[0]


def test_each_step_is_matched_to_its_task_once_not_against_every_task() -> None:
    """Folding N tasks with their steps does work in N, not N squared (#14)."""
    count = 2000
    squeue = live(f"[{count}-{count + 9}]", 14769, "PENDING")
    sacct = "".join(
        f"14769_{i}|{20000 + i}|COMPLETED|0:0|None|2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1|cpu||||||/tmp/arrprobe|probe.arr|{TAG}\n"
        f"14769_{i}.batch|{20000 + i}.batch|COMPLETED|0:0||2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1||||||||batch|\n"
        for i in range(count)
    )
    calls = 0
    owner = combine._owner

    def counting(step: JobRecord) -> str:
        nonlocal calls
        calls += 1
        return owner(step)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(combine, "_owner", counting)
        (job,) = observe(squeue, sacct).jobs
    assert len(job.tasks()) == count + 10
    assert calls <= 2 * count


# --- the adapter ------------------------------------------------------------------------


def scheduler(runner: ScriptedRunner) -> SlurmScheduler:
    return SlurmScheduler(runner, sleep=lambda _: None, clock=lambda: TAKEN, tz=UTC, user="t")


def test_an_array_is_one_sbatch_returning_the_array_id() -> None:
    tag = Tag.parse(TAG)
    assert tag is not None
    runner = ScriptedRunner(sbatch=[ok("14769\n")])
    request = SubmitRequest(
        script="#!/bin/bash\ntrue\n",
        workdir=Path("/tmp"),
        tag=tag,
        array=ArrayRequest(indices=(0, 2, 5, 6, 7, 8, 9), max_parallel=2),
    )
    assert scheduler(runner).submit(request) == "14769"
    (argv, stdin) = runner.calls[0]
    assert "--array=0,2,5-9%2" in argv and stdin == request.script


@pytest.mark.parametrize("job_id", ["14769_7", "14769"])
def test_cancel_names_one_task_or_the_whole_array(job_id: str) -> None:
    runner = ScriptedRunner(scancel=[ok()])
    scheduler(runner).cancel(job_id)
    assert runner.calls[0][0] == ["scancel", job_id]


def test_max_array_size_asks_scontrol_once_per_adapter() -> None:
    runner = ScriptedRunner(scontrol=[ok("MaxArraySize            = 1001\nMaxJobCount = 1\n")])
    adapter = scheduler(runner)
    assert [adapter.max_array_size() for _ in range(3)] == [1001, 1001, 1001]
    assert runner.commands() == ["scontrol"]
    assert runner.calls[0][0] == ["scontrol", "show", "config"]


def test_max_array_size_that_cannot_be_read_says_so() -> None:
    with pytest.raises(ObservationError, match="MaxArraySize could not be read"):
        scheduler(ScriptedRunner(scontrol=[failed("slurm_load_ctl_conf error")])).max_array_size()
    with pytest.raises(ObservationError, match="no MaxArraySize line"):
        scheduler(ScriptedRunner(scontrol=[ok("MaxJobCount = 1\n")])).max_array_size()


def test_observing_a_large_array_is_one_squeue_and_two_saccts() -> None:
    count = 1000
    squeue = "\n".join(
        [
            live(f"[{count // 2}-{count - 1}%50]", 14769, "PENDING", "JobArrayTaskLimit"),
            *(live(str(i), 20000 + i, "RUNNING", start="2026-12-01T17:34:25") for i in range(50)),
        ]
    )
    sacct = "".join(
        f"14769_{i}|{20000 + i}|COMPLETED|0:0|None|2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1|cpu||||||/tmp/arrprobe|probe.arr|{TAG}\n"
        f"14769_{i}.batch|{20000 + i}.batch|COMPLETED|0:0||2026-12-01T17:34:22|2026-12-01T17:34:22|2026-12-01T17:34:25|cpu1||||||||batch|\n"
        for i in range(50, count // 2)
    )
    runner = ScriptedRunner(squeue=[ok(squeue)], sacct=[ok(sacct)])
    observation = scheduler(runner).observe(TAKEN - timedelta(hours=1))
    assert runner.commands() == ["squeue", "sacct", "sacct"]  # its own rows, then in full
    (job,) = observation.jobs
    tasks = job.tasks()
    assert len(tasks) == count
    assert sum(task.health is Health.SUCCEEDED for task in tasks.values()) == count // 2 - 50
    assert sum(task.health is Health.RUNNING for task in tasks.values()) == 50


# Seen while a 1,000-task array of `true` ran: for a few seconds sacct printed a task that
# had just ended under its own id, named "allocation", with no partition.
UNSETTLED_TAG = "recon2:arr7cc481d3bc:0123456789ab:run:many:0123456789abcdef"
SACCT_UNSETTLED = f"""\
15157|15157|COMPLETED|0:0|None|2026-12-01T17:40:21|2026-12-01T17:40:21|2026-12-01T17:40:21|cpu1||||||||allocation|{UNSETTLED_TAG}
15157.batch|15157.batch|COMPLETED|0:0||2026-12-01T17:40:21|2026-12-01T17:40:21|2026-12-01T17:40:21|cpu1||||||||batch|
"""
SQUEUE_ENDED = f"15154_2|15157|COMPLETED|None|cpu1|cpu|2026-12-01T17:40:20|2026-12-01T17:40:21|1:00|/tmp|arr7cc481d3bc.many|{UNSETTLED_TAG}\n"
SQUEUE_WAITING = f"15154_[3-999%50]|15154|PENDING|JobArrayTaskLimit||cpu|2026-12-01T17:40:20|N/A|1:00|/tmp|arr7cc481d3bc.many|{UNSETTLED_TAG}\n"


def test_a_task_sacct_prints_under_its_own_id_is_put_back_where_squeue_lists_it() -> None:
    observation = observe(SQUEUE_ENDED + SQUEUE_WAITING, SACCT_UNSETTLED)
    (job,) = observation.jobs
    assert observation.complete
    task = job.tasks()[2]
    assert [row.job_id for row in task.rows] == ["15154_2", "15154_2.batch"]
    assert (task.health, task.components[0].exit_code) == (Health.SUCCEEDED, 0)


def test_a_task_under_its_own_id_that_squeue_forgot_leaves_the_pass_incomplete() -> None:
    observation = observe(SQUEUE_WAITING, SACCT_UNSETTLED)
    assert not observation.complete
    assert observation.problems == (
        f"accounting for job 15157 ({UNSETTLED_TAG}) has not settled yet",
    )
    (job,) = observation.jobs  # the array itself is still seen, without that task
    assert 2 not in job.tasks()
