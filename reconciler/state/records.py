"""What the journal remembers of each job recon submitted or adopted, as the planner sees it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reconciler.scheduler.states import Health, SlurmState, in_words
from reconciler.scheduler.usage import JobUsage

# A job (or setup step) recon journalled and the scheduler does not show yet is waited
# for this long before it counts as lost: Slurm's two sources lag behind each other.
UNSEEN_GRACE = timedelta(minutes=10)


def lost_at(journalled_at: datetime) -> datetime:
    """When a job, step or setup recon journalled at ``journalled_at`` and the scheduler
    does not list counts as lost: absence right after submission proves nothing (squeue
    and sacct lag behind each other, a step behind its srun), so it is waited for
    ``UNSEEN_GRACE``. The one home of that rule, with ``within_grace``."""
    return journalled_at + UNSEEN_GRACE


def within_grace(journalled_at: datetime, now: datetime) -> bool:
    """Whether such a job, step or setup is still waited for at ``now``."""
    return now < lost_at(journalled_at)


# The reason recon records for a job Slurm calls COMPLETED that left outputs missing.
NO_OUTPUTS = "completed without its declared outputs"
# A job Slurm says ended badly whose script had published every output (killed in the
# moment before it exited): a success (engine/apply/settle._judge_job).
PUBLISHED_BEFORE_IT_ENDED = "published its outputs before it ended"
# A job of a run with a checkpoint whose command exited after the warning signal
# (engine/apply/settle._judge_job): a requeue, ``EndingKind.CHECKPOINTED``.
SAVED_CHECKPOINT = "saved its checkpoint when warned"


class EndingKind(StrEnum):
    """How a job ended beyond its health, as settle judged it (engine/apply/settle.py):
    a field of its journal record, which the planner and status read, while the
    record's reason says it in words for a person. None: its health says it all."""

    # Slurm's states that say more than "failed" (``states.ENDINGS`` in words)
    TIMEOUT = "timeout"
    NODE_FAIL = "node_fail"
    BOOT_FAIL = "boot_fail"
    OUT_OF_MEMORY = "out_of_memory"
    PREEMPTED = "preempted"
    DEADLINE = "deadline"
    SPECIAL_EXIT = "special_exit"
    # COMPLETED without its declared outputs (or markers): failed, by recon's judgement
    NO_OUTPUTS = "no_outputs"
    # ended while it waited for its dependency (Slurm cancels a job whose dependency can
    # never be met): it never ran, so it is no attempt of its own
    DEPENDENCY = "dependency"
    # a run with a checkpoint: its command exited non-zero after the warning signal (or a
    # preemption's SIGTERM), its progress saved (``runfolder.checkpointed``): a requeue
    CHECKPOINTED = "checkpointed"

    @property
    def in_words(self) -> str | None:
        """A Slurm ending as plans and status say it ("timed out"); None for recon's own."""
        state = _SLURM_STATES.get(self)
        return in_words(state) if state is not None else None

    @classmethod
    def of_state(cls, state: SlurmState) -> EndingKind | None:
        """The ending a Slurm state says more of than its health; None for the others."""
        return _OF_STATE.get(state)

    @classmethod
    def of_states(cls, states: Iterable[SlurmState]) -> EndingKind | None:
        """The ending of a job from its components' states: that of the first which says
        more than its health (a het job with one component TIMEOUT, the other CANCELLED
        by it, timed out); None when none does."""
        return next((kind for state in states if (kind := _OF_STATE.get(state))), None)


_SLURM_STATES: dict[EndingKind, SlurmState] = {
    EndingKind.TIMEOUT: SlurmState.TIMEOUT,
    EndingKind.NODE_FAIL: SlurmState.NODE_FAIL,
    EndingKind.BOOT_FAIL: SlurmState.BOOT_FAIL,
    EndingKind.OUT_OF_MEMORY: SlurmState.OUT_OF_MEMORY,
    EndingKind.PREEMPTED: SlurmState.PREEMPTED,
    EndingKind.DEADLINE: SlurmState.DEADLINE,
    EndingKind.SPECIAL_EXIT: SlurmState.SPECIAL_EXIT,
}
_OF_STATE = {state: kind for kind, state in _SLURM_STATES.items()}


