"""How far back a pass asks the scheduler (sacct -S): to the oldest job the journal still
needs to see end, not to the oldest job ever (issue: observation that stays cheap)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from reconciler.engine.observe.observation import observation_window
from reconciler.scheduler.states import Health
from reconciler.state.records import SetupRecord, SubmissionRecord, SubmissionStatus

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)


def record(
    age: timedelta,
    status: SubmissionStatus = SubmissionStatus.SUBMITTED,
    final: Health | None = None,
    job_id: str | None = "7",
    spec_fields: dict[str, object] | None = None,
) -> SubmissionRecord:
    return SubmissionRecord(
        id=1,
        project="p",
        name="a",
        spec_hash="0123456789abcdef",
        commit="c" * 40,
        job_id=job_id,
        status=status,
        final_health=final,
        spec_fields={"command": "x"} if spec_fields is None else spec_fields,
        created_at=NOW - age,
        updated_at=NOW - age,
    )


def settled(age: timedelta) -> SubmissionRecord:
    return record(age, final=Health.SUCCEEDED)


def test_jobs_the_journal_has_settled_are_not_asked_about_again() -> None:
    history = [settled(days * DAY) for days in (1, 5, 20)]
    assert observation_window(history, (), NOW) == NOW - HOUR


def test_the_window_starts_at_the_oldest_job_whose_end_the_journal_has_not_seen() -> None:
    history = [settled(20 * DAY), record(5 * DAY), record(2 * HOUR), settled(HOUR)]
    assert observation_window(history, (), NOW) == NOW - 5 * DAY - HOUR


def test_an_open_intent_counts_since_its_job_may_have_been_sent() -> None:
    intent = record(3 * HOUR, SubmissionStatus.INTENT, job_id=None)
    assert observation_window([settled(DAY), intent], (), NOW) == NOW - 4 * HOUR


def test_a_refused_submission_has_no_job_to_wait_for() -> None:
    refused = record(9 * DAY, SubmissionStatus.REFUSED, job_id=None)
    assert observation_window([refused, settled(DAY)], (), NOW) == NOW - HOUR


def test_an_intent_filled_in_by_adoption_counts_from_the_intent() -> None:
    adopted = record(6 * HOUR, SubmissionStatus.ADOPTED)
    assert observation_window([adopted], (), NOW) == NOW - 7 * HOUR


def test_a_job_adopted_after_a_lost_journal_is_looked_for_as_far_back_as_it_goes() -> None:
    # Its record was made when it was found, not when it was submitted.
    found = record(HOUR, SubmissionStatus.ADOPTED, spec_fields={})
    assert observation_window([found], (), NOW) == NOW - 30 * DAY


def test_an_unsettled_setup_counts_too() -> None:
    setup = SetupRecord(
        id=1,
        project="p",
        name="warm",
        spec_hash="0123456789abcdef",
        allocation_job="40",
        step_id=None,
        created_at=NOW - 10 * HOUR,
        updated_at=NOW - 10 * HOUR,
    )
    assert observation_window([settled(DAY)], [setup], NOW) == NOW - 11 * HOUR
    ended = setup.model_copy(update={"final_health": Health.SUCCEEDED})
    assert observation_window([settled(DAY)], [ended], NOW) == NOW - HOUR


def test_never_more_than_thirty_days_and_two_days_without_a_journal() -> None:
    assert observation_window([record(90 * DAY)], (), NOW) == NOW - 30 * DAY
    assert observation_window((), (), NOW) == NOW - 2 * DAY
