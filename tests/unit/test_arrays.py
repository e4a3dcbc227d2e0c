"""Job arrays at the scheduler seam: index lists both ways, the request, per-task views."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest
from pydantic import ValidationError

from reconciler.scheduler.arrays import array_spec, compress, expand
from reconciler.scheduler.base import ArrayRequest, JobRecord, ObservedJob, SubmitRequest
from reconciler.scheduler.slurm import argv
from reconciler.scheduler.slurm.parse import job_id_parts, parse_max_array_size
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag

TAG = Tag.parse("recon2:arr:0123456789ab:run:train:0123456789abcdef")
assert TAG is not None


@pytest.mark.parametrize(
    ("indices", "text"),
    [
        ((0,), "0"),
        ((0, 1, 2, 3, 7), "0-3,7"),
        ((0, 2, 5), "0,2,5"),
        ((4, 5, 9, 10, 11, 20), "4-5,9-11,20"),
        ((7, 3, 3, 2), "2-3,7"),
    ],
)
def test_compress_writes_consecutive_runs_as_ranges(indices: tuple[int, ...], text: str) -> None:
    assert compress(indices) == text
    assert expand(text) == tuple(sorted(set(indices)))


def test_array_spec_appends_the_cap() -> None:
    assert array_spec((0, 2, 5), 4) == "0,2,5%4"
    assert array_spec((0, 1, 2, 3, 7), None) == "0-3,7"


@pytest.mark.parametrize(
    ("text", "indices"),
    [
        ("[5-9%2]", (5, 6, 7, 8, 9)),
        ("[1,3-4]", (1, 3, 4)),
        ("[5,7,9-11]", (5, 7, 9, 10, 11)),
        ("[0-6:3]", (0, 3, 6)),
        ("12", (12,)),
    ],
)
def test_expand_reads_every_form_slurm_prints(text: str, indices: tuple[int, ...]) -> None:
    assert expand(text) == indices


@pytest.mark.parametrize("text", ["[]", "[a-b]", "[5-3]", "[1,,2]", "[0-4:0]"])
def test_expand_refuses_what_slurm_does_not_print(text: str) -> None:
    with pytest.raises(ValueError, match="not an array task list"):
        expand(text)


def test_array_request_wants_sorted_unique_indices_and_a_positive_cap() -> None:
    assert ArrayRequest(indices=(0, 2, 5), max_parallel=1).max_parallel == 1
    for bad in [{"indices": ()}, {"indices": (2, 1)}, {"indices": (1, 1)}, {"indices": (-1, 0)}]:
        with pytest.raises(ValidationError):
            ArrayRequest.model_validate(bad)
    with pytest.raises(ValidationError):
        ArrayRequest(indices=(0,), max_parallel=0)


def _request(array: ArrayRequest | None, dependencies: tuple[str, ...] = ()) -> SubmitRequest:
    return SubmitRequest(
        script="#!/bin/bash\ntrue\n",
        workdir=Path("/w"),
        tag=TAG,
        array=array,
        dependencies=dependencies,
    )


def test_sbatch_renders_the_array_with_its_cap() -> None:
    command = argv.sbatch(_request(ArrayRequest(indices=(0, 1, 2, 3, 7), max_parallel=4)))
    assert "--array=0-3,7%4" in command
    assert "--array=0,2,5" in argv.sbatch(_request(ArrayRequest(indices=(0, 2, 5))))
    assert not [arg for arg in argv.sbatch(_request(None)) if arg.startswith("--array")]


def test_a_dependency_may_name_one_array_task() -> None:
    command = argv.sbatch(_request(None, dependencies=("12", "13_4")))
    assert "--dependency=afterok:12:13_4" in command
    with pytest.raises(ValidationError):
        _request(None, dependencies=("13_[4-5]",))


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("123_4", ("123", None, "4", None)),
        ("123_[5-9%2]", ("123", None, "[5-9%2]", None)),
        ("123_[1,3-4]", ("123", None, "[1,3-4]", None)),
        ("123_4.batch", ("123", None, "4", "batch")),
        ("123_4.0", ("123", None, "4", "0")),
        ("4+1.0", ("4", 1, None, "0")),
    ],
)
def test_job_id_parts_of_every_array_form(
    text: str, parts: tuple[str, int | None, str | None, str | None]
) -> None:
    assert job_id_parts(text) == parts


def test_no_id_is_both_a_het_component_and_an_array_task() -> None:
    assert job_id_parts("4+1_3") is None
    assert job_id_parts("4_3+1") is None


def test_max_array_size_is_read_from_scontrol_show_config() -> None:
    config = (
        "Configuration data as of 2026-12-01T17:40:00\n"
        "MailProg                = /bin/mail\n"
        "MaxArraySize            = 1001\n"
        "MaxBatchRequeue         = 5\n"
    )
    assert parse_max_array_size(config) == 1001
    assert parse_max_array_size("MaxJobCount = 10000\n") is None


def _row(job_id: str, state: SlurmState, source: str = "squeue") -> JobRecord:
    parts = job_id_parts(job_id)
    assert parts is not None
    return JobRecord(
        **{
            "job_id": job_id,
            **parts._asdict(),
            "state": state,
            "tag": None if parts.step else TAG,
            "source": source,
            "submit": datetime(2026, 12, 1, tzinfo=UTC),
        }
    )


def test_tasks_gives_one_view_per_task_with_its_steps_and_pending_ones_expanded() -> None:
    job = ObservedJob(
        job_id="123",
        tag=TAG,
        rows=(
            _row("123_0", SlurmState.COMPLETED),
            _row("123_0.batch", SlurmState.COMPLETED, "sacct"),
            _row("123_3", SlurmState.RUNNING),
            _row("123_3.batch", SlurmState.RUNNING, "sacct"),
            _row("123_3.0", SlurmState.RUNNING, "sacct"),
            _row("123_[5-7%2]", SlurmState.PENDING),
        ),
    )
    tasks = job.tasks()
    assert list(tasks) == [0, 3, 5, 6, 7]
    assert [task.job_id for task in tasks.values()] == ["123_0", "123_3", "123_5", "123_6", "123_7"]
    assert all(task.tag == TAG for task in tasks.values())
    assert [row.job_id for row in tasks[3].rows] == ["123_3", "123_3.batch", "123_3.0"]
    assert tasks[0].health is Health.SUCCEEDED
    assert tasks[3].health is Health.RUNNING
    pending = tasks[6]
    assert [(row.job_id, row.array_task, row.state) for row in pending.rows] == [
        ("123_6", "6", SlurmState.PENDING)
    ]


def test_a_task_on_its_own_row_is_not_read_again_from_a_range_that_holds_it() -> None:
    job = ObservedJob(
        job_id="123",
        tag=TAG,
        rows=(_row("123_[5-9]", SlurmState.PENDING), _row("123_5", SlurmState.RUNNING, "sacct")),
    )
    tasks = job.tasks()
    assert list(tasks) == [5, 6, 7, 8, 9]
    assert tasks[5].health is Health.RUNNING
    assert tasks[6].health is Health.PENDING


def test_a_job_that_is_no_array_has_no_tasks() -> None:
    job = ObservedJob(job_id="7", tag=TAG, rows=(_row("7", SlurmState.RUNNING),))
    assert job.tasks() == {}


def test_a_task_view_is_an_observed_job_of_its_own_id() -> None:
    ObservedJob(job_id="123_4", tag=TAG, rows=(_row("123_4", SlurmState.RUNNING),))
    with pytest.raises(ValidationError):
        ObservedJob(job_id="123_[4-5]", tag=TAG, rows=(_row("123_4", SlurmState.RUNNING),))


def test_tasks_are_worked_out_once_and_again_for_a_copy_with_other_rows() -> None:
    job = ObservedJob(job_id="123", tag=TAG, rows=(_row("123_[5-6]", SlurmState.PENDING),))
    first = job.tasks()
    first.clear()  # the caller's own dict: the job's views are untouched
    assert list(job.tasks()) == [5, 6]
    assert job.tasks()[5] is job.tasks()[5]
    assert job == ObservedJob(job_id="123", tag=TAG, rows=job.rows)
    moved = job.model_copy(update={"rows": (_row("123_7", SlurmState.RUNNING),)})
    assert list(moved.tasks()) == [7]
