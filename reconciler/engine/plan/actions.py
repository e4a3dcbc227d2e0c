"""A Plan and its Actions: what recon would do, why, and against which state.

Like Terraform's plan: a small enum of actions with symbols, each carrying its cause (a
value, ``Cause``) and its reason (the same in words), and the plan remembers the commit
and the observed state it was made against, so a saved plan can be refused as stale.
Pydantic models, so a plan saves to JSON and reads back equal.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from reconciler.desired.retries import RetryKind
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.guards import BudgetGuard, PruneGuard

# What makes a failed run with no retries left run again, told wherever it is failed: a
# new spec or code (an attempt counts only at the spec, code and inputs it ran with), or
# asking for it.
FAILED_FIXES = "Change its spec or code and commit, or `recon apply --replace {name}`"


class SyncStatus(StrEnum):
    """How a run's last success stands against what the repo asks for now."""

    CURRENT = "current"  # succeeded with this spec and these inputs; outputs present
    OUTDATED = "outdated"  # the spec or an input changed since
    MISSING = "missing"  # succeeded, but an output is gone
    NEVER_RUN = "never run"  # no success of any spec yet
    ORPHAN = "orphan"  # a job of recon's whose run left the repo


class RunOutcome(StrEnum):
    """Where a run stands once a plan is carried out: done (current), inflight (a job
    queued or running), waiting (for a later pass), failed (no retries left), blocked
    (an upstream failed, or it fits nowhere). The planner decides it run by run
    (engine/plan/runs.py); `apply --wait` stops once every run's outcome is final:
    done, failed or blocked.
    Not `reconcile.PassOutcome`, which is what a whole pass saw and did."""

    DONE = "done"
    INFLIGHT = "inflight"
    WAITING = "waiting"
    FAILED = "failed"
    BLOCKED = "blocked"


# A run's final outcomes, where `apply --wait` stops: nothing more happens to the run
# without a new commit. ("Settle" is another thing: journalling how a job ended,
# engine/apply/settle.py.)
FINAL = frozenset({RunOutcome.DONE, RunOutcome.FAILED, RunOutcome.BLOCKED})


class ActionKind(StrEnum):
    SUBMIT = "submit"
    RETRY = "retry"
    # a run with a checkpoint whose job saved it and ended (warned, timed out, preempted):
    # its next job resumes from the checkpoint; no failure, no retry budget drawn
    REQUEUE = "requeue"
    REPLACE = "replace"
    # submitted after an upstream this plan reruns; its job ends at once, as a success,
    # when its inputs come out as they were (``SkipCheck``)
    MAY_RERUN = "may rerun"
    CANCEL = "cancel"
    TEARDOWN = "teardown"
    ADOPT = "adopt"
    REUSE = "reuse"  # an allocation still good for runs: nothing to do on the cluster
    SETUP = "setup"  # an allocation's setup commands, started as a step in it
    BLOCKED = "blocked"
    NOOP = "no-op"
    # a run renamed (`renamed_from`): its records, outputs and live job carried over
    MOVED = "moved"


# Terraform-like symbols for text output.
SYMBOLS: dict[ActionKind, str] = {
    ActionKind.SUBMIT: "+",
    ActionKind.RETRY: "+",
    ActionKind.REQUEUE: "+>",
    ActionKind.REPLACE: "-/+",
    ActionKind.MAY_RERUN: "~",
    ActionKind.CANCEL: "-",
    ActionKind.TEARDOWN: "x",
    ActionKind.ADOPT: "=",
    ActionKind.REUSE: "~",
    ActionKind.SETUP: ">",
    ActionKind.BLOCKED: "!",
    ActionKind.NOOP: " ",
    ActionKind.MOVED: "->",
}

# Actions that change the cluster; the rest are shown but not acted on (adopt only
# writes the journal).
CHANGING = frozenset(
    {
        ActionKind.SUBMIT,
        ActionKind.RETRY,
        ActionKind.REQUEUE,
        ActionKind.REPLACE,
        ActionKind.MAY_RERUN,
        ActionKind.CANCEL,
        ActionKind.TEARDOWN,
        ActionKind.SETUP,
    }
)

