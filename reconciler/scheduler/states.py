"""Slurm job states, what each means to recon (its Health), and the one rule that folds many.

Slurm prints a state in three shapes: the long name (``sacct``, ``squeue %T``), a short code
(``squeue %t``, the ``--state`` filter of both) and decorated forms: ``CANCELLED by 0``
(sacct names the uid that cancelled) and ``CANCELLED+`` (a column cut to width).
``parse_state`` accepts all of them.

Health is what a person or the planner needs: is it waiting, going, done well, done badly,
or stopped on purpose. ``blocked`` belongs to the same vocabulary but only the planner can
decide it (it knows the DAG), so no Slurm state maps to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from enum import StrEnum


class SlurmState(StrEnum):
    """Every job state Slurm 22.05 reports (``man squeue``, JOB STATE CODES)."""

    BOOT_FAIL = "BOOT_FAIL"
    CANCELLED = "CANCELLED"
    COMPLETED = "COMPLETED"
    COMPLETING = "COMPLETING"
    CONFIGURING = "CONFIGURING"
    DEADLINE = "DEADLINE"
    FAILED = "FAILED"
    NODE_FAIL = "NODE_FAIL"
    OUT_OF_MEMORY = "OUT_OF_MEMORY"
    PENDING = "PENDING"
    PREEMPTED = "PREEMPTED"
    REQUEUED = "REQUEUED"
    REQUEUE_FED = "REQUEUE_FED"
    REQUEUE_HOLD = "REQUEUE_HOLD"
    RESIZING = "RESIZING"
    RESV_DEL_HOLD = "RESV_DEL_HOLD"
    REVOKED = "REVOKED"
    RUNNING = "RUNNING"
    SIGNALING = "SIGNALING"
    SPECIAL_EXIT = "SPECIAL_EXIT"
    STAGE_OUT = "STAGE_OUT"
    STOPPED = "STOPPED"
    SUSPENDED = "SUSPENDED"
    TIMEOUT = "TIMEOUT"


SHORT_CODES: dict[str, SlurmState] = {
    "BF": SlurmState.BOOT_FAIL,
    "CA": SlurmState.CANCELLED,
    "CD": SlurmState.COMPLETED,
    "CG": SlurmState.COMPLETING,
    "CF": SlurmState.CONFIGURING,
    "DL": SlurmState.DEADLINE,
    "F": SlurmState.FAILED,
    "NF": SlurmState.NODE_FAIL,
    "OOM": SlurmState.OUT_OF_MEMORY,
    "PD": SlurmState.PENDING,
    "PR": SlurmState.PREEMPTED,
    "RQ": SlurmState.REQUEUED,
    "RF": SlurmState.REQUEUE_FED,
    "RH": SlurmState.REQUEUE_HOLD,
    "RS": SlurmState.RESIZING,
    "RD": SlurmState.RESV_DEL_HOLD,
    "RV": SlurmState.REVOKED,
    "R": SlurmState.RUNNING,
    "SI": SlurmState.SIGNALING,
    "SE": SlurmState.SPECIAL_EXIT,
    "SO": SlurmState.STAGE_OUT,
    "ST": SlurmState.STOPPED,
    "S": SlurmState.SUSPENDED,
    "TO": SlurmState.TIMEOUT,
}


class Health(StrEnum):
    """recon's word for how a run is doing, shown by ``recon status``."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    BLOCKED = "blocked"


HEALTH: dict[SlurmState, Health] = {
    # Waiting for resources, or requeued and waiting again: nothing is held yet.
    SlurmState.PENDING: Health.PENDING,
    SlurmState.REQUEUED: Health.PENDING,
    SlurmState.REQUEUE_FED: Health.PENDING,
    SlurmState.REQUEUE_HOLD: Health.PENDING,
    SlurmState.RESV_DEL_HOLD: Health.PENDING,
    # Holding an allocation and not yet final: booting nodes, running, paused, signalled,
    # staging out, or finishing (a COMPLETING job's outcome is not final until it leaves).
    SlurmState.CONFIGURING: Health.RUNNING,
    SlurmState.RUNNING: Health.RUNNING,
    SlurmState.COMPLETING: Health.RUNNING,
    SlurmState.RESIZING: Health.RUNNING,
    SlurmState.SUSPENDED: Health.RUNNING,
    SlurmState.STOPPED: Health.RUNNING,
    SlurmState.SIGNALING: Health.RUNNING,
    SlurmState.STAGE_OUT: Health.RUNNING,
    SlurmState.COMPLETED: Health.SUCCEEDED,
    # Ended without doing its work, whoever is to blame (the job, the node, the limits).
    SlurmState.FAILED: Health.FAILED,
    SlurmState.TIMEOUT: Health.FAILED,
    SlurmState.OUT_OF_MEMORY: Health.FAILED,
    SlurmState.NODE_FAIL: Health.FAILED,
    SlurmState.BOOT_FAIL: Health.FAILED,
    SlurmState.DEADLINE: Health.FAILED,
    SlurmState.PREEMPTED: Health.FAILED,
    SlurmState.SPECIAL_EXIT: Health.FAILED,
    # Stopped on purpose: by a user, by Slurm for an unmeetable dependency, or (REVOKED)
    # because a sibling cluster of a federation runs the job instead.
    SlurmState.CANCELLED: Health.CANCELLED,
    SlurmState.REVOKED: Health.CANCELLED,
}

