"""When squeue and sacct disagree about a job: one rule, on literal text as Slurm 22.05 printed it.

The rule (``combine``): an end is final only when no source still shows the job, or a step of
its latest run, alive; until then the job reads COMPLETING (ended, not final) and the next
pass looks again. A step whose job row neither source lists makes the observation incomplete.
"""

# ruff: noqa: E501  (Slurm's rows are kept verbatim, whatever their length)

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.scheduler.base import Observation
from reconciler.scheduler.slurm.combine import LAG_LIMIT, combine
from reconciler.scheduler.slurm.parse import parse_sacct, parse_squeue
from reconciler.scheduler.states import Health, SlurmState

TAG = "recon2:demo:0123456789ab:run:train:0123456789abcdef"
TAKEN = datetime(2026, 12, 1, 14, 2, 0, tzinfo=UTC)

# Seen on the dev cluster right after slurmdbd restarted: squeue has job 3131 COMPLETED,
# sacct still has the job and its batch step RUNNING.
SQUEUE_COMPLETED = f"3131|3131|COMPLETED|None|cpu1|cpu|2026-12-01T14:01:10|2026-12-01T14:01:11|4:58|/home/u/demo|demo.train|{TAG}\n"
SACCT_RUNNING = """\
3131|3131|RUNNING|0:0|None|2026-12-01T14:01:10|2026-12-01T14:01:11|Unknown|cpu1|cpu||||||/home/u/demo|demo.train|
3131.batch|3131.batch|RUNNING|0:0||2026-12-01T14:01:11|2026-12-01T14:01:11|Unknown|cpu1|||||||/home/u/demo|batch|
"""
# A little later: the job's own row has caught up, its batch step not yet.
SACCT_STEP_RUNNING = f"""\
3131|3131|COMPLETED|0:0|None|2026-12-01T14:01:10|2026-12-01T14:01:11|2026-12-01T14:01:41|cpu1|cpu||||||/home/u/demo|demo.train|{TAG}
3131.batch|3131.batch|RUNNING|0:0||2026-12-01T14:01:11|2026-12-01T14:01:11|Unknown|cpu1|||||||/home/u/demo|batch|
"""
SACCT_SETTLED = f"""\
3131|3131|COMPLETED|0:0|None|2026-12-01T14:01:10|2026-12-01T14:01:11|2026-12-01T14:01:41|cpu1|cpu||||||/home/u/demo|demo.train|{TAG}
3131.batch|3131.batch|COMPLETED|0:0||2026-12-01T14:01:11|2026-12-01T14:01:11|2026-12-01T14:01:41|cpu1|||||||/home/u/demo|batch|
"""


def observe(squeue: str, sacct: str, taken_at: datetime = TAKEN) -> Observation:
    return combine(parse_squeue(squeue, UTC), parse_sacct(sacct, UTC), taken_at)


def test_squeue_completed_while_sacct_shows_the_job_running_is_not_final() -> None:
    observation = observe(SQUEUE_COMPLETED, SACCT_RUNNING)
    (job,) = observation.jobs
    (component,) = job.components
    assert component.state is SlurmState.COMPLETING
    assert component.exit_code is None  # sacct's 0:0 of a running job is no exit code
    assert component.reason == (
        "COMPLETED by squeue, sacct still shows 3131 RUNNING, 3131.batch RUNNING"
    )
    assert (job.finished, job.health) == (False, Health.RUNNING)
    assert observation.complete  # a lag, not a gap: nothing is unknown


def test_job_completed_while_its_batch_step_runs_waits_whichever_source_says_so() -> None:
    for squeue in (SQUEUE_COMPLETED, ""):  # slurmctld still holds it, or forgot it already
        (job,) = observe(squeue, SACCT_STEP_RUNNING).jobs
        assert job.components[0].state is SlurmState.COMPLETING
        assert (job.finished, job.health) == (False, Health.RUNNING)


def test_once_accounting_agrees_the_end_is_final_with_its_exit_code() -> None:
    (job,) = observe(SQUEUE_COMPLETED, SACCT_SETTLED).jobs
    assert job.components[0].state is SlurmState.COMPLETED
    assert (job.finished, job.health, job.components[0].exit_code) == (True, Health.SUCCEEDED, 0)


def test_a_step_accounting_never_ends_holds_the_end_back_only_so_long() -> None:
    end = datetime(2026, 12, 1, 14, 1, 41, tzinfo=UTC)
    (waiting,) = observe("", SACCT_STEP_RUNNING, end + LAG_LIMIT).jobs
    (given_up,) = observe("", SACCT_STEP_RUNNING, end + LAG_LIMIT + timedelta(seconds=1)).jobs
    assert waiting.components[0].state is SlurmState.COMPLETING
    assert given_up.components[0].state is SlurmState.COMPLETED
    assert given_up.finished


