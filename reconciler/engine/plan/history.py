"""What a run's past says, read from its jobs and its journal records. Pure.

Each function answers one question the decision table (engine/plan/runs.py) asks of a
run: its last success and whether that is still current, and its failed attempts since.
The jobs of its current spec whose fate recon has not seen yet are engine/plan/unseen.py's.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from reconciler.desired.desired import DesiredRun
from reconciler.engine.plan.actions import RunOutcome, SkipCheck
from reconciler.engine.plan.budgets import (
    REQUEUED,
    Attempt,
    kind_of,
    saved_checkpoint,
    timed_out,
)
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.inputs import Decision, PlanInputs, is_live
from reconciler.scheduler.base import ObservedJob, job_order
from reconciler.scheduler.states import ENDED_BADLY, Health, ending, waited_for_dependency
from reconciler.state.records import (
    EndingKind,
    SubmissionRecord,
    gathered_digest,
)


def settled_healths(records: Iterable[SubmissionRecord]) -> dict[str, Health]:
    """job id -> how the journal judged that job ended, for each job it has settled (the
    newest record of an id Slurm recycled wins)."""
    return {
        record.job_id: record.final_health
        for record in records
        if record.job_id is not None and record.final_health is not None
    }


def journal_over_cluster(recorded: Health | None, seen: Health) -> Health:
    """How a job stands as recon sees it. The journal's judgement beats the cluster's: a
    job settle judged (``recorded``) has the health it recorded, such as failed for a job
    Slurm calls COMPLETED that left its declared outputs missing; any other job has the
    health the cluster shows (``seen``). The one home of that rule: last success, sync
    status, and status's rows for runs and allocation jobs all ask it."""
    return recorded if recorded is not None else seen


def settled_health(job: ObservedJob, judged: Mapping[str, Health]) -> Health:
    """``journal_over_cluster`` for an observed job, the journal's judgements looked up
    by job id (``settled_healths``)."""
    return journal_over_cluster(judged.get(job.job_id), job.health)


@dataclass(frozen=True)
class Success:
    job_id: str
    record: SubmissionRecord | None  # None while only the cluster has seen it succeed


def last_success(
    history: Sequence[SubmissionRecord], run: DesiredRun, current: Sequence[ObservedJob]
) -> Success | None:
    """The newest job of the current spec that succeeded: from the journal (which also
    outlives sacct's window) or, before the journal has seen its end, from the cluster
    (``settled_health``: the journal wins for a job it judged failed)."""
    judged = settled_healths(history)
    candidates: dict[str, SubmissionRecord | None] = {}
    for job in current:
        if job.finished and settled_health(job, judged) is Health.SUCCEEDED:
            candidates[job.job_id] = None
    for record in history:
        if (
            record.spec_hash == run.spec_hash
            and record.job_id is not None
            and record.final_health is Health.SUCCEEDED
        ):
            candidates[record.job_id] = record
    if not candidates:
        return None
    newest = max(candidates, key=job_order)
    return Success(newest, candidates[newest])


@dataclass(frozen=True)
class Stale:
    """What made a run's last success no longer current: an output missing, its code or
    an input changed (``cause``), and that in words."""

    cause: Cause
    reason: str


def staleness(
    inputs: PlanInputs, run: DesiredRun, success: Success, decided: Mapping[str, Decision]
) -> Stale | None:
    """Why a succeeded run is no longer current: an output gone, a code file changed
    since the job ran it, or an input changed since the job read it. None when it is
    current. `decided`: the runs decided so far, its upstreams among them."""
    for name in run.outputs:
        if inputs.files.outputs.get((run.name, name), "present") is None:
            return Stale(Cause.OUTPUT_MISSING, f"output {name} is missing")
    changed = code_changes(inputs, run, success.record)
    if changed:
        return Stale(Cause.CODE_CHANGED, _changed_code(changed, f"since job {success.job_id} ran"))
    used = success.record.input_versions if success.record is not None else {}
    for name, spec_input in run.inputs.items():
        before = used.get(name)
        now = _input_version(inputs, run, name, decided)
        if before is not None and now is not None and now != before:
            source = spec_input.from_ or spec_input.path
            return Stale(
                Cause.INPUTS_CHANGED,
                f"input {name} ({source}) changed since job {success.job_id} read it",
            )
    return None


# The blob id of a file that was not in a job's commit: unlike any file's.
_ABSENT = ""