# The health sets, defined here once: a job that has ended (its final health), one that
# still waits or runs, and the two ways of ending that are not success.
ENDED: frozenset[Health] = frozenset({Health.SUCCEEDED, Health.FAILED, Health.CANCELLED})
ALIVE: frozenset[Health] = frozenset({Health.PENDING, Health.RUNNING})
ENDED_BADLY: frozenset[Health] = frozenset({Health.FAILED, Health.CANCELLED})

# What a person needs to hear beyond the health: how a job ended, or why it is not going.
# States not here say nothing more than their health does (COMPLETED, FAILED, RUNNING...).
_IN_WORDS: dict[SlurmState, str] = {
    SlurmState.TIMEOUT: "timed out",
    SlurmState.NODE_FAIL: "node failed",
    SlurmState.BOOT_FAIL: "node failed to boot",
    SlurmState.OUT_OF_MEMORY: "out of memory",
    SlurmState.PREEMPTED: "preempted",
    SlurmState.DEADLINE: "deadline passed",
    SlurmState.SPECIAL_EXIT: "held in special exit",
    SlurmState.REQUEUE_HOLD: "held after requeue",
    SlurmState.SUSPENDED: "suspended",
    SlurmState.STOPPED: "stopped",
}
# The words of how a job ended, as settle records them for the journal's reason.
ENDINGS: frozenset[str] = frozenset(
    words for state, words in _IN_WORDS.items() if HEALTH[state] in ENDED
)
# States where Slurm's reason says why the job is held, so it is shown with them.
_HELD = {SlurmState.SPECIAL_EXIT, SlurmState.REQUEUE_HOLD}

# squeue's reason for a job whose launch failed (its node went down as it started, a
# prolog failed): Slurm requeued it and holds it until someone releases it. It will not
# run by itself, so for recon it is an attempt that failed, still queued as a job held in
# special exit is (sacct says PENDING, JobHeldUser).
LAUNCH_FAILED_HELD = "launch failed requeued held"


def held_in_queue(state: SlurmState, reason: str | None) -> bool:
    """Ended for recon (failed) yet still queued, one release away from running: held in
    special exit, or held after a failed launch. Whatever submits its run again cancels
    it first."""
    return state is SlurmState.SPECIAL_EXIT or (
        state is SlurmState.PENDING and reason == LAUNCH_FAILED_HELD
    )


def health_of(state: SlurmState, reason: str | None) -> Health:
    """A row's health: its state's, but failed for a job held after a failed launch."""
    if state is SlurmState.PENDING and reason == LAUNCH_FAILED_HELD:
        return Health.FAILED
    return HEALTH[state]


def in_words(state: SlurmState, reason: str | None = None) -> str | None:
    """How a job ended or stands, in words, beyond its health; None when the health says it
    all. A held job says why, in Slurm's own words:

    >>> in_words(SlurmState.PENDING, "JobHeldUser")
    'held (JobHeldUser)'
    >>> in_words(SlurmState.TIMEOUT)
    'timed out'
    """
    if state is SlurmState.PENDING and reason and reason.startswith("JobHeld"):
        return f"held ({reason})"
    if state is SlurmState.PENDING and reason == LAUNCH_FAILED_HELD:
        return "held after its launch failed"
    word = _IN_WORDS.get(state)
    if word is not None and state in _HELD and reason:
        return f"{word} ({reason})"
    return word


# Worst first. Failure kinds trump everything; a real failure explains more than a
# cancellation (Slurm cancels the dependents of a failed job), so FAILED outranks CANCELLED.
# BLOCKED (planner-only) sits between running and pending: work that cannot start is more
# news than work that is merely waiting.
_RANK: tuple[Health, ...] = (
    Health.FAILED,
    Health.CANCELLED,
    Health.RUNNING,
    Health.BLOCKED,
    Health.PENDING,
    Health.SUCCEEDED,
)

_DECORATION = re.compile(r"^([A-Z_]+)\+?(?: by (\d+))?$")


def parse_state(text: str) -> tuple[SlurmState, int | None] | None:
    """The state in ``text`` and the uid that cancelled it, if sacct says; None if unknown.

    >>> parse_state("CANCELLED by 0")
    (<SlurmState.CANCELLED: 'CANCELLED'>, 0)
    """
    match = _DECORATION.match(text.strip())
    if match is None:
        return None
    word, uid = match.groups()
    state = SHORT_CODES.get(word) or SlurmState.__members__.get(word)
    if state is None:
        return None
    return state, None if uid is None else int(uid)


def aggregate(healths: Iterable[Health]) -> Health:
    """The health of a whole built from parts: het components, array tasks and steps alike.

    Any failure trumps (failed, then cancelled); running outranks pending; pending outranks
    succeeded. So a whole has succeeded only when every part has.
    """
    present = set(healths)
    if not present:
        raise ValueError("aggregate() needs at least one health")
    return next(health for health in _RANK if health in present)


def waited_for_dependency(reason: str | None) -> bool:
    """Slurm's reason names the job's dependency (``Dependency``, or
    ``DependencyNeverSatisfied`` for one that can never be met): a job that ended with it
    ended while it waited, and never ran."""
    return reason is not None and reason.startswith("Dependency")


def ending(health: Health | None, exit_code: int | None, words: str | None = None) -> str:
    """How a job or step ended, as plans and status say it: "failed (exit 3)", or in
    Slurm's terms when they say more ("timed out", "node failed")."""
    word = words or (health.value if health is not None else "ended")
    return f"{word} (exit {exit_code})" if exit_code else word