def test_a_running_job_whose_steps_ended_is_running() -> None:
    squeue = f"3140|3140|RUNNING|None|cpu1|cpu|2026-12-01T14:01:10|2026-12-01T14:01:11|4:20|/home/u/demo|demo.train|{TAG}\n"
    sacct = """\
3140|3140|RUNNING|0:0|None|2026-12-01T14:01:10|2026-12-01T14:01:11|Unknown|cpu1|cpu||||||/home/u/demo|demo.train|
3140.batch|3140.batch|COMPLETED|0:0||2026-12-01T14:01:11|2026-12-01T14:01:11|2026-12-01T14:01:50|cpu1|||||||/home/u/demo|batch|
3140.0|3140.0|COMPLETED|0:0||2026-12-01T14:01:12|2026-12-01T14:01:12|2026-12-01T14:01:49|cpu1|||||||/home/u/demo|hostname|
"""
    (job,) = observe(squeue, sacct).jobs
    assert job.components[0].state is SlurmState.RUNNING
    assert (job.finished, job.health) == (False, Health.RUNNING)


def test_a_step_whose_job_row_neither_source_lists_leaves_the_job_unsettled() -> None:
    # Het job 3150: sacct has component 0 and the step of component 1, not component 1.
    sacct = f"""\
3150+0|3150|COMPLETED|0:0|None|2026-12-01T14:01:10|2026-12-01T14:01:11|2026-12-01T14:01:41|cpu1|cpu||||||/home/u/demo|demo.train|{TAG}
3150+0.batch|3150.batch|COMPLETED|0:0||2026-12-01T14:01:11|2026-12-01T14:01:11|2026-12-01T14:01:41|cpu1|||||||/home/u/demo|batch|
3150+1.0|3151.0|RUNNING|0:0||2026-12-01T14:01:11|2026-12-01T14:01:11|Unknown|gpu1|||||||/home/u/demo|bash|
"""
    observation = observe("", sacct)
    assert observation.jobs == ()  # neither finished nor gone: unknown
    assert not observation.complete
    assert observation.problems == (f"accounting for job 3150 ({TAG}) has not settled yet",)


def test_a_job_only_sacct_lists_is_read_from_sacct() -> None:
    (job,) = observe("", SACCT_SETTLED).jobs
    assert (job.components[0].source, job.finished, job.health) == ("sacct", True, Health.SUCCEEDED)


def test_a_job_only_squeue_lists_is_read_from_squeue() -> None:
    # Just submitted (sacct has not heard of it), or ended while sacct is behind or down.
    pending = f"3160|3160|PENDING|Priority||cpu|2026-12-01T14:01:58|N/A|5:00|/home/u/demo|demo.train|{TAG}\n"
    (job,) = observe(pending, "").jobs
    assert (job.components[0].source, job.health) == ("squeue", Health.PENDING)
    (job,) = observe(SQUEUE_COMPLETED, "").jobs
    assert (job.finished, job.health, job.components[0].exit_code) == (True, Health.SUCCEEDED, None)


def test_a_job_without_a_recon_tag_is_kept_apart_matched_by_id_only() -> None:
    squeue = "3170|3170|RUNNING|None|cpu1|cpu|2026-12-01T14:01:10|2026-12-01T14:01:11|4:20|/home/u/demo|demo.train|changed by hand\n"
    observation = observe(squeue, "")
    assert observation.jobs == ()
    (job,) = observation.untagged
    assert (job.job_id, [row.state for row in job.rows]) == ("3170", [SlurmState.RUNNING])


# Seen on the dev cluster under faults: job 4411's node went down as it launched, and
# Slurm requeued it and held it (squeue's reason; sacct says PENDING, JobHeldUser, and
# shows no comment until the job ends). Rows in recon's format, states and reasons as
# the two commands printed them.
HELD_TAG = "recon2:skb8885260:a5d45d19f410:run:r09:aeeac7e0cef2b804"
SQUEUE_LAUNCH_FAILED = f"4411|4411|PENDING|launch failed requeued held||cpu|2026-12-02T17:42:43|N/A|10:00|/tmp/s/runs/r09|skb8885260.r09|{HELD_TAG}\n"
SACCT_HELD = "4411|4411|PENDING|0:0|JobHeldUser|2026-12-02T17:42:43|None|Unknown|None assigned|cpu|0|10||||/tmp/s/runs/r09|skb8885260.r09|\n"


def test_a_job_held_after_its_launch_failed_is_a_failed_attempt_still_queued() -> None:
    """It will not run unless someone releases it: failed for recon, as a job held in
    special exit is, and still queued, so a retry cancels it first."""
    (job,) = observe(SQUEUE_LAUNCH_FAILED, SACCT_HELD).jobs
    (component,) = job.components
    assert component.state is SlurmState.PENDING
    assert (job.health, job.finished, component.held_in_queue) == (Health.FAILED, True, True)
    assert job.in_words == "held after its launch failed"
