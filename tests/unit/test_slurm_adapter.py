"""SlurmScheduler against a recording fake runner: which commands, how many, and what it
makes of their answers. The fake stands in at recon's own seam (the runner), not subprocess."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from reconciler.desired.models import Allocation
from reconciler.errors import (
    ObservationError,
    PermanentSchedulerError,
    SchedulerError,
    TransientSchedulerError,
)
from reconciler.scheduler.base import AllocateRequest, Observation, SubmitRequest
from reconciler.scheduler.slurm import SlurmScheduler, adapter
from reconciler.scheduler.slurm import runner as runner_module
from reconciler.scheduler.slurm.runner import NOT_FOUND, TIMED_OUT, run
from reconciler.scheduler.slurm.testing import Result, ScriptedRunner, failed, ok
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag

NOW = datetime(2026, 11, 29, 22, 45, 0, tzinfo=UTC)
SINCE = NOW - timedelta(hours=1)
TAG = Tag(
    project="demo",
    deployment="0123456789ab",
    kind="run",
    name="train",
    spec_hash="0123456789abcdef",
)
OTHER = Tag(
    project="demo", deployment="0123456789ab", kind="run", name="eval", spec_hash="fedcba9876543210"
)


def scheduler(runner: ScriptedRunner, sleeps: list[float] | None = None) -> SlurmScheduler:
    """The adapter on a scripted runner, its sacct calls one after the other: scripted
    answers come in order (both at once: ``test_sacct_named_at_once``)."""
    record = sleeps if sleeps is not None else []
    return SlurmScheduler(
        runner,
        sleep=record.append,
        clock=lambda: NOW,
        tz=UTC,
        user="tester",
        history_at_once=False,
    )


def sacct_row(job_id: str, state: str, tag: Tag | None, exit_code: str = "0:0", **kw: str) -> str:
    comment = tag.format() if tag else ""
    nodes = kw.get("nodes", "cpu1")
    return (
        f"{job_id}|{job_id.split('+')[0]}|{state}|{exit_code}|None|2026-11-29T22:41:04"
        f"|2026-11-29T22:41:04|{kw.get('end', '2026-11-29T22:41:09')}|{nodes}|cpu"
        f"|5|10|cpu=1,mem=500M,node=1||||n|{comment}"
    )


def squeue_row(
    job_id: str, state: str, tag: Tag | None, submit: str = "2026-11-29T22:41:04"
) -> str:
    comment = tag.format() if tag else "(null)"
    return (
        f"{job_id}|{job_id.split('+')[0]}|{state}|None|cpu1|cpu|{submit}|{submit}|4:00||n|{comment}"
    )


def lines(*rows: str) -> str:
    return "".join(f"{row}\n" for row in rows)


# --- observe ---------------------------------------------------------------------------


def test_observe_runs_one_squeue_and_one_sacct_with_explicit_columns_and_states() -> None:
    runner = ScriptedRunner(squeue=[ok()], sacct=[ok()])
    observation = scheduler(runner).observe(SINCE)
    # No job of recon's in the jobs' own rows: their steps are not asked for.
    assert runner.commands() == ["squeue", "sacct"]
    squeue, sacct = (argv for argv, _ in runner.calls)
    assert "--states=all" in squeue and "--me" in squeue and "--noheader" in squeue
    assert "--format=%i|%A|%T|%r|%N|%P|%V|%S|%L|%Z|%j|%k" in squeue
    assert {"--parsable2", "--noheader", "--endtime=now"} <= set(sacct)
    assert "--starttime=2026-11-29T21:45:00" in sacct
    assert (
        "--format=JobID,JobIDRaw,State,ExitCode,Reason,Submit,Start,End,NodeList,Partition,ElapsedRaw,TimelimitRaw,AllocTRES,MaxRSS,TotalCPU,"
        "WorkDir,JobName,Comment" in sacct
    )
    assert "--allocations" in sacct  # the jobs' own rows: slurmdbd's cost is in the steps
    # Named always: as root, sacct would otherwise list every user's jobs.
    assert sacct[-1] == "--user=tester"
    (states,) = [a for a in sacct if a.startswith("--state=")]
    assert states.removeprefix("--state=").split(",") == [
        "BF", "CA", "CD", "DL", "F", "NF", "OOM", "PD", "PR", "R", "RQ", "RS", "RV", "S", "TO",
    ]  # fmt: skip
    assert observation.complete and observation.jobs == () and observation.taken_at == NOW


def test_since_is_given_to_sacct_in_the_zone_slurm_prints() -> None:
    from datetime import timezone

    runner = ScriptedRunner(squeue=[ok()], sacct=[ok()])
    zone = timezone(timedelta(hours=-5))
    SlurmScheduler(runner, clock=lambda: NOW, tz=zone).observe(SINCE)
    assert "--starttime=2026-11-29T16:45:00" in runner.calls[1][0]


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The machine's local time set to a zone with daylight saving."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.usefixtures("berlin")
def test_local_time_follows_daylight_saving_both_ways() -> None:
    winter, summer = "2026-01-15T12:00:00", "2026-07-15T12:00:00"
    live = lines(
        squeue_row("1", "RUNNING", TAG, submit=winter),
        squeue_row("2", "RUNNING", OTHER, submit=summer),
    )
    runner = ScriptedRunner(squeue=[ok(live)], sacct=[ok()])
    observation = SlurmScheduler(runner, clock=lambda: NOW).observe(
        datetime(2026, 7, 1, 10, 0, tzinfo=UTC)
    )
    assert "--starttime=2026-07-01T12:00:00" in runner.calls[1][0]  # CEST, UTC+2
    first, second = (job.components[0].submit for job in observation.jobs)
    assert first == datetime(2026, 1, 15, 11, 0, tzinfo=UTC)  # CET, UTC+1
    assert second == datetime(2026, 7, 15, 10, 0, tzinfo=UTC)


@pytest.mark.parametrize("count", [1, 200])
def test_one_pass_runs_the_same_three_commands_whatever_the_number_of_jobs(count: int) -> None:
    tags = [TAG.model_copy(update={"name": f"run{i}"}) for i in range(count)]
    live = lines(*(squeue_row(str(100 + i), "RUNNING", tag) for i, tag in enumerate(tags)))
    past = lines(*(sacct_row(str(100 + i), "RUNNING", tag) for i, tag in enumerate(tags)))
    runner = ScriptedRunner(squeue=[ok(live)], sacct=[ok(past)])
    observation = scheduler(runner).observe(SINCE)
    assert runner.commands() == ["squeue", "sacct", "sacct"]
    assert len(observation.jobs) == count
    assert {job.tag for job in observation.jobs} == set(tags)


def test_only_tagged_jobs_are_recons_and_het_components_and_steps_join_their_job() -> None:
    past = lines(
        sacct_row("5+0", "COMPLETED", TAG),
        "5+0.batch|5.batch|COMPLETED|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|"
        "2026-11-29T22:41:07|cpu1||||||||batch|",
        sacct_row("5+1", "FAILED", TAG, exit_code="3:0"),
        "5+1.0|6.0|FAILED|3:0||2026-11-29T22:41:04|2026-11-29T22:41:04|2026-11-29T22:41:04|"
        "gpu1||||||||bash|",
        sacct_row("6", "COMPLETED", None),
        sacct_row("7", "FAILED", None),
    )
    observation = scheduler(ScriptedRunner(squeue=[ok()], sacct=[ok(past)])).observe(SINCE)
    (job,) = observation.jobs
    assert (job.job_id, job.tag) == ("5", TAG)
    assert [r.job_id for r in job.rows] == ["5+0", "5+0.batch", "5+1", "5+1.0"]
    assert [r.job_id for r in job.components] == ["5+0", "5+1"]
    assert [r.job_id for r in job.steps] == ["5+0.batch", "5+1.0"]
    assert job.health is Health.FAILED
    assert observation.find("demo", "train") == (job,)
    assert observation.find("demo", "eval") == ()


def test_a_job_can_be_cancelled_before_it_is_finished() -> None:
    live = lines(squeue_row("16+0", "COMPLETING", TAG), squeue_row("16+1", "CANCELLED", TAG))
    observation = scheduler(ScriptedRunner(squeue=[ok(live)], sacct=[ok()])).observe(SINCE)
    (job,) = observation.jobs
    assert (job.health, job.finished) == (Health.CANCELLED, False)
    done = lines(squeue_row("16+0", "CANCELLED", TAG), squeue_row("16+1", "CANCELLED", TAG))
    (job,) = scheduler(ScriptedRunner(squeue=[ok(done)], sacct=[ok()])).observe(SINCE).jobs
    assert (job.health, job.finished) == (Health.CANCELLED, True)


def test_squeue_speaks_for_live_jobs_and_sacct_fills_in_what_only_it_knows() -> None:
    live = lines(
        squeue_row("40", "RUNNING", TAG),  # sacct still says PENDING: it lags
        squeue_row("41", "FAILED", OTHER),  # finished, still in slurmctld's memory
        squeue_row("42", "PENDING", TAG.model_copy(update={"name": "held"})),  # not in sacct
    )
    past = lines(
        sacct_row("40", "PENDING", TAG, nodes="None assigned", end="Unknown"),
        sacct_row("41", "FAILED", OTHER, exit_code="2:0"),
        "41.batch|41.batch|FAILED|2:0||2026-11-29T22:41:04|2026-11-29T22:41:04|"
        "2026-11-29T22:41:09|cpu1||||||||batch|",
    )
    observation = scheduler(ScriptedRunner(squeue=[ok(live)], sacct=[ok(past)])).observe(SINCE)
    jobs = {job.job_id: job for job in observation.jobs}
    assert jobs["40"].components[0].state is SlurmState.RUNNING
    assert jobs["40"].health is Health.RUNNING
    failed_row = jobs["41"].components[0]
    assert (failed_row.source, failed_row.exit_code) == ("squeue", 2)
    assert failed_row.end == datetime(2026, 11, 29, 22, 41, 9, tzinfo=UTC)
    assert [r.job_id for r in jobs["41"].steps] == ["41.batch"]
    assert jobs["42"].health is Health.PENDING
    assert observation.complete


def test_finished_array_tasks_come_from_sacct_and_its_stale_pending_range_is_dropped() -> None:
    live = lines(
        squeue_row("9_[6-7%2]", "PENDING", TAG),
        squeue_row("9_5", "RUNNING", TAG),
    )
    past = lines(
        sacct_row("9_3", "COMPLETED", TAG),
        sacct_row("9_4", "COMPLETED", TAG),
        sacct_row("9_[5-7%2]", "PENDING", TAG, nodes="None assigned", end="Unknown"),
    )
    observation = scheduler(ScriptedRunner(squeue=[ok(live)], sacct=[ok(past)])).observe(SINCE)
    (job,) = observation.jobs
    assert [r.job_id for r in job.components] == ["9_3", "9_4", "9_5", "9_[6-7%2]"]
    assert job.health is Health.RUNNING


# What sacct printed for het job 41 in the second after it ran, before it settled to
# 41+0, 41+0.batch, 41+1, 41+1.0: each component under its own id, named "allocation".
UNSETTLED_HET = f"""\
41|41|COMPLETED|0:0|None|2026-11-29T22:46:23|2026-11-29T22:46:23|2026-11-29T22:46:23|cpu1||||||||allocation|{TAG.format()}
41.batch|41.batch|COMPLETED|0:0||2026-11-29T22:46:23|2026-11-29T22:46:23|2026-11-29T22:46:23|cpu1||||||||batch|
42|42|COMPLETED|0:0|None|2026-11-29T22:46:23|2026-11-29T22:46:23|2026-11-29T22:46:23|gpu1||||||||allocation|{TAG.format()}
42.0|42.0|COMPLETED|0:0||2026-11-29T22:46:23|2026-11-29T22:46:23|2026-11-29T22:46:23|gpu1||||||||bash|
"""
HET_IN_SQUEUE = f"""\
41+0|41|COMPLETED|None|cpu1|cpu|2026-11-29T22:46:23|2026-11-29T22:46:23|5:00||demo.train|{TAG.format()}
41+1|42|COMPLETED|None|gpu1|gpu|2026-11-29T22:46:23|2026-11-29T22:46:23|5:00||demo.train|{TAG.format()}
"""


def test_unsettled_het_rows_in_sacct_join_their_job_through_squeues_ids() -> None:
    runner = ScriptedRunner(squeue=[ok(HET_IN_SQUEUE)], sacct=[ok(UNSETTLED_HET)])
    observation = scheduler(runner).observe(SINCE)
    (job,) = observation.jobs
    assert job.job_id == "41" and observation.complete
    assert [r.job_id for r in job.rows] == ["41+0", "41+0.batch", "41+1", "41+1.0"]
    assert [(r.het_offset, r.step) for r in job.steps] == [(0, "batch"), (1, "0")]
    assert [r.exit_code for r in job.components] == [0, 0]


def test_unsettled_rows_squeue_cannot_explain_make_the_observation_incomplete() -> None:
    observation = scheduler(ScriptedRunner(squeue=[ok()], sacct=[ok(UNSETTLED_HET)])).observe(SINCE)
    assert observation.jobs == ()  # not two jobs of one tag
    assert not observation.complete
    assert [p.split(" (")[0] for p in observation.problems] == [
        "accounting for job 41",
        "accounting for job 42",
    ]


# Job 164 after `scontrol requeue`: sacct still holds its first run (REQUEUED, and the batch
# step killed with it) while squeue has it pending, then running again.
REQUEUED = f"""\
164|164|REQUEUED|0:0|None|2026-11-29T22:51:57|2026-11-29T22:51:58|2026-11-29T22:51:59|cpu1|cpu|||||||demo.train|{TAG.format()}
164.batch|164.batch|CANCELLED|0:15||2026-11-29T22:51:58|2026-11-29T22:51:58|2026-11-29T22:51:59|cpu1||||||||batch|
"""


@pytest.mark.parametrize(
    ("live", "health"),
    [
        (
            f"164|164|PENDING|BeginTime||cpu|2026-11-29T22:51:59|2026-11-29T22:54:00|5:00||demo.train|{TAG.format()}",
            Health.PENDING,
        ),
        (
            f"164|164|RUNNING|None|cpu1|cpu|2026-11-29T22:51:59|2026-11-29T22:54:18|4:59||demo.train|{TAG.format()}",
            Health.RUNNING,
        ),
    ],
)
def test_a_requeued_jobs_earlier_run_does_not_count(live: str, health: Health) -> None:
    observation = scheduler(ScriptedRunner(squeue=[ok(live + "\n")], sacct=[ok(REQUEUED)])).observe(
        SINCE
    )
    (job,) = observation.jobs
    assert job.steps == ()  # the CANCELLED batch step belongs to the first run
    assert job.health is health


def test_an_observation_survives_a_json_round_trip() -> None:
    observation = scheduler(
        ScriptedRunner(squeue=[ok(HET_IN_SQUEUE)], sacct=[ok(UNSETTLED_HET)])
    ).observe(SINCE)
    assert Observation.model_validate_json(observation.model_dump_json()) == observation


def test_a_job_slurmctld_forgot_is_read_from_sacct_alone() -> None:
    past = lines(sacct_row("50", "COMPLETED", TAG))
    observation = scheduler(ScriptedRunner(squeue=[ok()], sacct=[ok(past)])).observe(SINCE)
    (job,) = observation.jobs
    assert (job.health, job.components[0].source) == (Health.SUCCEEDED, "sacct")


def test_when_sacct_fails_live_jobs_are_still_seen_and_the_observation_says_incomplete() -> None:
    live = lines(squeue_row("40", "RUNNING", TAG))
    runner = ScriptedRunner(
        squeue=[ok(live)],
        sacct=[failed("sacct: error: Problem talking to the database: Connection refused")],
    )
    observation = scheduler(runner).observe(SINCE)
    assert runner.commands() == ["squeue", "sacct"]  # no retry inside a pass, no second sacct
    assert not observation.complete
    (problem,) = observation.problems
    assert "sacct" in problem and "Problem talking to the database" in problem
    assert [job.job_id for job in observation.jobs] == ["40"]


def test_when_squeue_fails_nothing_can_be_observed() -> None:
    runner = ScriptedRunner(squeue=[failed("squeue: error: Unable to contact slurm controller")])
    with pytest.raises(ObservationError, match="Unable to contact slurm controller"):
        scheduler(runner).observe(SINCE)
    assert runner.commands() == ["squeue"]


def test_an_unreadable_row_of_recons_makes_the_observation_incomplete() -> None:
    past = lines(f"60|60|EXPLODED|0:0|None|||Unknown|cpu1|cpu|n|{TAG.format()}")
    observation = scheduler(ScriptedRunner(squeue=[ok()], sacct=[ok(past)])).observe(SINCE)
    assert not observation.complete
    assert "EXPLODED" in observation.problems[0]


def test_a_row_of_someone_elses_is_not_even_read() -> None:
    """A user's sacct may list a million rows of other work: only recon's are parsed."""
    past = lines(
        "61|61|EXPLODED|0:0|None|||Unknown|cpu1|cpu|n|theirs", sacct_row("62", "COMPLETED", TAG)
    )
    observation = scheduler(ScriptedRunner(squeue=[ok()], sacct=[ok(past)])).observe(SINCE)
    assert observation.complete and observation.problems == () and observation.skipped == ()
    assert [job.job_id for job in observation.jobs] == ["62"]


def test_an_unreadable_step_row_of_a_job_of_recons_is_skipped_and_reported() -> None:
    past = lines(sacct_row("62", "COMPLETED", TAG), "62.batch|62.batch|EXPLODED|0:0|||||||")
    observation = scheduler(ScriptedRunner(squeue=[ok()], sacct=[ok(past)])).observe(SINCE)
    assert len(observation.skipped) == 1 and "EXPLODED" in observation.skipped[0]
    assert [job.job_id for job in observation.jobs] == ["62"]


# --- submit ----------------------------------------------------------------------------

SOCKET_TIMEOUT = (
    "sbatch: error: Batch job submission failed: Socket timed out on send/recv operation"
)
SCRIPT = "#!/bin/bash\n#SBATCH --partition=cpu\necho hi\n"


def request(*dependencies: str) -> SubmitRequest:
    return SubmitRequest(
        script=SCRIPT, workdir=Path("/work/runs/train"), dependencies=dependencies, tag=TAG
    )


def test_submit_sends_the_script_on_stdin_with_the_tag_and_workdir() -> None:
    runner = ScriptedRunner(sbatch=[ok("123\n")])
    assert scheduler(runner).submit(request()) == "123"
    ((argv, stdin),) = runner.calls
    assert stdin == SCRIPT
    assert argv == [
        "sbatch",
        "--parsable",
        "--chdir=/work/runs/train",
        "--job-name=demo.train",
        "--comment=recon2:demo:0123456789ab:run:train:0123456789abcdef",
    ]


def test_submit_with_dependencies_waits_for_all_and_dies_if_one_fails() -> None:
    runner = ScriptedRunner(sbatch=[ok("124;recondev\n")])
    assert scheduler(runner).submit(request("7", "8")) == "124"
    argv = runner.calls[0][0]
    assert argv[-2:] == ["--dependency=afterok:7:8", "--kill-on-invalid-dep=yes"]


@pytest.mark.parametrize("bad", ["", "7:8", "7,8", "afterany:7", "12_[3-4]", "12+1"])
def test_a_dependency_must_be_a_job_id_or_one_array_task(bad: str) -> None:
    with pytest.raises(ValidationError):
        request(bad)


def test_transient_failures_are_retried_with_exponential_backoff() -> None:
    sleeps: list[float] = []
    runner = ScriptedRunner(
        sbatch=[
            failed(SOCKET_TIMEOUT),
            failed("sbatch: error: Slurm temporarily unable to accept job, sleeping and retrying"),
            failed("sbatch: error: Batch job submission failed: Resource temporarily unavailable"),
            ok("125\n"),
        ],
        squeue=[ok()],  # no job of this tag was made by the failed tries
    )
    assert scheduler(runner, sleeps).submit(request()) == "125"
    assert sleeps == [1.0, 2.0, 4.0]
    assert runner.commands() == [
        "sbatch",
        "squeue",
        "sbatch",
        "squeue",
        "sbatch",
        "squeue",
        "sbatch",
    ]


def test_a_job_made_by_a_timed_out_try_is_returned_not_submitted_twice() -> None:
    made = lines(squeue_row("126", "PENDING", TAG, submit="2026-11-29T22:45:00"))
    runner = ScriptedRunner(
        sbatch=[failed(SOCKET_TIMEOUT)],
        squeue=[ok(made)],
    )
    assert scheduler(runner).submit(request()) == "126"
    assert runner.commands() == ["sbatch", "squeue"]


def test_an_older_job_of_the_same_tag_is_not_taken_for_the_new_one() -> None:
    older = lines(squeue_row("90", "FAILED", TAG, submit="2026-11-29T22:44:59"))
    runner = ScriptedRunner(
        sbatch=[
            failed("sbatch: error: Unable to contact slurm controller (connect failure)"),
            ok("127\n"),
        ],
        squeue=[ok(older)],
    )
    assert scheduler(runner).submit(request()) == "127"
    assert runner.commands() == ["sbatch", "squeue", "sbatch"]


def test_transient_failures_give_up_after_the_attempts() -> None:
    sleeps: list[float] = []
    runner = ScriptedRunner(
        sbatch=[failed(SOCKET_TIMEOUT)],
        squeue=[failed("squeue: error: Unable to contact slurm controller")],
    )
    with pytest.raises(
        TransientSchedulerError, match=r"gave up after 4 attempts.*Socket timed out"
    ):
        scheduler(runner, sleeps).submit(request())
    assert runner.commands().count("sbatch") == 4 and sleeps == [1.0, 2.0, 4.0]


@pytest.mark.parametrize(
    "message",
    [
        "sbatch: error: invalid partition specified: nosuch\n"
        "sbatch: error: Batch job submission failed: Invalid partition name specified",
        "sbatch: error: Batch job submission failed: Invalid generic resource (gres) specification",
        "sbatch: error: Batch job submission failed: Requested node configuration is not available",
    ],
)
def test_permanent_failures_raise_at_once_with_slurms_message(message: str) -> None:
    sleeps: list[float] = []
    runner = ScriptedRunner(sbatch=[failed(message)])
    with pytest.raises(PermanentSchedulerError) as caught:
        scheduler(runner, sleeps).submit(request())
    assert message.splitlines()[-1] in str(caught.value)
    assert runner.commands() == ["sbatch"] and sleeps == []


def test_a_success_without_a_job_id_is_an_error_not_an_empty_id() -> None:
    runner = ScriptedRunner(sbatch=[ok("", "sbatch: warning: something")])
    with pytest.raises(SchedulerError, match="printed no job id"):
        scheduler(runner).submit(request())


# --- cancel, allocate, release ---------------------------------------------------------


def test_cancel_runs_scancel_on_the_job_id() -> None:
    runner = ScriptedRunner(scancel=[ok()])
    scheduler(runner).cancel("16")
    assert runner.calls == [(["scancel", "16"], None)]


@pytest.mark.parametrize(
    "message",
    [
        "scancel: error: Kill job error on job id 99: Invalid job id specified",
        "scancel: error: Kill job error on job id 99: Job/step already completing or completed",
    ],
)
def test_cancelling_a_job_that_is_already_gone_is_fine(message: str) -> None:
    scheduler(ScriptedRunner(scancel=[failed(message)])).cancel("99")


def test_cancel_retries_transient_and_raises_permanent_failures() -> None:
    runner = ScriptedRunner(
        scancel=[failed("scancel: error: Socket timed out on send/recv operation"), ok()]
    )
    scheduler(runner).cancel("16")
    assert runner.commands() == ["scancel", "scancel"]
    denied = ScriptedRunner(
        scancel=[failed("scancel: error: Kill job error on job id 16: Access/permission denied")]
    )
    with pytest.raises(PermanentSchedulerError, match="permission denied"):
        scheduler(denied).cancel("16")


ALLOCATION = Allocation.model_validate(
    {"kind": "Allocation", "name": "ws", "time_limit": 10, "resources": {"partition": "cpu"}}
)


def test_allocate_holds_an_allocation_with_no_shell_and_the_tag() -> None:
    alloc = Tag(
        project="demo",
        deployment="0123456789ab",
        kind="alloc",
        name="ws",
        spec_hash="0123456789abcdef",
    )
    granted = "salloc: Pending job allocation 21\nsalloc: Granted job allocation 21\n"
    runner = ScriptedRunner(salloc=[ok("", granted)], scancel=[ok()])
    sched = scheduler(runner)
    job_id = sched.allocate(AllocateRequest(allocation=ALLOCATION, tag=alloc))
    assert job_id == "21"
    assert runner.calls[0] == (
        [
            "salloc",
            "--no-shell",
            "--job-name=demo.ws",
            "--comment=recon2:demo:0123456789ab:alloc:ws:0123456789abcdef",
            "--time=00:10:00",
            "--partition=cpu",
        ],
        None,
    )
    sched.release(job_id)
    assert runner.calls[1] == (["scancel", "21"], None)


# --- the real runner -------------------------------------------------------------------


def test_the_runner_pins_slurms_time_format_and_passes_stdin(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLURM_TIME_FORMAT", "relative")
    result = run(["sh", "-c", 'cat; printf "%s" "$SLURM_TIME_FORMAT"'], "script\n")
    assert (result.returncode, result.stdout) == (0, "script\nstandard")


def test_the_runner_keeps_sbatch_options_in_the_environment_from_overriding_the_script(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SBATCH_PARTITION", "elsewhere")
    monkeypatch.setenv("SALLOC_ACCOUNT", "someone")
    monkeypatch.setenv("RECON_KEPT", "yes")
    result = run(
        ["sh", "-c", 'printf "%s|%s|%s" "$SBATCH_PARTITION" "$SALLOC_ACCOUNT" "$RECON_KEPT"']
    )
    assert result.stdout == "||yes"


def test_the_runner_reports_a_missing_command_as_a_failure() -> None:
    result = run(["recon-no-such-command"])
    assert result.returncode == NOT_FOUND and "recon-no-such-command" in result.stderr


def test_the_runner_carries_a_large_script_and_both_outputs_whole() -> None:
    """More than a pipe holds each way: nothing is lost or deadlocks while it is written."""
    script = "".join(f"#SBATCH --comment=line-{i}\r\n" for i in range(20_000))
    result = run(["sh", "-c", "cat; yes said | head -n 50000 >&2; exit 3"], script)
    assert result.returncode == 3
    assert result.stdout == script.replace("\r\n", "\n")  # as text=True reads it
    assert result.stderr == "said\n" * 50_000


def test_the_runner_stops_a_command_that_hangs(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runner_module, "TIMEOUT_SECONDS", 0.3)
    started = time.monotonic()
    result = run(["sleep", "30"])
    assert result.returncode == TIMED_OUT and "timed out" in result.stderr
    # Its output closed, it still does not exit: the wait for its end has the same bound.
    closed = run(["sh", "-c", "exec >&- 2>&-; sleep 30"])
    assert closed.returncode == TIMED_OUT and "timed out" in closed.stderr
    assert time.monotonic() - started < 10


def test_sacct_lists_in_full_only_the_jobs_its_own_rows_or_squeue_say_are_recons() -> None:
    """First the jobs' own rows of the window (``--allocations``: cheap), then every row,
    steps included, of the project's jobs among them, in the same window and states: not
    another project's (7) nor another user's work (6)."""
    other = TAG.model_copy(update={"project": "elsewhere"})
    jobs_only = lines(
        sacct_row("5+0", "COMPLETED", TAG),
        sacct_row("5+1", "COMPLETED", TAG),
        sacct_row("6", "COMPLETED", None),
        sacct_row("7", "COMPLETED", other),
        sacct_row("8", "RUNNING", None),  # running: sacct shows no comment, squeue does
    )
    full = lines(
        sacct_row("5+0", "COMPLETED", TAG),
        "5+0.batch|5.batch|COMPLETED|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|"
        "2026-11-29T22:41:07|cpu1||||||||batch|",
        sacct_row("5+1", "COMPLETED", TAG),
        sacct_row("8", "RUNNING", None),
        "8.0|8.0|RUNNING|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|Unknown|cpu1||||||||step|",
    )
    live = lines(squeue_row("8", "RUNNING", TAG.model_copy(update={"name": "eval"})))
    runner = ScriptedRunner(squeue=[ok(live)], sacct=[ok(jobs_only), ok(full)])
    demo = SlurmScheduler(
        runner, clock=lambda: NOW, tz=UTC, user="tester", project="demo", history_at_once=False
    )
    observation = demo.observe(SINCE)
    assert runner.commands() == ["squeue", "sacct", "sacct"]
    first, second = (argv for argv, _ in runner.calls[1:])
    assert "--allocations" in first and not any(a.startswith("--jobs") for a in first)
    assert "--allocations" not in second
    assert [a for a in second if a.startswith("--jobs")] == ["--jobs=5,8"], second
    assert [a for a in first if a != "--allocations"] == second[: len(first) - 1]
    assert {job.job_id: [r.job_id for r in job.rows] for job in observation.jobs} == {
        "5": ["5+0", "5+0.batch", "5+1"],
        "8": ["8", "8.0"],
    }
    assert observation.complete


STEP_OF_8 = "8.0|8.0|RUNNING|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|Unknown|cpu1||||||||step|"


def named_jobs(runner: ScriptedRunner) -> list[str]:
    """The ``--jobs=`` of every sacct call, in the order they were made."""
    return [arg for argv, _ in runner.calls for arg in argv if arg.startswith("--jobs=")]


def test_sacct_named_at_once_the_jobs_squeue_lists_and_they_are_all_of_recons() -> None:
    """A commit's pass while the project's jobs are queued or running: the jobs squeue
    lists are asked for in full beside the jobs-only call, and that answer is used."""
    live = lines(squeue_row("8", "RUNNING", TAG))
    named_started = threading.Event()

    def sacct(argv: Sequence[str], stdin: str | None) -> Result:
        if "--allocations" in argv:
            # Answered only once the named call is under way: one after the other fails.
            assert named_started.wait(5), "the named sacct did not run beside this one"
            return ok(lines(sacct_row("8", "RUNNING", None)))
        named_started.set()
        return ok(lines(sacct_row("8", "RUNNING", None), STEP_OF_8))

    runner = ScriptedRunner(squeue=[ok(live)], sacct=[sacct])
    observation = SlurmScheduler(runner, clock=lambda: NOW, tz=UTC, user="tester").observe(SINCE)
    assert runner.commands() == ["squeue", "sacct", "sacct"]  # no third call
    assert named_jobs(runner) == ["--jobs=8"]
    assert {job.job_id: [r.job_id for r in job.rows] for job in observation.jobs} == {
        "8": ["8", "8.0"]
    }
    assert observation.complete


def test_a_job_of_recons_squeue_no_longer_lists_is_asked_for_after_the_jobs_only_call() -> None:
    live = lines(squeue_row("8", "RUNNING", TAG))
    ended = sacct_row("5", "COMPLETED", TAG)

    def sacct(argv: Sequence[str], stdin: str | None) -> Result:
        if "--allocations" in argv:
            return ok(lines(ended, sacct_row("8", "RUNNING", None)))
        if "--jobs=5,8" in argv:
            return ok(lines(ended, sacct_row("8", "RUNNING", None), STEP_OF_8))
        return ok(lines(sacct_row("8", "RUNNING", None), STEP_OF_8))

    runner = ScriptedRunner(squeue=[ok(live)], sacct=[sacct])
    observation = SlurmScheduler(runner, clock=lambda: NOW, tz=UTC, user="tester").observe(SINCE)
    assert runner.commands() == ["squeue", "sacct", "sacct", "sacct"]
    assert named_jobs(runner) == ["--jobs=8", "--jobs=5,8"]  # the early one, then all
    assert {job.job_id: [r.job_id for r in job.rows] for job in observation.jobs} == {
        "5": ["5"],
        "8": ["8", "8.0"],
    }


def test_when_the_second_sacct_fails_the_observation_says_incomplete() -> None:
    past = lines(sacct_row("5", "COMPLETED", TAG))
    broken = failed("sacct: error: Problem talking to the database: Connection refused")
    runner = ScriptedRunner(squeue=[ok()], sacct=[ok(past), broken])
    observation = scheduler(runner).observe(SINCE)
    assert runner.commands() == ["squeue", "sacct", "sacct"]
    assert not observation.complete
    assert "Connection refused" in " ".join(observation.problems)


def test_past_the_named_jobs_limit_the_second_sacct_asks_for_the_window_in_full(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(adapter, "NAMED_JOBS_MAX", 2)
    past = lines(*(sacct_row(str(id_), "COMPLETED", TAG) for id_ in (5, 6, 7)))
    runner = ScriptedRunner(squeue=[ok()], sacct=[ok(past)])
    observation = scheduler(runner).observe(SINCE)
    first, second = (argv for argv, _ in runner.calls[1:])
    assert [a for a in first if a != "--allocations"] == second
    assert len(observation.jobs) == 3
