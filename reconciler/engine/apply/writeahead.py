"""The write-ahead sequence every act of apply goes through, the core of its crash safety:

    intent journalled ─▶ scheduler call ─▶ done: what it made journalled (a job id...)
                                       └─▶ refused: the scheduler's refusal journalled

The intent is durable before the call. A crash, or any error but a refusal, between the
call and the journal write leaves the intent open: the next pass finds what the call made
by its tag (or its step's name) and adopts it, instead of making it again. A refusal
(``PermanentSchedulerError``: a bad partition...) made nothing; it is journalled and the
act goes on to the next. Each act says its own journal writes: a submission's job id, an
allocation's setup step, a cancel done.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

from reconciler.engine.apply.faults import fault_point
from reconciler.errors import PermanentSchedulerError

Handle = TypeVar("Handle")  # the journal's handle on an intent: a record id, or several
T = TypeVar("T")  # what the call answers: a job id...


@dataclass(frozen=True)
class Sent(Generic[T]):
    """What came of one act: the call's answer, or the scheduler's refusal."""

    answer: T | None = None
    refused: str | None = None  # the scheduler's refusal: nothing was made


def write_ahead(
    intend: Callable[[], Handle],
    call: Callable[[], T],
    done: Callable[[Handle, T], None],
    refused: Callable[[Handle, str], None] | None = None,
    *,
    fault: str | None = None,
) -> Sent[T]:
    """``intend`` journals the intent (or hands one written ahead), then ``call`` asks the
    scheduler; its answer goes to ``done``, a refusal to ``refused`` (without one, an act
    that cannot be refused: the error goes up, the intent stays open). ``fault`` names the
    fault point (``faults``) between the call and the journal."""
    intent = intend()
    try:
        answer = call()
    except PermanentSchedulerError as error:
        if refused is None:
            raise
        refused(intent, str(error))
        return Sent(refused=str(error))
    if fault is not None:
        fault_point(fault)
    done(intent, answer)
    return Sent(answer)