# Actions that submit a run's job.
SUBMITTING = frozenset(
    {
        ActionKind.SUBMIT,
        ActionKind.RETRY,
        ActionKind.REQUEUE,
        ActionKind.REPLACE,
        ActionKind.MAY_RERUN,
    }
)


_FROZEN = ConfigDict(frozen=True, extra="forbid")


class FieldChange(BaseModel):
    model_config = _FROZEN

    field: str
    old: Any = None
    new: Any = None

    def __str__(self) -> str:
        return f"{self.field} {_show(self.old)} -> {_show(self.new)}"


def _show(value: Any) -> str:
    return "(unset)" if value is None else str(value)


class SkipCheck(BaseModel):
    """What a `may rerun` job compares before it runs its command: each input an upstream
    rerun may rewrite, and the version its last success read (a `hash: content` version:
    for a single file, its plain sha256). The same versions again: the job ends at once,
    as a success that leaves the outputs as they are (scheduler/render.py)."""

    model_config = _FROZEN

    job_id: str = Field(description="the run's last success, whose inputs are compared")
    inputs: dict[str, str] = Field(description="input -> the version that job read")


class ArrayPlace(BaseModel):
    """Where a sweep's member that a plan submits as a batch job goes: one of the job
    arrays the plan makes of its sweep's members (``engine/plan/arrays.place``)."""

    model_config = _FROZEN

    number: int = Field(
        description="which of the job arrays this plan makes of the sweep's members, from "
        "1, in the order apply submits them"
    )
    index: int = Field(
        description="the member's index in that array, its task's $SLURM_ARRAY_TASK_ID (a "
        "member skipped at apply, its upstream not submitted, leaves the rest in order)"
    )


class RetryBudget(BaseModel):
    """The budget a failed run's last attempt draws from (``engine/plan/budgets``): its
    kind's in the mapping form of `retries`, the one shared budget for a plain number.
    The run is retried while ``failed`` is within ``allowed``."""

    model_config = _FROZEN

    kind: RetryKind = Field(description="how the last attempt ended: failure, timeout, ...")
    shared: bool = Field(description="a plain `retries: N`: one budget for every kind")
    allowed: int | None = Field(description="the retries the budget holds; None: unlimited")
    failed: int = Field(
        description="the failed attempts counted against it since the run's last success, "
        "the last one included: each draws one retry"
    )

    @property
    def retries(self) -> bool:
        """Whether the last attempt is retried: the budget holds a retry for each failure."""
        return self.allowed is None or self.failed <= self.allowed

    @property
    def left(self) -> int | None:
        """The retries left once this one is drawn; None: unlimited."""
        return None if self.allowed is None else max(self.allowed - self.failed, 0)


class Raised(BaseModel):
    """What a retry asks for beyond its spec (``engine/plan/raises``): memory after
    running out of it (`on_oom`), time after a timeout (`on_timeout`). Not in the spec
    hash: journalled with the job it is submitted as."""

    model_config = _FROZEN

    memory_mb: int | None = Field(
        None, description="the memory asked for, in MiB; None: as declared"
    )
    time_s: int | None = Field(None, description="the time limit asked for; None: as declared")
    words: str = Field(description='in words: "memory 2GiB (x2 after out of memory)"')


