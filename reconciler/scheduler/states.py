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
