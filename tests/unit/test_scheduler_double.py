"""The shipped Scheduler double (reconciler/scheduler/testing.py): it is a Scheduler
(mypy checks the assignments below), answers as scripted, and fails the test on a call
nothing was scripted for."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.base import (
    ConcurrentScheduler,
    Observation,
    Scheduler,
    StepRequest,
    StepScheduler,
    SubmitRequest,
)
from reconciler.scheduler.tag import Tag
from reconciler.scheduler.testing import (
    Call,
    ScriptedScheduler,
    ScriptedStepScheduler,
    job_ids,
)

NOW = datetime(2026, 12, 2, tzinfo=UTC)


def request(name: str) -> SubmitRequest:
    tag = Tag(project="p", deployment="0" * 12, kind="run", name=name, spec_hash="0" * 16)
    return SubmitRequest(script="#!/bin/bash\ntrue\n", workdir=Path("/tmp"), tag=tag)


def test_it_is_a_scheduler_and_only_the_step_double_runs_steps() -> None:
    plain: Scheduler = ScriptedScheduler()
    steps: Scheduler = ScriptedStepScheduler()
    assert not isinstance(plain, StepScheduler)
    assert isinstance(steps, StepScheduler)
    # One submission at a time unless told otherwise: what the applier does without a pool.
    assert isinstance(plain, ConcurrentScheduler) and plain.submissions_at_once == 1


def test_a_method_nothing_was_scripted_for_must_not_be_called() -> None:
    scheduler = ScriptedScheduler(partitions=())
    with pytest.raises(AssertionError, match=r"^slurm scheduler: cancel must not be called here"):
        scheduler.cancel("12")
    with pytest.raises(AssertionError, match=r"submit must not be called"):
        scheduler.submit(request("a"))
    assert scheduler.partitions() == ()
    assert scheduler.calls == [
        Call("cancel", "12"),
        Call("submit", request("a")),
        Call("partitions", None),
    ]


def test_values_exceptions_callables_and_lists_answer_as_scripted() -> None:
    observation = Observation(taken_at=NOW, jobs=(), complete=True)
    refused = PermanentSchedulerError("invalid partition")
    scheduler = ScriptedScheduler(
        observe=observation,
        submit=["11", refused, lambda r: f"1{len(r.tag.name)}"],
        cancel=None,
        max_array_size=lambda: 7,
        release=refused,
    )
    assert scheduler.observe(NOW) is observation
    assert scheduler.observe(NOW) is observation  # a value answers every call
    assert scheduler.submit(request("a")) == "11"
    with pytest.raises(PermanentSchedulerError):
        scheduler.submit(request("b"))
    assert scheduler.submit(request("ccc")) == "13"
    with pytest.raises(AssertionError, match=re.escape("submit was called 4 times; 3 answers")):
        scheduler.submit(request("d"))
    scheduler.cancel("12")  # None answers it
    assert scheduler.max_array_size() == 7
    with pytest.raises(PermanentSchedulerError):
        scheduler.release("13")
    with pytest.raises(PermanentSchedulerError):
        scheduler.release("14")  # an exception answers every call too

    assert [r.tag.name for r in scheduler.submitted] == ["a", "b", "ccc", "d"]
    assert scheduler.observed_since == [NOW, NOW]
    assert scheduler.cancelled == ["12"] and scheduler.released == ["13", "14"]
    assert scheduler.methods()[:3] == ["observe", "observe", "submit"]
    assert scheduler.methods("cancel", "release") == ["cancel", "release", "release"]
    assert scheduler.calls_to("cancel", "max_array_size") == [
        ("cancel", "12"),
        ("max_array_size", None),
    ]


def test_job_ids_count_on_across_the_methods_they_answer() -> None:
    ids = job_ids(501)
    scheduler = ScriptedScheduler(submit=ids, allocate=ids)
    assert scheduler.submit(request("a")) == "501"
    assert scheduler.submit(request("b")) == "502"
    assert scheduler.allocated == []


def test_the_step_double_records_the_steps_it_started(tmp_path: Path) -> None:
    step = StepRequest(
        allocation_id="12", script=tmp_path / "s.sh", workdir=tmp_path, log_dir=tmp_path,
        shape=None, tag=request("a").tag,
    )  # fmt: skip
    scheduler = ScriptedStepScheduler(start_step=[None, lambda r: f"{r.allocation_id}.1"])
    assert scheduler.start_step(step) is None  # started, not listed yet
    assert scheduler.start_step(step) == "12.1"
    assert scheduler.started == [step, step]
    with pytest.raises(AssertionError, match="containers must not be called"):
        scheduler.containers()