def code_changes(inputs: PlanInputs, run: DesiredRun, record: SubmissionRecord | None) -> list[str]:
    """The run's code files whose git blob id differs from the one the record's job ran
    with, in path order. A file whose version for that job is unknown (no record, no
    commit, a commit git no longer has) counts as unchanged: nothing is rerun on a guess."""
    if record is None or not run.code:
        return []
    return sorted(
        path
        for path, blob in run.code.items()
        if (ran := _code_ran(inputs, run, record, path)) is not None and ran != blob
    )


def _code_ran(
    inputs: PlanInputs, run: DesiredRun, record: SubmissionRecord, path: str
) -> str | None:
    """The blob id of `path` the record's job ran: recorded with its intent, else the
    file at the commit the job was submitted from (a record of an older recon's, or a
    file that joined the run's code since)."""
    if path in record.code_versions:
        return record.code_versions[path]
    if record.commit is None:
        return None
    if record.commit == inputs.desired.commit:
        return run.code[path]
    listing = inputs.code_at.get(record.commit)
    if listing is None:
        return None
    return listing.get(path, _ABSENT)


def _changed_code(paths: Sequence[str], since: str) -> str:
    if len(paths) == 1:
        return f"code {paths[0]} changed {since} it"
    return f"code {', '.join(paths)} changed {since} them"


def _input_version(
    inputs: PlanInputs, run: DesiredRun, name: str, decided: Mapping[str, Decision]
) -> str | None:
    """The version an input has now; None when unknown (its upstream is rerunning, or it
    was not looked at)."""
    spec_input = run.inputs[name]
    if spec_input.upstream is None:
        return inputs.files.inputs.get((run.name, name))
    upstream, output = spec_input.upstream
    members = run.gathers.get(name)
    if members is not None:  # one version for every member's output it gathers
        if any(_undone(decided.get(member)) for member in members):
            return None
        return gathered_digest({m: inputs.files.outputs.get((m, output)) for m in members})
    before = decided.get(upstream)
    if before is None or before.outcome is not RunOutcome.DONE:
        return None  # its new output is not there yet: decided on a later pass
    return inputs.files.outputs.get((upstream, output))


def _undone(decision: Decision | None) -> bool:
    return decision is None or decision.outcome is not RunOutcome.DONE


def rerunning(
    run: DesiredRun, success: Success, decided: Mapping[str, Decision]
) -> dict[str, tuple[str, ...]]:
    """input -> its upstream runs (or the members it gathers) that have a job in flight
    once this plan is carried out: submitted by it, or queued or running. Each may
    rewrite the input, so a run current until now (its last ``success``) may have to
    rerun after them. A job in flight older than that success is not counted: the run's
    job came after it, chained to it (Slurm's two views can show a job ended in one and
    running in the other for a while)."""
    since = job_order(success.job_id)
    found: dict[str, tuple[str, ...]] = {}
    for name, spec_input in run.inputs.items():
        if spec_input.upstream is None:
            continue
        sources = run.gathers.get(name, (spec_input.upstream[0],))
        flying = tuple(
            source
            for source in sources
            if (made := decided.get(source)) is not None
            and made.outcome is RunOutcome.INFLIGHT
            and (made.live_job is None or job_order(made.live_job) > since)
        )
        if flying:
            found[name] = flying
    return found


def skip_check(
    inputs: PlanInputs, run: DesiredRun, success: Success, changing: Mapping[str, object]
) -> tuple[SkipCheck | None, str | None]:
    """What the job of a run that may rerun compares before running: the version its
    last success read of each input in ``changing``. None, and why, when one of them
    cannot be compared in the job: only a `hash: content` output of one run has a
    version the job can check with sha256sum."""
    if run.allocation is not None:
        return None, "a step in an allocation is not checked"
    if success.record is None:
        return None, f"job {success.job_id}'s inputs are not recorded yet"
    read: dict[str, str] = {}
    for name in sorted(changing):
        source = run.inputs[name].from_
        upstream = run.inputs[name].upstream
        assert upstream is not None  # only another run's output changes in a plan
        if name in run.gathers:
            return None, f"input {name} ({source}) gathers a sweep's outputs"
        output = inputs.desired.runs[upstream[0]].outputs[upstream[1]]
        if output.hash != "content":
            return None, f"input {name} ({source}) is hash: {output.hash}"
        version = success.record.input_versions.get(name)
        if version is None:
            return None, f"job {success.job_id} did not record input {name}"
        read[name] = version
    return SkipCheck(job_id=success.job_id, inputs=read), None


