"""Resources raised on retry, on plain values: a retry after running out of memory (or
time) asks for the declared value multiplied once per such attempt since the last
success, up to `max` and the largest node that holds it; the spec hash stays."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from pydantic import ValidationError

from reconciler.desired.desired import DesiredRun
from reconciler.desired.matrix import Member
from reconciler.desired.retries import RetryKind
from reconciler.engine.ledger.status import run_statuses
from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import Action, ActionKind, Raised
from reconciler.engine.plan.budgets import Attempt
from reconciler.engine.plan.fit import FitChecker
from reconciler.engine.plan.raises import raised
from reconciler.report.status import health_words
from reconciler.scheduler.partitions import Node, Partition
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.scheduler.usage import JobUsage
from reconciler.state.records import EndingKind, SubmissionRecord
from tests.planning import NOW, desired, hash_of, job, observed, record, run

ENDINGS: dict[str, tuple[EndingKind | None, str | None, int | None]] = {
    "oom": (EndingKind.OUT_OF_MEMORY, "out of memory", None),
    "timeout": (EndingKind.TIMEOUT, "timed out", None),
    "failed": (None, None, 1),
    "succeeded": (None, None, 0),
}
RESOURCES = {"memory": "1GiB", "time": "01:00:00"}
RETRIES = {"failure": 2, "timeout": 3, "out_of_memory": 3}


def settled(digest: str, job_id: str, how: str) -> SubmissionRecord:
    kind, reason, exit_code = ENDINGS[how]
    health = Health.SUCCEEDED if how == "succeeded" else Health.FAILED
    made = record("train", digest, job_id, health, reason=reason, exit_code=exit_code, ending=kind)
    return replace(made, usage_json=json.dumps(JobUsage(elapsed_s=3600.0).to_json()))


def decided(endings: list[str], fit: FitChecker | None = None, **fields: Any) -> Action:
    spec = {"resources": RESOURCES, "retries": RETRIES, **fields}
    state = desired(run("train", **spec))
    digest = hash_of(state, "train")
    records = [settled(digest, str(60 + i), how) for i, how in enumerate(endings)]
    made = plan(state, observed(), records, NOW, scheduler="slurm", fit=fit)
    (action,) = made.actions
    return action


OOM = {"on_oom": {"memory": "x2", "max": "3GiB"}}
LONGER = {"on_timeout": {"time": "x1.5", "max": "02:00:00"}}

# endings, fields, then what the retry asks for (MiB, seconds) and says.
TABLE: list[tuple[list[str], dict[str, Any], Raised | None]] = [
    (["oom"], OOM, Raised(memory_mb=2048, words="memory 2GiB (x2 after out of memory)")),
    (["oom", "oom"], OOM,
     Raised(memory_mb=3072, words="memory 3GiB (x4 after 2 times out of memory, at max 3GiB)")),
    # a failure between keeps the raise: once per OOM attempt since the last success
    (["oom", "failed"], OOM, Raised(memory_mb=2048, words="memory 2GiB (x2 after out of memory)")),
    # a success starts again from what the spec declares
    (["oom", "succeeded", "failed"], OOM, None),
    (["timeout"], LONGER, Raised(time_s=5400, words="time 01:30:00 (x1.5 after timeout)")),
    (["timeout", "timeout"], LONGER,
     Raised(time_s=7200, words="time 02:00:00 (x2.25 after 2 times timeout, at max 02:00:00)")),
    # no on_oom: the retry asks for what it asked before
    (["oom"], {}, None),
    (["timeout"], OOM, None),
]  # fmt: skip


@pytest.mark.parametrize(("endings", "fields", "raised"), TABLE)
def test_what_a_retry_asks_for(
    endings: list[str], fields: dict[str, Any], raised: Raised | None
) -> None:
    action = decided(endings, **fields)
    assert action.kind is ActionKind.RETRY
    assert action.raised == raised
    if raised is not None:
        assert action.reason.endswith(f"; retry with {raised.words}"), action.reason


def test_a_raise_past_every_node_stops_at_the_largest_that_fits() -> None:
    nodes = (Node(name="cpu1", cpus=8, memory_mb=2500, state="idle"),)
    fit = FitChecker([Partition(name="cpu", default=True, nodes=nodes)])
    action = decided(["oom", "oom"], fit=fit, on_oom={"memory": "x2", "max": "64GiB"})
    assert action.raised == Raised(
        memory_mb=2500,
        words="memory 2500MiB (x4 after 2 times out of memory; the most a node holds)",
    )


def test_the_spec_hash_does_not_change_and_a_success_keeps_the_run_current() -> None:
    plain = hash_of(desired(run("train", resources=RESOURCES)), "train")
    assert hash_of(desired(run("train", resources=RESOURCES, **OOM, **LONGER)), "train") == plain
    state = desired(run("train", resources=RESOURCES, retries=RETRIES, **OOM))
    digest = hash_of(state, "train")
    raised = replace(settled(digest, "61", "succeeded"), raised={"memory_mb": 2048})
    records = [settled(digest, "60", "oom"), raised]
    made = plan(state, observed(), records, NOW, scheduler="slurm")
    assert not made.has_changes
    (row,) = run_statuses(state, made, observed(), records)
    assert health_words(row) == "succeeded (with memory 2GiB, raised)"


def test_status_shows_the_raise_of_a_running_retry() -> None:
    state = desired(run("train", resources=RESOURCES, retries=RETRIES, **OOM))
    digest = hash_of(state, "train")
    records = [
        settled(digest, "60", "oom"),
        replace(record("train", digest, "61"), raised={"memory_mb": 2048, "time_s": None}),
    ]
    seen = observed(job("train", digest, S.RUNNING, "61"))
    (row,) = run_statuses(state, plan(state, seen, records, NOW, scheduler="slurm"), seen, records)
    assert health_words(row) == "running (with memory 2GiB, raised)"


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"on_oom": {"memory": "x2"}, "resources": {"time": "1h"}}, "declare resources.memory"),
        ({"on_timeout": {"time": "x2"}, "resources": {"memory": "1GiB"}}, "resources.time"),
        ({"on_oom": {"memory": "x1"}, "resources": RESOURCES}, "a factor more than 1"),
        ({"on_oom": {"memory": "twice"}, "resources": RESOURCES}, "written x2 or x1.5"),
        ({"on_oom": {"memory": "x2", "mem": "1GiB"}, "resources": RESOURCES}, "mem"),
    ],
)
def test_a_raise_that_cannot_be_is_refused(fields: dict[str, Any], message: str) -> None:
    with pytest.raises(ValidationError) as raised:
        run("train", **fields)
    assert message in str(raised.value)


def test_a_sweeps_members_are_not_raised() -> None:
    state = desired(run("train", resources=RESOURCES, retries=RETRIES, **OOM))
    alone = state.runs["train"]
    oom = [Attempt("60", "out of memory", RetryKind.OUT_OF_MEMORY)]
    assert raised(alone, oom, None) is not None
    member = DesiredRun(
        alone.spec,
        location=alone.location,
        spec_hash=alone.spec_hash,
        member=Member("train", (("seed", 0),)),
    )
    assert raised(member, oom, None) is None