class Action(BaseModel):
    model_config = _FROZEN

    kind: ActionKind
    target: str = Field(description="the run or allocation acted on")
    target_kind: Literal["run", "alloc"] = "run"
    cause: Cause = Field(description="why, as a value (``reason`` says it in words)")
    reason: str
    spec_hash: str | None = Field(
        None, description="the spec version to submit, or of the job adopted"
    )
    job_ids: tuple[str, ...] = Field((), description="jobs cancelled (replace, cancel) or adopted")
    after: tuple[str, ...] = Field(
        (), description="runs submitted earlier in the same apply that this one waits for"
    )
    after_jobs: tuple[str, ...] = Field(
        (), description="jobs already queued or running that this one waits for (afterok)"
    )
    changes: tuple[FieldChange, ...] = ()
    allocation_job: str | None = Field(
        None, description="for a run started as a step: the allocation's job it starts in"
    )
    details: tuple[str, ...] = Field(
        (), description="more to show under the action, e.g. each het component's resources"
    )
    sync: SyncStatus | None = Field(
        None, description="for a run: how its outputs stand against the desired spec"
    )
    unseen_job: str | None = Field(
        None,
        description="for a run waiting for a job recon submitted that the scheduler does not "
        "show yet: that job's id",
    )
    skip_check: SkipCheck | None = Field(
        None,
        description="for a run that may rerun: the inputs its job compares with those of "
        "its last success before running; None: it runs in full",
    )
    outcome: RunOutcome | None = Field(
        None,
        description="for a run: where it stands once this plan is carried out: done "
        "(current), inflight (a job queued or running), waiting (for a later pass), "
        "failed (no retries left), blocked (an upstream failed)",
    )
    array: ArrayPlace | None = Field(
        None,
        description="for a sweep's member submitted as a batch job: the job array it goes "
        "in and its index there",
    )
    requeues: int | None = Field(
        None,
        description="for a run with a checkpoint: the jobs that ended saving it (or timed "
        "out, or were preempted) since its last success",
    )
    raised: Raised | None = Field(
        None,
        description="for a retry after running out of memory or time (`on_oom`, "
        "`on_timeout`): what it asks for beyond its spec",
    )
    retry_budget: RetryBudget | None = Field(
        None,
        description="for a run whose last attempt failed (retried, or failed with no "
        "retries left): the budget it draws from and what is left",
    )
    suspended: bool = Field(
        False,
        description="shown, not carried out: its run or allocation, an upstream, or the "
        "project is suspended (`suspend: true`)",
    )

    @property
    def symbol(self) -> str:
        return SYMBOLS[self.kind]

    @property
    def changes_cluster(self) -> bool:
        """Carrying it out changes the cluster (a suspended action is not carried out)."""
        return self.kind in CHANGING and not self.suspended


# Before the reason of a suspended action, wherever a person reads it (plan, status, web).
SUSPENDED_MARK = "(suspended) "


class Move(BaseModel):
    """One run's records and jobs carried from its old name and hash to its new ones, and
    its folder with them when the folder is named after the run (``engine/plan/moves``)."""

    model_config = _FROZEN

    kind: Literal["run", "alloc"] = "run"
    old: str = Field(description="the run's name before (the new name's, for a reader)")
    old_hash: str
    new: str
    new_hash: str
    old_dir: str | None = Field(
        None,
        description="the folder to rename (the run's, or its sweep's for a member), "
        "relative to the project; None: it stays",
    )
    new_dir: str | None = Field(None, description="what it is renamed to")
    old_run_dir: str | None = Field(
        None, description="the run's own folder before the move (a member's is in its sweep's)"
    )
    new_run_dir: str | None = Field(None, description="the run's own folder after it")
    inputs: tuple[tuple[str, str, str], ...] = Field(
        (),
        description="for a run gathering a renamed sweep's members: input, its version "
        "under the old members' names, the same under the new (``records.Rename``)",
    )
    live_jobs: tuple[str, ...] = Field(
        (),
        description="jobs of the old name still queued or running: they write under the "
        "old folder's path, which is left as a link to the new one",
    )

    @property
    def renamed(self) -> bool:
        """The run's name changed (not only the hash of a run that reads one)."""
        return self.old != self.new


class SweepShape(BaseModel):
    """What a plan says of a sweep as a whole: its members' actions are in ``actions``."""

    model_config = _FROZEN

    members: int = Field(description="how many members the sweep has at the plan's commit")
    max_parallel: int | None = Field(None, description="at most this many members at once")
    max_array_size: int | None = Field(
        None, description="the scheduler's MaxArraySize, when read: a larger array is split"
    )


class LookKind(StrEnum):
    """What changes at a plan's next look without a new observation (engine/plan/requeue.py)."""

    RENEWAL = "renewal"  # an allocation's ready job reaches min_remaining: renewed
    IDLE_RELEASE = "idle-release"  # an idle allocation job reaches idle_release: released
    GRACE = "grace"  # a job or step the journal holds and Slurm does not show: taken as lost
    TIME_LIMIT = "time-limit"  # a running job reaches its time limit


class NextLook(BaseModel):
    """When a plan made now stops being the plan the same observation would give, and why:
    like controller-runtime's ``Result{RequeueAfter}``, the time a watch should look again
    even if nothing else wakes it."""

    model_config = _FROZEN

    at: datetime
    kind: LookKind
    target: str = Field(description="the run or allocation it concerns")
    reason: str


