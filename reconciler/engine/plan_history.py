"""What a run's past says, read from its jobs and its journal records. Pure.

Each function answers one question the decision table (engine/plan_runs.py) asks of a
run: its last success and whether that is still current, its failed attempts since,
and the jobs of its current spec whose fate recon has not seen yet.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from reconciler.desired.desired import DesiredRun
from reconciler.engine.actions import RunOutcome, SkipCheck
from reconciler.engine.plan_inputs import Decision, PlanInputs
from reconciler.scheduler.base import ObservedJob, job_order
from reconciler.scheduler.states import ENDED_BADLY, ENDINGS, Health, ending
from reconciler.state.records import (
    NO_OUTPUTS,
    UNSEEN_GRACE,
    SubmissionRecord,
    SubmissionStatus,
    gathered_digest,
    unseen_job,
)


@dataclass(frozen=True)
class Success:
    job_id: str
    record: SubmissionRecord | None  # None while only the cluster has seen it succeed


def last_success(
    history: Sequence[SubmissionRecord], run: DesiredRun, current: Sequence[ObservedJob]
) -> Success | None:
    """The newest job of the current spec that succeeded: from the journal (which also
    outlives sacct's window) or, before the journal has seen its end, from the cluster.
    The journal wins for a job it judged failed (completed without its outputs)."""
    judged = {r.job_id: r for r in history if r.final_health is not None}
    candidates: dict[str, SubmissionRecord | None] = {}
    for job in current:
        if job.finished and job.health is Health.SUCCEEDED and job.job_id not in judged:
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


def staleness(
    inputs: PlanInputs, run: DesiredRun, success: Success, decided: Mapping[str, Decision]
) -> str | None:
    """Why a succeeded run is no longer current: an output gone, or an input changed
    since the job read it. None when it is current. `decided`: the runs decided so far,
    its upstreams among them."""
    for name in run.outputs:
        if inputs.files.outputs.get((run.name, name), "present") is None:
            return f"output {name} is missing"
    used = success.record.input_versions if success.record is not None else {}
    for name, spec_input in run.inputs.items():
        before = used.get(name)
        now = _input_version(inputs, run, name, decided)
        if before is not None and now is not None and now != before:
            source = spec_input.from_ or spec_input.path
            return f"input {name} ({source}) changed since job {success.job_id} read it"
    return None


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


def failed_attempts(
    history: Sequence[SubmissionRecord],
    run: DesiredRun,
    current: Sequence[ObservedJob],
    success: Success | None,
) -> list[tuple[str, str]]:
    """(job id, how it ended) for each failed attempt at the current spec since its last
    success.

    A job Slurm cancelled because its dependency can never be met never ran: it is no
    attempt of its own (its upstream's failure is what counts).
    """
    attempts: dict[str, str] = {}
    for record in history:
        if (
            record.spec_hash == run.spec_hash
            and record.job_id is not None
            and record.final_health in ENDED_BADLY
            and not _dependency_cancel(record.reason)
        ):
            attempts[record.job_id] = (
                record.reason
                if record.reason and record.reason.startswith((NO_OUTPUTS, *ENDINGS))
                else ending(record.final_health, record.exit_code)
            )
    for job in current:
        reason = next((row.reason for row in job.components if row.reason), None)
        if job.finished and job.health in ENDED_BADLY and not _dependency_cancel(reason):
            exit_code = next((r.exit_code for r in job.components if r.exit_code), None)
            attempts[job.job_id] = ending(job.health, exit_code, job.in_words)
    since = job_order(success.job_id) if success is not None else (-1, -1)
    return sorted(
        ((job_id, how) for job_id, how in attempts.items() if job_order(job_id) > since),
        key=lambda item: job_order(item[0]),
    )


def _dependency_cancel(reason: str | None) -> bool:
    return reason is not None and reason.startswith("Dependency")


def unseen(inputs: PlanInputs, run: DesiredRun) -> str | None:
    """A job of the current spec the journal holds but no observation shows yet.

    Slurm's two views lag behind each other (a job can leave squeue before sacct stores
    its comment), so absence right after submission proves nothing. Only once it has
    stayed unseen for `UNSEEN_GRACE` is it taken as lost, and the run submitted again;
    at once when Slurm shows its id as another job of recon's (``lost_jobs``).
    """
    observed = {job.job_id for job in inputs.jobs(run.name)}
    lost = {job_id for job_id, _ in lost_jobs(inputs, run)}
    return unseen_job(inputs.history(run.name), run.spec_hash, observed | lost, inputs.now)


def lost_jobs(inputs: PlanInputs, run: DesiredRun) -> list[tuple[str, str]]:
    """(job id, the tag it shows now) for each job of the run's current spec whose end the
    journal has not recorded and whose id Slurm now shows carrying another tag
    (``identity.by_id``): slurmctld killed and restarted can lose jobs it had just
    accepted and hand their ids to new submissions. Such a job is lost, not live, and
    waiting for it is pointless."""
    reused = inputs.observation.reused_ids
    return [
        (record.job_id, reused[record.job_id])
        for record in inputs.history(run.name)
        if record.spec_hash == run.spec_hash
        and record.final_health is None
        and record.job_id in reused
    ]


def unlisted_step(inputs: PlanInputs, run: DesiredRun) -> str | None:
    """A step of the current spec started whose id Slurm has not told yet: srun holds it
    back until the allocation has room (for what the planner does not count before it
    starts a step, engine/plan_allocations.py ``short_of``: CPUs, a step of unknown
    share), or Slurm is slow to list it. It is found by its name once listed (and
    adopted); starting it again meanwhile would run it twice. While its srun runs here it
    waits, however long; with no srun seen, for ``UNSEEN_GRACE``; and when the processes
    could not be looked at, until they can."""
    if run.allocation is None:
        return None
    started = [
        record
        for record in inputs.history(run.name)
        if record.spec_hash == run.spec_hash and record.status is SubmissionStatus.INTENT
    ]
    if not started:
        return None
    launches = inputs.observation.launches
    held = [
        launch
        for launch in launches or ()
        if launch.tag.project == inputs.project
        and launch.tag.kind == "run"
        and launch.tag.name == run.name
        and launch.tag.spec_hash == run.spec_hash
    ]
    if held:
        return (
            f"srun holds its step back until allocation {run.allocation} (job "
            f"{held[-1].allocation_id}) has room for it; not starting it again"
        )
    if launches is None:
        return (
            f"started in allocation {run.allocation}, not listed yet, and its srun "
            "could not be looked for; not starting it again"
        )
    if any(inputs.now - record.created_at < UNSEEN_GRACE for record in started):
        return (
            f"started in allocation {run.allocation}, but Slurm does not list "
            "its step yet; not starting it again"
        )
    return None


def fate_unknown(
    history: Sequence[SubmissionRecord], run: DesiredRun, seen: Collection[str] = ()
) -> bool:
    """The journal holds a job of the current spec whose end it never saw, and that the
    observation does not show (``seen``: the ids it shows; a job it shows has its fate
    told there)."""
    return any(
        record.spec_hash == run.spec_hash
        and record.status is not SubmissionStatus.REFUSED
        and record.final_health is None
        and record.job_id not in seen
        for record in history
    )
