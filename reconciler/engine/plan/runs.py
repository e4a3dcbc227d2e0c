"""What to do about one run: the decision table. Pure.

A run is decided after its upstreams (engine/plan/assemble.py walks the DAG in order) from its
facts (``RunFacts``: its jobs, its journal records, its last success, and the decisions
already made for the runs before it). The table's rows are asked in order; the first
that decides returns a ``Decision`` (an action and the run's outcome), and a run no row
decides is submitted:

    row                  when                                          outcome
    blocked_upstream     an upstream failed or is blocked              BLOCKED
    array_unread         its sweep has a job array no map tells apart  WAITING
    replace_on_request   `--replace` names it                          INFLIGHT (or WAITING)
    in_progress          a job of its current spec is queued/running   INFLIGHT
    not_seen_yet         the journal's job is not shown yet            WAITING
    step_not_listed_yet  its step's id is not listed yet               WAITING
    fate_not_seen        partial observation, a job's end not shown    WAITING
    refused              its last submission at this spec and commit    BLOCKED
                         was refused
    outdated_still_live  only an older spec's job is alive             INFLIGHT (replace) or WAITING
    failed_before        attempts failed since its last success        INFLIGHT (retry) or FAILED
                         (a checkpointing run's job ended to resume:   INFLIGHT (requeue) or FAILED
                         requeued, at most max_requeues times)
                         (or its last failure's code or inputs changed,  INFLIGHT (submit)
                         or recon cancelled it)
    succeeded            a job of its current spec succeeded           DONE, or INFLIGHT when stale
                         or an upstream is in flight (may rerun)
    (no row)             not yet run, spec changed, or its job lost    INFLIGHT (submit)

A submission may still wait or be blocked (engine/plan/submit.py). A new row is a
function from RunFacts to a Decision or None, put in its place in ``DECISION_TABLE``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from reconciler.desired.desired import DesiredRun
from reconciler.desired.matrix import sweep_of
from reconciler.engine.plan.actions import FAILED_FIXES, Action, ActionKind, RunOutcome
from reconciler.engine.plan.allocation_state import InUse
from reconciler.engine.plan.budgets import (
    Attempt,
    drawn,
    exhausted_words,
    never_finished_words,
    requeue_words,
    retry_words,
)
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.changes import why_submit
from reconciler.engine.plan.history import (
    Stale,
    Success,
    failed_attempts,
    last_success,
    partner_failed,
    rerunning,
    skip_check,
    staleness,
)
from reconciler.engine.plan.inputs import Decision, PlanInputs, is_live
from reconciler.engine.plan.raises import raised
from reconciler.engine.plan.submit import submit
from reconciler.engine.plan.sync import sync_status
from reconciler.engine.plan.unseen import (
    fate_unknown,
    lost_jobs,
    refused_last,
    unlisted_step,
    unseen,
    vanished,
)
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import Health
from reconciler.state.records import SubmissionRecord


@dataclass(frozen=True)
class RunFacts:
    """What is known of one run when it is decided; its last success and whether that is
    still current are worked out once, for the table and for the sync status alike."""

    inputs: PlanInputs
    run: DesiredRun
    decided: Mapping[str, Decision]  # the runs decided before it, its upstreams among them
    jobs: tuple[ObservedJob, ...]  # all its observed jobs, oldest first
    current: tuple[ObservedJob, ...]  # those of its current spec
    success: Success | None  # its last success of the current spec
    stale: Stale | None  # why that success is no longer current; None when it is
    # what GPU steps hold in each ready allocation job, this plan's starts included
    in_use: Mapping[str, InUse] = field(default_factory=dict)

    @property
    def history(self) -> Sequence[SubmissionRecord]:
        return self.inputs.history(self.run.name)

    def stays(
        self, outcome: RunOutcome, cause: Cause, reason: str, *, live_job: str | None = None
    ) -> Decision:
        """Nothing to submit: the run stays as it is, for `cause` (`reason` in words)."""
        action = Action(
            kind=ActionKind.NOOP,
            target=self.run.name,
            cause=cause,
            reason=reason,
            spec_hash=self.run.spec_hash,
        )
        return Decision(action, outcome, live_job=live_job)

    def submit(
        self, kind: ActionKind, cause: Cause, reason: str, cancels: tuple[str, ...] = ()
    ) -> Decision:
        return submit(
            self.inputs, self.run, self.decided, kind, cause, reason, cancels, self.in_use
        )


def facts_of(
    inputs: PlanInputs,
    run: DesiredRun,
    decided: Mapping[str, Decision],
    in_use: Mapping[str, InUse] | None = None,
) -> RunFacts:
    jobs = inputs.jobs(run.name)
    current = tuple(job for job in jobs if job.tag.spec_hash == run.spec_hash)
    success = last_success(inputs.history(run.name), run, current)
    stale = staleness(inputs, run, success, decided) if success is not None else None
    return RunFacts(inputs, run, decided, jobs, current, success, stale, in_use or {})


def decide(
    inputs: PlanInputs,
    run: DesiredRun,
    decided: Mapping[str, Decision],
    in_use: Mapping[str, InUse] | None = None,
) -> Decision:
    """The run's decision, its action carrying its sync status and outcome. ``in_use``:
    what GPU steps hold in each allocation's ready job now, this plan's starts included
    (default: as observed)."""
    facts = facts_of(inputs, run, decided, in_use)
    made = next(
        (found for row in DECISION_TABLE if (found := row(facts)) is not None), None
    ) or _submit_anew(facts)
    sync = sync_status(facts.success, facts.stale, facts.history, facts.jobs)
    action = made.action.model_copy(update={"sync": sync, "outcome": made.outcome})
    return replace(made, action=action)


def blocked_upstream(facts: RunFacts) -> Decision | None:
    for upstream in facts.inputs.desired.upstreams[facts.run.name]:
        before = facts.decided.get(upstream)
        if before is not None and before.outcome in (RunOutcome.FAILED, RunOutcome.BLOCKED):
            word = "failed" if before.outcome is RunOutcome.FAILED else "is blocked"
            action = Action(
                kind=ActionKind.BLOCKED,
                target=facts.run.name,
                cause=Cause.UPSTREAM_FAILED,
                reason=f"upstream {upstream} {word}",
                spec_hash=facts.run.spec_hash,
            )
            return Decision(action, RunOutcome.BLOCKED)
    return None


def array_unread(facts: RunFacts) -> Decision | None:
    """A job array of the run's sweep whose member map could not be read stays whole,
    under the sweep's name (identity.split_arrays): any member may have a task in it, so
    none is submitted until it can be told apart."""
    sweep = facts.run.sweep
    unread = facts.inputs.jobs(sweep) if sweep is not None else ()
    if not unread:
        return None
    why = f"job array {unread[-1].job_id} of {sweep} cannot be told apart: not submitting"
    return facts.stays(RunOutcome.WAITING, Cause.ARRAY_UNREAD, why)


def replace_on_request(facts: RunFacts) -> Decision | None:
    """`--replace RUN`: a new job although the spec did not change (a flaky node, a failed
    run with no retries left); a queued or running job of it is cancelled first. Its
    downstream may rerun after it, as after any run submitted again. Never
    on a partial picture: that could cancel or duplicate a job recon cannot see."""
    if facts.run.name not in facts.inputs.replace:
        return None
    if not facts.inputs.observation.complete or unseen(facts.inputs, facts.run) is not None:
        why = "not replaced as asked: the cluster was not fully seen; try again"
        return facts.stays(RunOutcome.WAITING, Cause.OBSERVATION_INCOMPLETE, why)
    live = tuple(job.job_id for job in facts.jobs if is_live(job))
    kind = ActionKind.REPLACE if live else ActionKind.SUBMIT
    return facts.submit(
        kind, Cause.REPLACE_REQUESTED, "replaced as asked (--replace)", cancels=live
    )


def in_progress(facts: RunFacts) -> Decision | None:
    live_current = [job for job in facts.current if is_live(job)]
    if not live_current:
        return None
    job = live_current[-1]
    return facts.stays(
        RunOutcome.INFLIGHT,
        Cause.IN_PROGRESS,
        f"in progress: job {job.job_id} {job.in_words or job.health.value}",
        live_job=job.job_id,
    )


def outdated_still_live(facts: RunFacts) -> Decision | None:
    """A job of an older spec is still queued or running, and the current spec has no
    success yet."""
    run = facts.run
    outdated_live = [
        job for job in facts.jobs if job.tag.spec_hash != run.spec_hash and is_live(job)
    ]
    if not outdated_live or facts.success is not None:
        return None
    job = outdated_live[-1]
    if not facts.inputs.observation.complete:
        return facts.stays(
            RunOutcome.WAITING,
            Cause.OBSERVATION_INCOMPLETE,
            f"outdated (job {job.job_id} {job.health.value}), but the observation is "
            "incomplete: not replacing",
        )
    if job.health is Health.PENDING or run.spec.update == "replace":
        why = "pending" if job.health is Health.PENDING else "running, update: replace"
        cause, reason = why_submit(facts.history, run)
        return facts.submit(
            ActionKind.REPLACE,
            cause,
            f"{reason} (job {job.job_id} {why})",
            cancels=(job.job_id,),
        )
    return facts.stays(
        RunOutcome.WAITING,
        Cause.UPDATE_DEFERRED,
        f"outdated; job {job.job_id} is running and update: defer lets it finish, "
        "then the new spec runs",
    )


def failed_before(facts: RunFacts) -> Decision | None:
    run = facts.run
    found = failed_attempts(facts.inputs, run, facts.current, facts.success, facts.decided)
    attempts = found.counted
    if found.again is not None:
        # Its last failure is no attempt at the run as it is now: tried again (a stale
        # success says why itself), except beside a coupled partner that stays down.
        partner = partner_failed(facts.inputs, run, facts.decided)
        if found.why_not is Cause.CANCELLED_BY_RECON and partner is not None:
            action = Action(
                kind=ActionKind.BLOCKED,
                target=run.name,
                cause=Cause.PARTNER_FAILED,
                reason=f"{partner}; {found.again}",
                spec_hash=run.spec_hash,
            )
            return Decision(action, RunOutcome.BLOCKED)
        if facts.stale is not None:
            return facts.submit(ActionKind.SUBMIT, facts.stale.cause, facts.stale.reason)
        assert found.why_not is not None  # set with `again`
        return facts.submit(ActionKind.SUBMIT, found.why_not, found.again)
    last = found.last
    if last is None:
        return None
    if last.requeue:
        return _requeue(facts, last, len(found.requeues))
    retries = run.spec.retries
    budget = drawn(retries, attempts)
    if budget.retries:
        words = retry_words(retries, attempts, budget)
        raise_ = raised(run, attempts, facts.inputs.fit)
        if raise_ is not None:
            words = f"{words}; retry with {raise_.words}"
        made = facts.submit(ActionKind.RETRY, Cause.RETRY, words)
        if made.action.kind is ActionKind.RETRY:
            made = replace(made, action=made.action.model_copy(update={"raised": raise_}))
    else:
        why = exhausted_words(retries, attempts, budget)
        made = facts.stays(
            RunOutcome.FAILED,
            Cause.RETRIES_EXHAUSTED,
            f"failed: {why}. {FAILED_FIXES.format(name=run.name)}",
        )
    requeues = len(found.requeues) if found.requeues else None
    action = made.action.model_copy(update={"retry_budget": budget, "requeues": requeues})
    return replace(made, action=action)


def _requeue(facts: RunFacts, last: Attempt, requeues: int) -> Decision:
    """A run with a checkpoint whose last job ended to be resumed: its next job, unless
    ``max_requeues`` have been taken since its last success. No retry budget is drawn."""
    checkpoint = facts.run.spec.checkpoint
    assert checkpoint is not None  # a requeue is one only for a run with a checkpoint
    most = checkpoint.max_requeues
    if requeues <= most:
        words = requeue_words(last, requeues, most)
        made = facts.submit(ActionKind.REQUEUE, Cause.CHECKPOINT_REQUEUE, words)
    else:
        why = never_finished_words(last, most)
        made = facts.stays(
            RunOutcome.FAILED,
            Cause.REQUEUES_EXHAUSTED,
            f"failed: {why}. {FAILED_FIXES.format(name=facts.run.name)}",
        )
    return replace(made, action=made.action.model_copy(update={"requeues": requeues}))


def succeeded(facts: RunFacts) -> Decision | None:
    if facts.success is None:
        return None
    if facts.stale is not None:
        return facts.submit(ActionKind.SUBMIT, facts.stale.cause, facts.stale.reason)
    changing = rerunning(facts.run, facts.success, facts.decided)
    if changing:
        # A job of it that may already be queued, not shown yet: never a second one.
        held_back = not_seen_yet(facts) or fate_not_seen(facts)
        return held_back or may_rerun(facts, facts.success, changing)
    return facts.stays(
        RunOutcome.DONE, Cause.CURRENT, f"current (job {facts.success.job_id} succeeded)"
    )


def may_rerun(
    facts: RunFacts, success: Success, changing: Mapping[str, tuple[str, ...]]
) -> Decision:
    """Current, but an upstream has a job in flight that may rewrite an input: its job is
    submitted now, chained to them with afterok, so one apply carries a change down the
    whole DAG. With a skip check, the job ends at once as a success when its inputs come
    out as its last success read them; without one it runs in full."""
    upstreams = sorted({sweep_of(name) or name for names in changing.values() for name in names})
    their = "its output changes" if len(upstreams) == 1 else "their outputs change"
    made = facts.submit(
        ActionKind.MAY_RERUN, Cause.UPSTREAM_RERUN, f"after {', '.join(upstreams)} (if {their})"
    )
    if made.outcome is RunOutcome.BLOCKED:
        # It fits nowhere now, but is current: judged again once its upstreams are done,
        # as a current run that takes no scheduler resources.
        why = f"current (job {success.job_id} succeeded); cannot rerun here: {made.action.reason}"
        return facts.stays(RunOutcome.DONE, Cause.CURRENT, why)
    if made.action.kind is not ActionKind.MAY_RERUN:
        return made  # it waits (for an upstream step, or its allocation)
    check, why_not = skip_check(facts.inputs, facts.run, success, changing)
    details = made.action.details if check else (*made.action.details, f"runs in full: {why_not}")
    action = made.action.model_copy(update={"skip_check": check, "details": details})
    return replace(made, action=action)


def not_seen_yet(facts: RunFacts) -> Decision | None:
    job = unseen(facts.inputs, facts.run)
    if job is None:
        return None
    waiting = facts.stays(
        RunOutcome.WAITING,
        Cause.NOT_SEEN_YET,
        f"job {job} was submitted but the scheduler does not show it yet; not resubmitting",
    )
    action = waiting.action.model_copy(update={"unseen_job": job})
    return Decision(action, waiting.outcome)


def step_not_listed_yet(facts: RunFacts) -> Decision | None:
    why = unlisted_step(facts.inputs, facts.run)
    if why is None:
        return None
    waits = facts.stays(RunOutcome.WAITING, Cause.STEP_NOT_LISTED, why)
    return replace(waits, uses=facts.run.allocation)


def fate_not_seen(facts: RunFacts) -> Decision | None:
    seen = {job.job_id for job in facts.jobs}
    if facts.inputs.observation.complete or not fate_unknown(facts.history, facts.run, seen):
        return None
    return facts.stays(
        RunOutcome.WAITING,
        Cause.OBSERVATION_INCOMPLETE,
        "state of its last job unknown (observation incomplete); not resubmitting",
    )


def refused(facts: RunFacts) -> Decision | None:
    """Its last submission, of this spec at this commit, was refused: sending it again
    would be refused again (a symbolic link where an output goes, a QOS sbatch does not
    know), and a pass that tries it for ever never ends `apply --wait`. A new commit
    tries again, as `--replace` does."""
    why = refused_last(facts.history, facts.run.spec_hash, facts.inputs.desired.commit)
    if why is None:
        return None
    action = Action(
        kind=ActionKind.BLOCKED,
        target=facts.run.name,
        cause=Cause.REFUSED,
        reason=f"refused at submission: {why}. Fix it and commit, or "
        f"`recon apply --replace {facts.run.name}` to try again",
        spec_hash=facts.run.spec_hash,
    )
    return Decision(action, RunOutcome.BLOCKED)


def _submit_anew(facts: RunFacts) -> Decision:
    """No row decided: the run has no job of its current spec to wait for (its journalled
    job, if any, was lost: Slurm gave its id to another job, or it stayed unseen past its
    grace)."""
    lost = lost_jobs(facts.inputs, facts.run)
    cause, why = why_submit(facts.history, facts.run)
    if lost:
        why += f"; {lost[-1][0]} was lost: Slurm now shows that id as {lost[-1][1]}"
    if lost or vanished(facts.inputs, facts.run):
        cause = Cause.JOB_LOST
    return facts.submit(ActionKind.SUBMIT, cause, why)


Row = Callable[[RunFacts], Decision | None]

# The decision table, asked in this order (see the module's docstring).
DECISION_TABLE: tuple[Row, ...] = (
    blocked_upstream,
    array_unread,
    replace_on_request,
    in_progress,
    # A job of the current spec that may be alive but is not shown is waited for before
    # anything is judged from the run's past: a retry, or a run sent again for a lost
    # output, that Slurm's accounting lag hides is still that run's job.
    not_seen_yet,
    step_not_listed_yet,
    fate_not_seen,
    refused,
    outdated_still_live,
    failed_before,
    succeeded,
)