class Plan(BaseModel):
    model_config = _FROZEN

    # 2: every action has its `cause`, the plan its `next_look`; a plan saved by a recon
    # of format 1 is refused with "make it again" (saved plans are minutes old, not kept)
    format_version: Literal[2] = 2
    project: str
    root: str = Field(description="the project folder the plan was made for")
    commit: str | None = Field(description="None when made from the work tree")
    scheduler: str
    created_at: datetime
    targets: tuple[str, ...] = Field((), description="empty: the whole project")
    downstream: bool = Field(False, description="the targets' downstream runs were taken too")
    replace: tuple[str, ...] = Field((), description="runs submitted anew on request")
    observation_complete: bool
    notes: tuple[str, ...] = Field((), description="what limited the plan, e.g. sacct down")
    fingerprint: str = Field(description="digest of the observed state the plan was made against")
    actions: tuple[Action, ...]
    sweeps: dict[str, SweepShape] = Field(
        default_factory=dict, description="the sweeps the actions' members belong to"
    )
    prune_guard: PruneGuard | None = Field(
        None,
        description="set when the prunes look like an accident: the commit declares "
        "nothing, or they cancel more than one job and more than prune_limit allows",
    )
    budget_guard: BudgetGuard | None = Field(
        None, description="set when the plan's forecast GPU-hours pass recon.yaml's budget"
    )
    moves: tuple[Move, ...] = Field(
        (),
        description="runs renamed (`renamed_from`) and runs reading them: records, jobs "
        "and folders carried to the new name and hash, done first by apply "
        "(``engine/plan/moves``)",
    )
    next_look: NextLook | None = Field(
        None,
        description="the earliest time the plan changes with no new observation (an "
        "allocation's renewal or idle release, a grace ending, a job's time limit); None: "
        "nothing is due",
    )

    @property
    def held(self) -> bool:
        """Apply carries out nothing of this plan: its prunes or its budget are refused."""
        return bool(self.holds)

    @property
    def holds(self) -> tuple[PruneGuard | BudgetGuard, ...]:
        """The guards that hold this plan, not confirmed (the prune guard first)."""
        guards = (self.prune_guard, self.budget_guard)
        return tuple(guard for guard in guards if guard is not None and not guard.confirmed)

    @property
    def suspended(self) -> tuple[str, ...]:
        """The targets of the actions not carried out because they are suspended."""
        return tuple(dict.fromkeys(a.target for a in self.actions if a.suspended))

    def count(self, kind: ActionKind) -> int:
        return sum(1 for action in self.actions if action.kind is kind)

    @property
    def has_changes(self) -> bool:
        return bool(self.moves) or any(action.changes_cluster for action in self.actions)

    @property
    def has_work(self) -> bool:
        """Whether apply has anything to carry out: a change to the cluster, a move, or a
        job to adopt into the journal (every pass decides this one way: a plan without
        work is carried out by nobody, and a watch may keep it for its next pass)."""
        # one walk over the actions: a watch asks this of every pass, at 100,000 runs
        adopt = ActionKind.ADOPT
        return bool(self.moves) or any(a.changes_cluster or a.kind is adopt for a in self.actions)

    @property
    def waiting_unseen(self) -> int:
        """Runs waiting for a job the scheduler does not show yet: not known to match."""
        return sum(1 for action in self.actions if action.unseen_job is not None)

    @property
    def summary(self) -> str:
        submit = sum(self.count(kind) for kind in _SUBMITS)
        teardown = self.count(ActionKind.TEARDOWN)
        may_rerun = self.count(ActionKind.MAY_RERUN)
        tail = f", {teardown} to tear down" if teardown else ""
        tail += f", {may_rerun} may rerun" if may_rerun else ""
        moved = self.count(ActionKind.MOVED)
        tail += f", {moved} to move" if moved else ""
        return (
            f"Plan: {submit} to submit, {self.count(ActionKind.REPLACE)} to replace, "
            f"{self.count(ActionKind.CANCEL)} to cancel{tail}."
        )


# What the summary line counts as "to submit": a retry and a requeue submit a job too.
_SUBMITS = (ActionKind.SUBMIT, ActionKind.RETRY, ActionKind.REQUEUE)
