"""What the journal remembers of each job recon submitted or adopted, as the planner sees it."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Literal, NamedTuple

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
    # a success that ran nothing: its skip check (scheduler/render.py ``skip_check_block``)
    # found its inputs as its run's last success read them, and its outputs stay that
    # success's (schema 11; earlier releases told it by its reason's words alone)
    SKIPPED = "skipped"

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
    # None: as its spec declares (schema 10)
    raised: Mapping[str, int | None] | None = None
    created_at: datetime
    updated_at: datetime

    @property
    def skipped(self) -> bool:
        """A success that skipped its command (``EndingKind.SKIPPED``): it ran nothing."""
        return self.ending is EndingKind.SKIPPED

    @property
    def usage(self) -> JobUsage | None:
        """What the job held (``usage_json`` read; each call reads it anew)."""
        return None if self.usage_json is None else JobUsage.from_json(json.loads(self.usage_json))


class ScriptSent(NamedTuple):
    """The batch script a job was sent, journalled with its intent before sbatch (schema
    11; ``Journal.script_sent``). Not a field of its record: only settle reads it, once
    per success, for the manifest, and a pass holds every record of the project.

    A sweep's member: the script its array task runs byte for byte, and its options,
    which the job array was sent with the array's own name, comment and logs
    (scheduler/render.py ``array_batch_script``): the members of an array are known only
    as it goes, after their intents are written."""

    sha256: str
    # its #SBATCH options, in order (`hetjob` between components); None for a run's step
    # in an allocation, which srun starts: no directive of it is read
    options: tuple[str, ...] | None


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


class Rename(NamedTuple):
    """A run's identity carried to a new one (`renamed_from`, ``engine/plan/moves``): the
    records and jobs of ``old_name`` at ``old_hash`` are ``new_name``'s at ``new_hash``.
    A run that only reads a renamed run's output keeps its name and changes its hash;
    one that gathers a renamed sweep's members has the version each of its records read
    of that input carried too (``inputs``: input, version under the old members' names,
    the same under the new: ``gathered_digest`` names the members)."""

    kind: Literal["run", "alloc"]
    old_name: str
    old_hash: str
    new_name: str
    new_hash: str
    inputs: tuple[tuple[str, str, str], ...] = ()
    # the newest record when the move was journalled: a record written after it under
    # the old name and hash (a run of that name added again, a rename reverted) is that
    # run's own, and so is its job; None: a move not journalled yet, every record
    up_to: int | None = None


class Renames:
    """Renames in the order they were made, followed through: a run renamed twice (a to
    b, then b to c) reads as c. Its records keep the names they were written with in the
    journal; whoever reads them sees the names of today (``Journal.records``), and a job
    tagged with an old name is the new name's (``engine/plan/identity``)."""

    def __init__(self, renames: Iterable[Rename] = ()) -> None:
        self._to: dict[tuple[Literal["run", "alloc"], str, str], tuple[str, str]] = {}
        self._inputs: dict[tuple[Literal["run", "alloc"], str, str], list[tuple[str, str, str]]]
        self._inputs = {}
        self._up_to: dict[tuple[Literal["run", "alloc"], str, str], int | None] = {}
        for rename in renames:
            new = (rename.new_name, rename.new_hash)
            for key, value in self._to.items():  # what an earlier rename made, renamed on
                if value == (rename.old_name, rename.old_hash) and key[0] == rename.kind:
                    self._to[key] = new
                    self._inputs[key] = [*self._inputs.get(key, ()), *rename.inputs]
            key = (rename.kind, rename.old_name, rename.old_hash)
            self._to[key] = new
            self._inputs[key] = [*self._inputs.get(key, ()), *rename.inputs]
            self._up_to[key] = rename.up_to

    def __bool__(self) -> bool:
        return bool(self._to)

    def made(self) -> list[Rename]:
        """Each old name and hash with the name and hash it has now."""
        return [
            Rename(*key, *new, tuple(self._inputs[key]), self._up_to[key])
            for key, new in self._to.items()
        ]

    def of(
        self, kind: Literal["run", "alloc"], name: str, spec_hash: str
    ) -> tuple[str, str] | None:
        """The name and hash a job or record of ``name`` at ``spec_hash`` has now; None
        when no rename reaches it."""
        return self._to.get((kind, name, spec_hash))

    def setups(self, setups: Iterable[SetupRecord]) -> list[SetupRecord]:
        """An allocation's ``setups`` under its name and hash of today."""
        return [
            setup
            if (now := self.of("alloc", setup.name, setup.spec_hash)) is None
            else setup.model_copy(update={"name": now[0], "spec_hash": now[1]})
            for setup in setups
        ]

    def records(self, records: Iterable[SubmissionRecord]) -> list[SubmissionRecord]:
        """``records`` under the names and hashes of today."""
        if not self._to:
            return list(records)
        renamed = []
        for record in records:
            key = (record.kind, record.name, record.spec_hash)
            now = self._to.get(key)
            up_to = self._up_to.get(key)
            if now is not None and (up_to is None or record.id <= up_to):
                versions = record.input_versions
                carried = {
                    name: new
                    for name, old, new in self._inputs[key]
                    if name in versions and versions[name] == old
                }
                if carried:
                    versions = {**versions, **carried}
                record = replace(record, name=now[0], spec_hash=now[1], input_versions=versions)
            renamed.append(record)
        return renamed