@dataclass(frozen=True)
class Attempts:
    """The failed attempts at the current spec since its last success, oldest first,
    each with its kind (``budgets.kind_of``); and, when the newest failed job of the spec
    is not one (its code or inputs changed since, or recon cancelled it), why not
    (`why_not`: code changed, inputs changed or cancelled by recon; `again`: that in
    words)."""

    counted: list[Attempt]
    again: str | None = None
    why_not: Cause | None = None
    # for a run with a checkpoint: its jobs that ended to be resumed since its last
    # success (``budgets.REQUEUED``), oldest first; none of them is in ``counted``
    requeues: list[Attempt] = field(default_factory=list)

    @property
    def last(self) -> Attempt | None:
        """The newest of the failed attempts and requeues."""
        both = [*self.counted, *self.requeues]
        return max(both, key=lambda attempt: job_order(attempt.job_id), default=None)


def failed_attempts(
    inputs: PlanInputs,
    run: DesiredRun,
    current: Sequence[ObservedJob],
    success: Success | None,
    decided: Mapping[str, Decision],
) -> Attempts:
    """A failed job of the current spec counts against `retries` only while what it ran
    with is what the run has now: its code files' versions and its inputs' versions.
    Once an upstream's output or the run's code changes, the run is tried again.

    A job Slurm cancelled because its dependency can never be met never ran: it is no
    attempt of its own (its upstream's failure is what counts). Nor is a job recon itself
    cancelled (prune, teardown, replace, a held job's cleanup) and that ended cancelled:
    ending it was recon's doing (a job that failed on its own first stays a failure).

    Each attempt's kind is read from how it ended, as a value: the journal's ``ending``,
    or for a job not settled yet the Slurm state of its components.
    """
    attempts: dict[str, Attempt] = {}
    not_attempts: dict[str, tuple[Cause, str]] = {}  # job id -> why it is no attempt
    said: set[str] = set()  # jobs whose journal record says more than the cluster's words
    for record in inputs.history(run.name):
        if (
            record.spec_hash != run.spec_hash
            or record.job_id is None
            or record.final_health not in ENDED_BADLY
            or record.ending is EndingKind.DEPENDENCY
        ):
            continue
        excluded = _no_attempt(inputs, run, record, decided)
        if excluded is not None:
            not_attempts[record.job_id] = excluded
            continue
        attempts[record.job_id] = _recorded_attempt(record)
        if record.ending is not None and record.reason:
            said.add(record.job_id)
    for job in current:
        reason = next((row.reason for row in job.components if row.reason), None)
        if (
            job.finished
            and job.health in ENDED_BADLY
            and not waited_for_dependency(reason)
            and job.job_id not in not_attempts
            and job.job_id not in said  # the journal's words say more (no outputs)
        ):
            if job.job_id in inputs.cancelled and job.health is Health.CANCELLED:
                not_attempts[job.job_id] = _recon_cancelled(job.job_id)
                continue
            attempts[job.job_id] = _observed_attempt(job)
    since = job_order(success.job_id) if success is not None else (-1, -1)
    ordered = sorted(
        (attempt for job_id, attempt in attempts.items() if job_order(job_id) > since),
        key=lambda attempt: job_order(attempt.job_id),
    )
    if any(attempt.requeue for attempt in ordered) and run.spec.checkpoint is None:
        # only a run with a checkpoint resumes (its model built only then)
        ordered = [replace(attempt, requeue=False) for attempt in ordered]
    counted = [attempt for attempt in ordered if not attempt.requeue]
    requeues = [attempt for attempt in ordered if attempt.requeue]
    if not not_attempts:
        return Attempts(counted, requeues=requeues)
    later = [job_id for job_id in not_attempts if job_order(job_id) > since]
    newest = max(later, key=job_order, default=None)
    if newest is None or (ordered and job_order(ordered[-1].job_id) > job_order(newest)):
        return Attempts(counted, requeues=requeues)
    kind, again = not_attempts[newest]
    return Attempts(counted, again, kind, requeues)