class SubmissionStatus(StrEnum):
    INTENT = "intent"  # written before sbatch: a crash here leaves no job or an unrecorded one
    SUBMITTED = "submitted"  # sbatch returned this job id
    ADOPTED = "adopted"  # found on the cluster by its tag, not by our own sbatch
    REFUSED = "refused"  # sbatch refused it (bad partition, ...): no job exists


@dataclass(frozen=True, slots=True, kw_only=True)
class SubmissionRecord:
    """One job of one run (or allocation) at one spec hash.

    A slotted record, not a model: a pass over 10,000 runs reads 10,000 of them and
    copies each whose job it judges, and a model's field dict and field set cost 2 KiB
    a record. The journal builds every field in its type."""

    id: int
    project: str
    kind: Literal["run", "alloc"] = "run"
    name: str
    spec_hash: str
    commit: str | None
    job_id: str | None  # None while only the intent is recorded
    status: SubmissionStatus
    final_health: Health | None = None  # once the job ended: succeeded, failed or cancelled
    exit_code: int | None = None
    reason: str | None = None
    ending: EndingKind | None = None  # how it ended beyond its health, once it has
    # the spec as flat field -> value, for 'what changed'
    spec_fields: dict[str, Any] = field(default_factory=dict)
    # input -> the version it had when the job ended (succeeded, or failed: a failure
    # counts against retries only while its inputs stay the same); {} on records of
    # failures from before recon recorded them
    input_versions: dict[str, str | None] = field(default_factory=dict)
    # output -> the version the job left behind
    output_versions: dict[str, str | None] = field(default_factory=dict)
    # the run's code files -> the git blob ids it was submitted with; {} on records from
    # before recon recorded them (the files at `commit` are what such a job ran)
    code_versions: dict[str, str] = field(default_factory=dict)
    # what the job held and for how long, read from the scheduler when it was settled, as
    # the journal keeps it (``JobUsage`` as JSON, read by ``usage``: a pass that plans
    # never needs it); None while it runs, and on records from before recon read it
    usage_json: str | None = None
    # the scheduler was asked for the usage of this job, settled before recon read it
    # (or what it used), and had no record of it (``Journal.record_usages``): it is not
    # asked again
    usage_sought: bool = False
    # ``usage_json`` holds what the job used (peak memory, CPU time), or `recon cost`'s
    # back-fill asked the accounting for it; False on usage journalled before recon read
    # it, or settled without it (the accounting may have lagged): back-filled once
    used_read: bool = False
    # what the job asked for beyond its spec, a retry's raise (`memory_mb`, `time_s`);
    # None: as its spec declares (schema 9)
    raised: Mapping[str, int | None] | None = None
    created_at: datetime
    updated_at: datetime

    @property
    def usage(self) -> JobUsage | None:
        """What the job held (``usage_json`` read; each call reads it anew)."""
        return None if self.usage_json is None else JobUsage.from_json(json.loads(self.usage_json))


class SetupRecord(BaseModel):
    """An allocation's setup commands, started as a step in one of its jobs."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: int
    project: str
    name: str = Field(description="the allocation")
    spec_hash: str
    allocation_job: str
    step_id: str | None = Field(description="12.0, once Slurm listed it; None until then")
    final_health: Health | None = None
    exit_code: int | None = None
    reason: str | None = Field(None, description="why srun made no step, when it did not")
    created_at: datetime
    updated_at: datetime


def unseen_job(
    records: Iterable[SubmissionRecord], spec_hash: str, seen: Collection[str], now: datetime
) -> str | None:
    """The first job of ``spec_hash`` the journal holds, whose end it has not seen, that no
    observation shows (``seen`` holds the ids shown or known lost) and that is younger
    than ``UNSEEN_GRACE``: absence right after submission proves nothing, since Slurm's
    two views lag behind each other. None when every such job is seen, or old enough to
    count as lost."""
    for record in records:
        if (
            record.spec_hash == spec_hash
            and record.job_id is not None
            and record.job_id not in seen
            and record.final_health is None
            and within_grace(record.created_at, now)
        ):
            return record.job_id
    return None


def gathered_digest(digests: Mapping[str, str | None]) -> str:
    """The version of an input that gathers several runs' outputs (run -> its output's
    digest, None when missing), as one digest. Adding or removing a member changes it, as
    changing or losing any member's output does: a run that read three members' outputs
    while a fourth was still running is stale once the fourth is there."""
    material = "\n".join(f"{name}\t{digests[name] or 'missing'}" for name in sorted(digests))
    return hashlib.sha256(material.encode()).hexdigest()
