"""Retry budgets: which kind a failed attempt is, which budget it draws from, what is left,
and that in words. Pure.

An attempt's kind comes from how its job ended, as a value (``EndingKind``, recorded
by settle from Slurm's own state, or read from the rows of a job not settled yet):
TIMEOUT is a timeout, PREEMPTED a preemption, NODE_FAIL and BOOT_FAIL a node failure,
OUT_OF_MEMORY out of memory, anything else a failure (a non-zero exit, no outputs,
DEADLINE, a job held in special exit, a cancel by someone other than recon). A plain
`retries: N` counts every failed attempt against one budget, as it always did; budgets
per kind count only the attempts of the last one's kind.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from reconciler.desired.resources import Duration
from reconciler.desired.retries import Retries, RetryKind
from reconciler.engine.plan.actions import RetryBudget
from reconciler.state.records import SAVED_CHECKPOINT, EndingKind
from reconciler.words import plural

_KINDS: dict[EndingKind, RetryKind] = {
    EndingKind.TIMEOUT: RetryKind.TIMEOUT,
    EndingKind.PREEMPTED: RetryKind.PREEMPTION,
    EndingKind.NODE_FAIL: RetryKind.NODE_FAILURE,
    EndingKind.BOOT_FAIL: RetryKind.NODE_FAILURE,
    EndingKind.OUT_OF_MEMORY: RetryKind.OUT_OF_MEMORY,
}


def kind_of(ending: EndingKind | None) -> RetryKind:
    """The budget a failed attempt that ended so draws from."""
    return _KINDS.get(ending, RetryKind.FAILURE) if ending is not None else RetryKind.FAILURE


# How a job of a run with a checkpoint ends to be resumed, not retried: it saved its
# checkpoint when warned, or reached its time limit, or was preempted.
REQUEUED = frozenset({EndingKind.CHECKPOINTED, EndingKind.TIMEOUT, EndingKind.PREEMPTED})


@dataclass(frozen=True)
class Attempt:
    """A failed attempt at the run as it is now: its job, how it ended in words, its kind;
    ``requeue``: a job of a run with a checkpoint that ended to be resumed (``REQUEUED``),
    which draws from no budget."""

    job_id: str
    how: str
    kind: RetryKind
    requeue: bool = False


def requeue_words(attempt: Attempt, requeues: int, most: int) -> str:
    """Why a checkpointing run's next job is submitted: "resumes from its checkpoint: job
    41 timed out after 00:01:00 (requeue 2 of 20)"."""
    said = f"job {attempt.job_id} {attempt.how}"
    return f"resumes from its checkpoint: {said} (requeue {requeues} of {most})"


def never_finished_words(attempt: Attempt, most: int) -> str:
    """Why a checkpointing run is failed: its requeues are spent."""
    return (
        f"never finished in {plural(most, 'requeue')}: job {attempt.job_id} {attempt.how}; "
        "raise checkpoint.max_requeues or resources.time"
    )


def timed_out(elapsed_s: float | None) -> str | None:
    """A timeout in words with how long the job ran ("timed out after 01:00:00"); None
    when that is unknown."""
    if not elapsed_s or elapsed_s < 1:
        return None
    return f"{EndingKind.TIMEOUT.in_words} after {Duration(int(elapsed_s)).text}"


def saved_checkpoint(elapsed_s: float | None) -> str:
    """A job that saved its checkpoint when warned, with how long it ran when known."""
    if not elapsed_s or elapsed_s < 1:
        return SAVED_CHECKPOINT
    return f"{SAVED_CHECKPOINT} after {Duration(int(elapsed_s)).text}"


def drawn(retries: Retries, attempts: Sequence[Attempt]) -> RetryBudget:
    """The budget the last of ``attempts`` (oldest first) draws from, and how many
    failed attempts count against it."""
    kind = attempts[-1].kind
    counted = attempts if retries.shared else [a for a in attempts if a.kind is kind]
    return RetryBudget(
        kind=kind, shared=retries.shared, allowed=retries.allowed(kind), failed=len(counted)
    )


def retry_words(retries: Retries, attempts: Sequence[Attempt], budget: RetryBudget) -> str:
    """Why the run is retried: "attempt 2 of 3: job 41 failed (exit 1)" for a plain
    number (as before budgets came), "attempt 2: job 41 timed out after 01:00:00; 2 of 3
    timeout retries left" per kind."""
    last = attempts[-1]
    said = f"job {last.job_id} {last.how}"
    if retries.shared:
        assert budget.allowed is not None  # a plain number is never unlimited
        return f"attempt {len(attempts) + 1} of {budget.allowed + 1}: {said}"
    words = budget.kind.in_words
    if budget.allowed is None:
        so_far = plural(budget.failed, f"{words} retry", f"{words} retries")
        return f"attempt {len(attempts) + 1}: {said}; {so_far} so far (unlimited)"
    holds = plural(budget.allowed, f"{words} retry", f"{words} retries")
    return f"attempt {len(attempts) + 1}: {said}; {budget.left} of {holds} left"


def exhausted_words(retries: Retries, attempts: Sequence[Attempt], budget: RetryBudget) -> str:
    """Why the run is failed: "job 41 failed (exit 1); no retries left (retries: 2)", or
    per kind "...; no timeout retries left (retries.timeout: 3)"."""
    last = attempts[-1]
    said = f"job {last.job_id} {last.how}"
    if retries.shared:
        return f"{said}; no retries left (retries: {retries.count})"
    kind = budget.kind
    written = "" if retries.lists(kind) else " when not listed"
    return (
        f"{said}; no {kind.in_words} retries left (retries.{kind.value}: {budget.allowed}{written})"
    )