def _recorded_attempt(record: SubmissionRecord) -> Attempt:
    """A failed attempt as the journal settled it. How it ended, in words: the reason
    settle wrote when it says more than the health does (timed out, no outputs), else its
    health and exit code; a timeout with how long it ran, when the usage says. A requeue
    when it ended so (``REQUEUED``), should the run have a checkpoint."""
    assert record.job_id is not None
    how = None
    usage = record.usage
    elapsed = usage.elapsed_s if usage is not None else None
    if record.ending is EndingKind.TIMEOUT:
        how = timed_out(elapsed)
    elif record.ending is EndingKind.CHECKPOINTED:
        how = saved_checkpoint(elapsed)
    if how is None and record.ending is not None and record.reason:
        how = record.reason
    how = how or ending(record.final_health, record.exit_code)
    requeue = record.ending in REQUEUED
    return Attempt(record.job_id, how, kind_of(record.ending), requeue)


def _observed_attempt(job: ObservedJob) -> Attempt:
    """A failed attempt the journal has not settled yet, from its rows: its kind from
    the Slurm state of the first component that says more than "failed"."""
    ended = EndingKind.of_states(row.state for row in job.components)
    how = None
    if ended is EndingKind.TIMEOUT:
        elapsed = [row.elapsed.total_seconds() for row in job.components if row.elapsed]
        how = timed_out(max(elapsed, default=None))
    if how is None:
        exit_code = next((r.exit_code for r in job.components if r.exit_code), None)
        how = ending(job.health, exit_code, job.in_words)
    return Attempt(job.job_id, how, kind_of(ended), ended in REQUEUED)


def _no_attempt(
    inputs: PlanInputs, run: DesiredRun, record: SubmissionRecord, decided: Mapping[str, Decision]
) -> tuple[Cause, str] | None:
    """Why a failed job of the current spec is no attempt at what the run is now; None
    when it is one."""
    assert record.job_id is not None
    if record.job_id in inputs.cancelled and record.final_health is Health.CANCELLED:
        return _recon_cancelled(record.job_id)
    changed = code_changes(inputs, run, record)
    if changed:
        return Cause.CODE_CHANGED, _changed_code(changed, f"since job {record.job_id} failed with")
    for name, spec_input in run.inputs.items():
        if _input_changed(inputs, run, record, name, decided):
            source = spec_input.from_ or spec_input.path
            why = f"input {name} ({source}) changed since job {record.job_id} failed"
            return Cause.INPUTS_CHANGED, why
    return None


def _recon_cancelled(job_id: str) -> tuple[Cause, str]:
    why = f"job {job_id} was cancelled by recon, which is no attempt of the run's"
    return Cause.CANCELLED_BY_RECON, why


def partner_failed(
    inputs: PlanInputs, run: DesiredRun, decided: Mapping[str, Decision]
) -> str | None:
    """A coupled partner that ended badly and is not run again (in this plan, as decided
    already, or by a job queued or running): the run, torn down with it, waits for it
    rather than run alone. The partner's run then submits both."""
    for partner in inputs.partners(run.name):
        before = decided.get(partner)
        if before is not None and before.outcome in (RunOutcome.INFLIGHT, RunOutcome.DONE):
            continue
        if any(is_live(job) for job in inputs.jobs(partner)):
            continue
        ended = [r for r in inputs.history(partner) if r.job_id is not None]
        last = ended[-1] if ended else None
        if last is not None and last.final_health in ENDED_BADLY:
            how = last.final_health.value
            return f"waits for coupled run {partner}, which ended {how} (job {last.job_id})"
    return None


def _input_changed(
    inputs: PlanInputs,
    run: DesiredRun,
    record: SubmissionRecord,
    name: str,
    decided: Mapping[str, Decision],
) -> bool:
    """Whether input `name` has changed since the record's failed job read it. A record
    with the version (recorded when the job was settled) is compared with the version
    now; one without (settled by an older recon) counts as changed once an upstream it
    reads has a success submitted after it and is done. An external `path:` input of
    such a record counts as unchanged: nothing tells what the job read."""
    now = _input_version(inputs, run, name, decided)
    if name in record.input_versions:
        return now is not None and now != record.input_versions[name]
    spec_input = run.inputs[name]
    if spec_input.upstream is None or now is None:
        return False
    sources = run.gathers.get(name) or (spec_input.upstream[0],)
    return any(
        later.id > record.id and later.final_health is Health.SUCCEEDED
        for source in sources
        for later in inputs.history(source)
    )
