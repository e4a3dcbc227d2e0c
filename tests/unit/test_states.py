"""Slurm states: every one read, every one mapped to a health, and the one aggregation rule."""

from __future__ import annotations

import pytest

from reconciler.scheduler.states import (
    ENDINGS,
    HEALTH,
    SHORT_CODES,
    Health,
    SlurmState,
    aggregate,
    in_words,
    parse_state,
)

# (long name, short code, health): the whole table, written out so a change shows here.
TABLE = [
    ("PENDING", "PD", Health.PENDING),
    ("CONFIGURING", "CF", Health.RUNNING),
    ("RUNNING", "R", Health.RUNNING),
    ("COMPLETING", "CG", Health.RUNNING),
    ("COMPLETED", "CD", Health.SUCCEEDED),
    ("FAILED", "F", Health.FAILED),
    ("TIMEOUT", "TO", Health.FAILED),
    ("OUT_OF_MEMORY", "OOM", Health.FAILED),
    ("NODE_FAIL", "NF", Health.FAILED),
    ("PREEMPTED", "PR", Health.FAILED),
    ("BOOT_FAIL", "BF", Health.FAILED),
    ("DEADLINE", "DL", Health.FAILED),
    ("CANCELLED", "CA", Health.CANCELLED),
    ("REQUEUED", "RQ", Health.PENDING),
    ("REQUEUE_FED", "RF", Health.PENDING),
    ("REQUEUE_HOLD", "RH", Health.PENDING),
    ("RESIZING", "RS", Health.RUNNING),
    ("REVOKED", "RV", Health.CANCELLED),
    ("SUSPENDED", "S", Health.RUNNING),
    ("SPECIAL_EXIT", "SE", Health.FAILED),
    ("STOPPED", "ST", Health.RUNNING),
    ("SIGNALING", "SI", Health.RUNNING),
    ("STAGE_OUT", "SO", Health.RUNNING),
    ("RESV_DEL_HOLD", "RD", Health.PENDING),
]


def test_the_table_covers_every_state_once() -> None:
    assert sorted(name for name, _, _ in TABLE) == sorted(state.value for state in SlurmState)
    assert set(HEALTH) == set(SlurmState)
    assert len(SHORT_CODES) == len(SlurmState)


@pytest.mark.parametrize(("name", "code", "health"), TABLE)
def test_long_name_and_short_code_read_as_the_same_state(
    name: str, code: str, health: Health
) -> None:
    assert parse_state(name) == (SlurmState(name), None)
    assert parse_state(code) == (SlurmState(name), None)
    assert HEALTH[SlurmState(name)] is health


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("CANCELLED by 0", (SlurmState.CANCELLED, 0)),
        ("CANCELLED by 51234", (SlurmState.CANCELLED, 51234)),
        ("CANCELLED+", (SlurmState.CANCELLED, None)),
        ("OUT_OF_ME+", None),  # a cut name is not guessed at
        ("  RUNNING ", (SlurmState.RUNNING, None)),
        ("running", None),
        ("", None),
        ("CANCELLED by root", None),
        ("EXPLODED", None),
    ],
)
def test_decorated_and_unknown_states(text: str, expected: object) -> None:
    assert parse_state(text) == expected


F, C, R, P, S, B = (
    Health.FAILED,
    Health.CANCELLED,
    Health.RUNNING,
    Health.PENDING,
    Health.SUCCEEDED,
    Health.BLOCKED,
)


@pytest.mark.parametrize(
    ("parts", "whole"),
    [
        ([S], S),
        ([S, S, S], S),
        ([P, S], P),  # pending outranks succeeded: not done until every part is
        ([R, P], R),  # running outranks pending
        ([R, P, S], R),
        ([F, R, P, S], F),  # any failure trumps
        ([C, R], C),  # cancelled counts as a failure kind for the trump rule...
        ([C, S], C),
        ([C, F], F),  # ...but a real failure explains more than a cancellation
        ([B, P], B),
        ([R, B], R),
        ([F, B], F),
    ],
)
def test_aggregate_one_rule_for_components_tasks_and_steps(
    parts: list[Health], whole: Health
) -> None:
    assert aggregate(parts) is whole
    assert aggregate(reversed(parts)) is whole


def test_aggregate_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one"):
        aggregate([])


@pytest.mark.parametrize(
    ("state", "reason", "words"),
    [
        (SlurmState.TIMEOUT, "TimeLimit", "timed out"),
        (SlurmState.NODE_FAIL, None, "node failed"),
        (SlurmState.OUT_OF_MEMORY, None, "out of memory"),
        (SlurmState.PREEMPTED, None, "preempted"),
        (SlurmState.DEADLINE, None, "deadline passed"),
        (SlurmState.SPECIAL_EXIT, "job requeued in held state",
         "held in special exit (job requeued in held state)"),
        (SlurmState.SUSPENDED, None, "suspended"),
        (SlurmState.PENDING, "JobHeldAdmin", "held (JobHeldAdmin)"),
        (SlurmState.REQUEUE_HOLD, "JobHeldUser", "held after requeue (JobHeldUser)"),
        (SlurmState.PENDING, "Priority", None),
        (SlurmState.FAILED, "NonZeroExitCode", None),
        (SlurmState.COMPLETED, None, None),
    ],
)  # fmt: skip
def test_states_that_say_more_than_their_health_are_put_in_words(
    state: SlurmState, reason: str | None, words: str | None
) -> None:
    assert in_words(state, reason) == words


def test_the_endings_settle_records_are_the_final_states_words() -> None:
    assert {
        "timed out", "node failed", "node failed to boot", "out of memory", "preempted",
        "deadline passed", "held in special exit",
    } == ENDINGS  # fmt: skip
