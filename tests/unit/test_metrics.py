"""`recon watch --metrics-addr`: what each pass does to the metrics, from the loop's own
reports (the loop under a frozen clock, as in test_watch), and the address option."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

import pytest
import typer
from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory

from reconciler.commands.watch import parse_address
from reconciler.engine.apply.applier import ApplyResult
from reconciler.engine.plan.actions import Action, ActionKind, Plan, SyncStatus
from reconciler.engine.plan.causes import Cause
from reconciler.engine.watch import PassReport, PassResult
from reconciler.errors import LockedError, ObservationError
from reconciler.metrics import WatchMetrics
from tests.planning import desired, outcome_of, run
from tests.unit.test_watch import T0, Recorder, Script, run_loop


@pytest.fixture
def frozen() -> Iterator[FrozenDateTimeFactory]:
    with freeze_time(T0) as factory:
        assert isinstance(factory, FrozenDateTimeFactory)
        yield factory


def value(metrics: WatchMetrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def test_the_loop_reports_each_pass_with_how_it_ended(frozen: FrozenDateTimeFactory) -> None:
    locked = LockedError("another recon apply holds the lock")
    down = ObservationError("squeue: slurmctld not responding")
    recorder = Recorder(failures={0: locked, 0.5: down, 1: ZeroDivisionError("a bug")})
    reports: list[PassReport] = []
    run_loop(Script(frozen, until=40), recorder, on_pass=reports.append)
    assert [r.result for r in reports] == [
        PassResult.RETRY, PassResult.RETRY, PassResult.CRASHED, PassResult.OK, PassResult.OK,
    ]  # fmt: skip
    assert [type(r.error) for r in reports[:3]] == [
        LockedError,
        ObservationError,
        ZeroDivisionError,
    ]
    assert reports[3].outcome is not None and reports[3].error is None


def test_failures_count_by_result_and_the_time_since_a_success_grows() -> None:
    now = [1000.0]
    metrics = WatchMetrics(clock=lambda: now[0])
    assert value(metrics, "recon_watch_passes_total", result="crashed") == 0
    now[0] = 1030.0
    metrics.record(PassReport(PassResult.RETRY, 2.0, error=ObservationError("sacct down")))
    metrics.record(PassReport(PassResult.RETRY, 0.1, error=LockedError("held")))
    metrics.record(PassReport(PassResult.CRASHED, 0.2, error=ZeroDivisionError("bug")))
    assert value(metrics, "recon_watch_passes_total", result="retry") == 2
    assert value(metrics, "recon_watch_passes_total", result="crashed") == 1
    assert value(metrics, "recon_watch_passes_total", result="ok") == 0
    assert value(metrics, "recon_watch_observation_failures_total") == 1  # not the lock
    assert value(metrics, "recon_watch_pass_duration_seconds_count") == 3
    assert value(metrics, "recon_watch_pass_duration_seconds_sum") == pytest.approx(2.3)
    assert value(metrics, "recon_watch_seconds_since_last_success") == 30  # since the start
    assert value(metrics, "recon_watch_last_success_timestamp_seconds") == 0


def plan_of(*actions: Action, complete: bool = True) -> Plan:
    return Plan(
        project="p", root="/repo", commit="c1", scheduler="local", created_at=T0,
        observation_complete=complete, fingerprint="f", actions=actions,
    )  # fmt: skip


def test_a_good_pass_counts_what_it_did_and_how_the_runs_stand() -> None:
    now = [1000.0]
    metrics = WatchMetrics(clock=lambda: now[0])
    actions = (
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="a",
            reason="new",
            sync=SyncStatus.NEVER_RUN,
        ),
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="b",
            reason="new",
            sync=SyncStatus.NEVER_RUN,
        ),
        Action(
            kind=ActionKind.REPLACE,
            cause=Cause.SPEC_CHANGED,
            target="c",
            reason="changed",
            sync=SyncStatus.OUTDATED,
        ),
    )
    applied = ApplyResult(
        submitted={"a": "1", "b": "2", "c": "4"}, cancelled=["3", "5"], torn_down=["5"]
    )
    outcome = outcome_of(plan_of(*actions, complete=False), applied)
    outcome = replace(
        outcome,
        look=replace(
            outcome.look,
            world=replace(outcome.look.world, desired=desired(run("a"), run("b"), run("c"))),
        ),
    )
    now[0] = 1060.0
    metrics.record(PassReport(PassResult.OK, 1.5, outcome=outcome))
    assert value(metrics, "recon_watch_submissions_total") == 3
    assert value(metrics, "recon_watch_cancels_total") == 2
    assert value(metrics, "recon_watch_teardowns_total") == 1
    assert value(metrics, "recon_watch_observation_failures_total") == 1  # seen in part
    assert value(metrics, "recon_runs", sync="never run", health="none") == 2
    assert value(metrics, "recon_runs", sync="outdated", health="none") == 1
    assert value(metrics, "recon_watch_last_success_timestamp_seconds") == 1060
    now[0] = 1075.0
    assert value(metrics, "recon_watch_seconds_since_last_success") == 15
    # The next pass sees other states: the old ones are not left behind.
    quiet = outcome_of(plan_of(), ApplyResult())
    metrics.record(PassReport(PassResult.OK, 0.1, outcome=quiet))
    assert value(metrics, "recon_runs", sync="never run", health="none") is None


@pytest.mark.parametrize(
    ("text", "address"),
    [("127.0.0.1:9464", ("127.0.0.1", 9464)), (":9464", ("127.0.0.1", 9464)),
     ("[::1]:9100", ("::1", 9100)), ("0.0.0.0:80", ("0.0.0.0", 80))],
)  # fmt: skip
def test_metrics_addresses(text: str, address: tuple[str, int]) -> None:
    assert parse_address(text) == address


@pytest.mark.parametrize("text", ["9464", "localhost", "host:", "host:port", "h:0", "h:70000"])
def test_a_bad_metrics_address_says_how_to_write_one(text: str) -> None:
    with pytest.raises(
        typer.BadParameter, match=re.escape("is not HOST:PORT: write e.g. 127.0.0.1:9464")
    ):
        parse_address(text)


def test_gpu_hours_are_counted_by_outcome_as_jobs_end_each_once() -> None:
    from datetime import UTC, datetime, timedelta

    from reconciler.engine.observe.endings import Ending
    from reconciler.scheduler.base import Held, JobRecord, ObservedJob
    from reconciler.scheduler.states import Health, SlurmState
    from reconciler.scheduler.tag import Tag
    from reconciler.state.records import SubmissionRecord, SubmissionStatus

    at = datetime(2026, 12, 2, tzinfo=UTC)

    def ended(
        name: str, job_id: str, state: SlurmState, health: Health, kind: str = "run"
    ) -> Ending:
        tag = Tag(project="p", deployment="0" * 12, kind=kind, name=name, spec_hash="1" * 16)
        row = JobRecord(
            job_id=job_id, top_id=job_id.partition(".")[0], state=state, start=at,
            end=at + timedelta(hours=2), elapsed=timedelta(hours=2),
            held=Held(cpus=4, gpus=2, nodes=1), source="sacct",
        )  # fmt: skip
        record = SubmissionRecord(
            id=1, project="p", kind="alloc" if kind == "alloc" else "run", name=name,
            spec_hash="1" * 16, commit=None, job_id=job_id, status=SubmissionStatus.SUBMITTED,
            created_at=at, updated_at=at,
        )  # fmt: skip
        job = ObservedJob(job_id=job_id, tag=tag, rows=(row,))
        return Ending(job, record, health, None, None)

    endings = (
        ended("a", "11", SlurmState.COMPLETED, Health.SUCCEEDED),
        ended("b", "12", SlurmState.FAILED, Health.FAILED),
        ended("c", "13", SlurmState.CANCELLED, Health.CANCELLED),
        ended("warm", "14", SlurmState.CANCELLED, Health.CANCELLED, kind="alloc"),  # no step
        ended("d", "14.0", SlurmState.COMPLETED, Health.SUCCEEDED),  # inside warm: not again
    )
    metrics = WatchMetrics(clock=lambda: 0.0)
    assert value(metrics, "recon_gpu_hours_total", outcome="succeeded") == 0
    passed = outcome_of(plan_of(), ApplyResult())
    passed = replace(passed, look=replace(passed.look, endings=endings))
    metrics.record(PassReport(PassResult.OK, 1.0, outcome=passed))
    for outcome, hours in (("succeeded", 4), ("failed", 4), ("cancelled", 4), ("alloc_idle", 4)):
        assert value(metrics, "recon_gpu_hours_total", outcome=outcome) == hours, outcome
        assert value(metrics, "recon_cpu_hours_total", outcome=outcome) == 2 * hours, outcome
    assert value(metrics, "recon_gpu_hours_total", outcome="alloc_work") == 0
    # the next pass settles nothing new: nothing counted twice
    metrics.record(PassReport(PassResult.OK, 1.0, outcome=outcome_of(plan_of(), ApplyResult())))
    assert value(metrics, "recon_gpu_hours_total", outcome="succeeded") == 4
