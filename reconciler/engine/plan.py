"""The planner: desired state + observed state + journal records -> a Plan. Pure.

No subprocess, no clock, no environment, no filesystem: `now` and every observation are
arguments, so the whole decision table is tested with plain values.

Each run is decided in DAG order, upstreams first, and its *outcome* for this plan is
remembered so its downstream can decide too:

    DONE      its current spec succeeded             downstream submits freely
    INFLIGHT  a job of its current spec is queued,   downstream submits now, chained with
              running, or is submitted by this plan  Slurm's afterok
    WAITING   an outdated job still runs (deferred)  downstream waits for a later pass
              or its state is unknown
    FAILED    failed with no retries left            downstream is blocked
    BLOCKED   an upstream failed                     downstream is blocked

Safety rules that hold whatever the inputs:
- a job whose spec hash matches the desired one is never cancelled or replaced;
- with an incomplete observation (sacct down) nothing is cancelled, replaced or pruned,
  and a run whose last job's fate is unknown is not submitted again.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from reconciler import graph
from reconciler.engine import plan_allocations
from reconciler.engine.actions import (
    Action,
    ActionKind,
    FieldChange,
    Plan,
    RunOutcome,
    SweepShape,
    SyncStatus,
)
from reconciler.engine.fit import Fit
from reconciler.scheduler.base import Observation, ObservedJob, job_order
from reconciler.scheduler.states import ALIVE, ENDED_BADLY, ENDINGS, Health, SlurmState, ending
from reconciler.spec.desired import (
    Desired,
    DesiredAllocation,
    DesiredRun,
    changed_fields,
    flat_fields,
)
from reconciler.spec.matrix import sweep_of
from reconciler.state.records import (
    NO_OUTPUTS,
    UNSEEN_GRACE,
    SetupRecord,
    SubmissionRecord,
    SubmissionStatus,
    gathered_digest,
    unseen_job,
)


@dataclass(frozen=True)
class FileState:
    """What the filesystem holds now, as version digests (None: missing).

    `outputs[(run, output)]` for runs' declared outputs, `inputs[(run, input)]` for
    external `path:` inputs. A key left out was not looked at and counts as present.
    """

    outputs: Mapping[tuple[str, str], str | None] = field(default_factory=dict)
    inputs: Mapping[tuple[str, str], str | None] = field(default_factory=dict)


@dataclass(frozen=True)
class _Success:
    job_id: str
    record: SubmissionRecord | None  # None while only the cluster has seen it succeed


@dataclass
class _Context:
    desired: Desired
    observation: Observation
    records: Sequence[SubmissionRecord]
    now: datetime
    files: FileState
    fit: Fit | None = None
    outcomes: dict[str, RunOutcome] = field(default_factory=dict)
    live_jobs: dict[str, str] = field(default_factory=dict)  # run -> its in-flight job id
    allocation_states: dict[str, plan_allocations.AllocationState] = field(default_factory=dict)
    # allocation -> (run, time limit) of runs waiting for a job with more time left
    renewals: dict[str, list[tuple[str, timedelta]]] = field(default_factory=dict)
    replace: frozenset[str] = frozenset()  # runs to submit anew on request (--replace)

    # Looked up once per plan, then by name: a scan of every job, record or run for each
    # run made a plan of 10,000 runs take minutes.
    _jobs: dict[str, tuple[ObservedJob, ...]] = field(init=False)
    _history: dict[str, list[SubmissionRecord]] = field(init=False)
    _partners: dict[str, list[str]] = field(init=False)

    def __post_init__(self) -> None:
        jobs: dict[str, list[ObservedJob]] = {}
        for job in self.observation.jobs:
            if job.tag.project == self.project and job.tag.kind == "run":
                jobs.setdefault(job.tag.name, []).append(job)
        self._jobs = {name: tuple(group) for name, group in jobs.items()}
        self._history = {}
        for record in self.records:
            if record.kind == "run":
                self._history.setdefault(record.name, []).append(record)
        self._partners = coupled_partners(self.desired)

    @property
    def project(self) -> str:
        return self.desired.project.project

    def jobs(self, name: str) -> tuple[ObservedJob, ...]:
        return self._jobs.get(name, ())

    def history(self, name: str) -> list[SubmissionRecord]:
        return self._history.get(name, [])

    def partners(self, name: str) -> list[str]:
        """The runs coupled with this one, sorted."""
        return self._partners.get(name, [])


def plan(
    desired: Desired,
    observation: Observation,
    records: Sequence[SubmissionRecord],
    now: datetime,
    *,
    scheduler: str,
    targets: Sequence[str] = (),
    downstream: bool = False,
    files: FileState | None = None,
    fit: Fit | None = None,
    setups: Sequence[SetupRecord] = (),
    containers: bool | None = None,
    elsewhere: Sequence[ObservedJob] = (),
    replace: Sequence[str] = (),
    max_array_size: int | None = None,
) -> Plan:
    """`setups`: the journal's allocation setups; `containers`: whether the cluster runs
    container images (pyxis), None when not looked at; `elsewhere`: live jobs of the
    project that other deployments own (only named in a note, never acted on);
    `replace`: runs to submit anew although nothing changed (Terraform's -replace);
    `max_array_size`: the scheduler's, to say how many job arrays a sweep's members take."""
    asked = tuple(targets)
    targets, replace = members_of(desired, targets), members_of(desired, replace)
    context = _Context(desired, observation, records, now, files or FileState(), fit)
    context.replace = frozenset(replace)
    if targets or replace:
        dag = graph.build(desired.upstreams)
        if replace:
            graph.select(dag, replace)  # an unknown name is an error, as for targets
    if targets:
        chosen = graph.select(dag, [*targets, *replace], downstream)
    else:
        chosen = graph.in_order(desired.upstreams)
    actions: list[Action] = list(_adoptions(context))
    cluster = plan_allocations.AllocationInputs(
        context.project,
        observation.jobs,
        observation.complete,
        records,
        setups,
        now,
        scheduler,
        containers,
        fit,
        desired.project.prune,
    )
    held, context.allocation_states = plan_allocations.plan_allocations(
        cluster, _allocations_of(desired, chosen, bool(targets))
    )
    actions.extend(held)
    if observation.complete:  # a teardown is a cancel: never on half a picture
        actions.extend(_teardowns(context, chosen))
    for name in chosen:
        actions.append(_decide(context, desired.runs[name]))
    actions.extend(
        plan_allocations.renewals(context.allocation_states, context.renewals, desired.allocations)
    )
    if not targets:
        actions.extend(_prunes(context))
        actions.extend(plan_allocations.prunes(cluster, set(desired.allocations)))
    notes = (
        *(() if observation.complete else _incomplete_notes(observation)),
        *_claimed_notes(observation),
        *_coupled_waits(context, chosen),
        *_elsewhere_note(context.project, elsewhere),
    )
    return Plan(
        project=context.project,
        root=str(desired.root),
        commit=desired.commit,
        scheduler=scheduler,
        created_at=now,
        targets=asked,
        downstream=downstream,
        observation_complete=observation.complete,
        notes=notes,
        fingerprint=fingerprint(observation, context.project),
        actions=tuple(actions),
        replace=tuple(replace),
        sweeps={
            name: SweepShape(
                members=len(sweep.members),
                max_parallel=sweep.max_parallel,
                max_array_size=max_array_size,
            )
            for name, sweep in desired.sweeps.items()
        },
    )


def members_of(desired: Desired, names: Sequence[str]) -> list[str]:
    """The names with each sweep's name replaced by its members' names."""
    return [
        member
        for name in names
        for member in (desired.sweeps[name].members if name in desired.sweeps else (name,))
    ]


def _allocations_of(
    desired: Desired, chosen: Sequence[str], targeted: bool
) -> list[DesiredAllocation]:
    """Every allocation, or with targets only those the chosen runs run in."""
    if not targeted:
        return [desired.allocations[name] for name in desired.allocations]
    used = {desired.runs[name].spec.allocation for name in chosen}
    return [desired.allocations[name] for name in desired.allocations if name in used]


def fingerprint(observation: Observation, project: str) -> str:
    """A digest of the project's observed jobs: a saved plan is stale once it changes."""
    rows = sorted(
        f"{job.job_id}:{job.tag.kind}:{job.tag.name}:{job.tag.spec_hash}:{job.health.value}"
        for job in observation.jobs
        if job.tag.project == project
    )
    material = "\n".join([f"complete={observation.complete}", *rows])
    return hashlib.sha256(material.encode()).hexdigest()[:16]


def _claimed_notes(observation: Observation) -> tuple[str, ...]:
    """What the plan says of each job taken as the deployment's by its journaled id alone
    (``identity.by_id``): its comment no longer holds its tag."""
    untagged = {job.job_id for job in observation.untagged}
    return tuple(
        f"Job {job.job_id} of {job.tag.kind} {job.tag.name} no longer carries its recon tag "
        f"in its comment (changed by hand?): it is still {job.tag.name}'s job, known by its "
        f"id from the journal, and is not submitted again. Its tag was {job.tag.format()}."
        for job in observation.jobs
        if job.job_id in untagged
    )


def _elsewhere_note(project: str, jobs: Sequence[ObservedJob]) -> tuple[str, ...]:
    """One note naming the live jobs of this project that another deployment (another
    clone or folder) owns, and where they run from: two people applying one project from
    two places see each other at once, and neither touches the other's jobs."""
    if not jobs:
        return ()
    places: dict[str, list[str]] = {}
    for job in jobs:
        workdir = next((row.workdir for row in job.components if row.workdir), None)
        places.setdefault(job.tag.deployment, []).append(workdir or "")
    shown = sorted(_common_folder(dirs) for dirs in places.values())
    where = ", ".join(shown[:3]) + (f" and {len(shown) - 3} more" if len(shown) > 3 else "")
    jobs_word = "job" if len(jobs) == 1 else "jobs"
    deployments = "another deployment" if len(places) == 1 else f"{len(places)} other deployments"
    return (
        f"{len(jobs)} live {jobs_word} of project {project} belong to {deployments} "
        f"(run from {where}); recon leaves them alone.",
    )


def _common_folder(workdirs: Sequence[str]) -> str:
    known = [path for path in workdirs if path.startswith("/")]
    if not known:
        return "an unknown folder"
    return os.path.commonpath(known) if len(known) > 1 else known[0]


def _incomplete_notes(observation: Observation) -> tuple[str, ...]:
    why = "; ".join(observation.problems) or "part of the cluster state could not be read"
    return (
        f"Observation incomplete: {why}. This plan cancels, replaces and prunes nothing, "
        "and does not resubmit runs whose last job's state is unknown.",
    )


def _adoptions(context: _Context) -> list[Action]:
    """Tagged jobs of this project that the journal does not know: a crash between sbatch
    and the journal write, or a lost journal. Adopting them is what prevents a second
    submission."""
    known = {r.job_id for r in context.records if r.job_id is not None}
    return [
        Action(
            kind=ActionKind.ADOPT,
            target=job.tag.name,
            target_kind=job.tag.kind,
            reason=f"tagged job {job.job_id} ({job.health.value}) is not in the journal",
            spec_hash=job.tag.spec_hash,
            job_ids=(job.job_id,),
        )
        for job in context.observation.jobs
        if job.tag.project == context.project
        and job.job_id not in known
        and job.tag.name not in context.desired.sweeps  # an array not split: unread
    ]


def _teardowns(context: _Context, chosen: Sequence[str]) -> list[Action]:
    """Jobs that hold nodes for nothing: a het job one of whose components (or their
    steps) failed while the others still run, and runs whose coupled partner ended
    badly. Cancelling them frees the nodes; the run then retries or stays failed."""
    actions = []
    for name in chosen:
        run = context.desired.runs[name]
        for job in context.jobs(name):
            if job.finished:
                continue
            why = _broken_component(job) if _coupled_het(run) else None
            why = why or _partner_down(context, run, job)
            if why is not None:
                actions.append(
                    Action(
                        kind=ActionKind.TEARDOWN,
                        target=name,
                        reason=why,
                        spec_hash=job.tag.spec_hash,
                        job_ids=(job.job_id,),
                    )
                )
    return actions


def _coupled_het(run: DesiredRun) -> bool:
    return run.spec.teardown == "coupled" and len(run.spec.resources.components) > 1


def _broken_component(job: ObservedJob) -> str | None:
    """A component or a step of one that ended badly while the job is not over.

    Steps that end well are left alone: a trainer that finished lets the rest wind down
    by itself. The `extern` step is Slurm's own bookkeeping.
    """
    for row in job.rows:
        if row.step == "extern" or row.health not in ENDED_BADLY:
            continue
        part = f"step {row.job_id}" if row.is_step else f"component {row.job_id}"
        how = ending(row.health, row.exit_code)
        return f"{part} {how} while the job still holds its other components"
    return None


def coupled_partners(desired: Desired) -> dict[str, list[str]]:
    """Each coupled run's partners, sorted. Coupling goes both ways: naming a run in
    `coupled_with` couples it back."""
    partners: dict[str, set[str]] = {}
    for run in desired.runs.values():
        for other in run.spec.coupled_with:
            if other in desired.runs:
                partners.setdefault(run.name, set()).add(other)
                partners.setdefault(other, set()).add(run.name)
    return {name: sorted(named) for name, named in partners.items()}


def _partner_down(context: _Context, run: DesiredRun, job: ObservedJob) -> str | None:
    """A partner whose latest job ended badly while `job` was already there. A partner
    that died before `job` was submitted (the teardown that ended this run's previous
    job, say) is no reason to tear down the new one."""
    submitted = _earliest_submit(job)
    for partner in context.partners(run.name):
        jobs = context.jobs(partner)
        if not jobs or any(_live(other) for other in jobs):
            continue
        last = max(jobs, key=lambda other: _job_order(other.job_id))
        ended = max((row.end for row in last.components if row.end is not None), default=None)
        if submitted is not None and ended is not None and ended < submitted:
            continue
        if last.health in ENDED_BADLY:
            return f"coupled run {partner} ended {last.health.value} (job {last.job_id})"
    return None


def _earliest_submit(job: ObservedJob) -> datetime | None:
    return min((row.submit for row in job.components if row.submit is not None), default=None)


def _coupled_waits(context: _Context, chosen: Sequence[str]) -> list[str]:
    """Coupled runs of which one holds nodes while another still queues."""
    notes = []
    for name in chosen:
        run = context.desired.runs[name]
        running = [j for j in context.jobs(name) if j.health is Health.RUNNING]
        for partner in context.partners(run.name):
            waiting = [j for j in context.jobs(partner) if j.health is Health.PENDING]
            if running and waiting:
                notes.append(
                    f"Coupled runs: {name} runs (job {running[-1].job_id}) while {partner} "
                    f"still waits in the queue (job {waiting[-1].job_id})."
                )
    return notes


def _prunes(context: _Context) -> list[Action]:
    """Live jobs of runs that left the repo. Only with a complete observation, and only
    when the project allows pruning. Outputs are never touched."""
    if not context.observation.complete or not context.desired.project.prune:
        return []
    return [
        Action(
            kind=ActionKind.CANCEL,
            target=job.tag.name,
            reason=f"{_what_left(job.tag.name)}; its job {job.job_id} is {job.health.value}",
            spec_hash=job.tag.spec_hash,
            job_ids=(job.job_id,),
            sync=SyncStatus.ORPHAN,
        )
        for job in context.observation.jobs
        if job.tag.project == context.project
        and job.tag.kind == "run"
        and job.tag.name not in context.desired.runs
        and job.tag.name not in context.desired.sweeps
        and _live(job)
    ]


def _what_left(name: str) -> str:
    sweep = sweep_of(name)
    return "run left the repo" if sweep is None else f"member left the matrix of {sweep}"


def _decide(context: _Context, run: DesiredRun) -> Action:
    action = _decide_action(context, run)
    outcome = context.outcomes[run.name]
    return action.model_copy(update={"sync": _sync(context, run), "outcome": outcome})


def _sync(context: _Context, run: DesiredRun) -> SyncStatus:
    success = _last_success(context, run, list(_current_jobs(context, run)))
    if success is not None:
        stale = _staleness(context, run, success)
        if stale is None:
            return SyncStatus.CURRENT
        return SyncStatus.MISSING if stale.startswith("output") else SyncStatus.OUTDATED
    history = context.history(run.name)
    judged = {r.job_id for r in history if r.final_health is not None}
    succeeded_before = any(r.final_health is Health.SUCCEEDED for r in history) or any(
        job.health is Health.SUCCEEDED and job.job_id not in judged
        for job in context.jobs(run.name)
    )  # the journal's judgement wins: COMPLETED without outputs never succeeded
    return SyncStatus.OUTDATED if succeeded_before else SyncStatus.NEVER_RUN


def _current_jobs(context: _Context, run: DesiredRun) -> tuple[ObservedJob, ...]:
    return tuple(job for job in context.jobs(run.name) if job.tag.spec_hash == run.spec_hash)


def _decide_action(context: _Context, run: DesiredRun) -> Action:
    blocked = _blocked_by(context, run.name)
    if blocked is not None:
        return blocked
    unread = context.jobs(run.sweep) if run.sweep is not None else ()
    if unread:
        # A job array of the sweep whose member map could not be read (identity.split_arrays):
        # any member may have a task in it, so none is submitted until it can be read.
        why = f"job array {unread[-1].job_id} of {run.sweep} cannot be told apart: not submitting"
        return _set(context, run, RunOutcome.WAITING, ActionKind.NOOP, why)
    jobs = context.jobs(run.name)
    if run.name in context.replace:
        return _replace_on_request(context, run, jobs)
    current = [job for job in jobs if job.tag.spec_hash == run.spec_hash]
    outdated_live = [job for job in jobs if job.tag.spec_hash != run.spec_hash and _live(job)]

    live_current = [job for job in current if _live(job)]
    if live_current:
        job = live_current[-1]
        return _set(
            context,
            run,
            RunOutcome.INFLIGHT,
            ActionKind.NOOP,
            f"in progress: job {job.job_id} {job.in_words or job.health.value}",
            job=job.job_id,
        )
    success = _last_success(context, run, current)
    if outdated_live and success is None:
        return _outdated(context, run, outdated_live[-1])
    attempts = _failed_attempts(context, run, current, success)
    if attempts:
        return _after_failure(context, run, attempts)
    if success is not None:
        stale = _staleness(context, run, success)
        if stale is None:
            return _set(
                context,
                run,
                RunOutcome.DONE,
                ActionKind.NOOP,
                f"current (job {success.job_id} succeeded)",
            )
        return _submit(context, run, ActionKind.SUBMIT, stale)
    unseen = _unseen_job(context, run)
    if unseen is not None:
        waiting = _set(
            context,
            run,
            RunOutcome.WAITING,
            ActionKind.NOOP,
            f"job {unseen} was submitted but the scheduler does not show it yet; not resubmitting",
        )
        return waiting.model_copy(update={"unseen_job": unseen})
    unlisted = _unlisted_step(context, run)
    if unlisted is not None:
        return _set(context, run, RunOutcome.WAITING, ActionKind.NOOP, unlisted)
    if not context.observation.complete and _fate_unknown(context, run):
        return _set(
            context,
            run,
            RunOutcome.WAITING,
            ActionKind.NOOP,
            "state of its last job unknown (observation incomplete); not resubmitting",
        )
    lost = _lost_jobs(context, run)
    why = _why_submit(context, run)
    if lost:
        why += f"; {lost[-1][0]} was lost: Slurm now shows that id as {lost[-1][1]}"
    return _submit(context, run, ActionKind.SUBMIT, why)


def _replace_on_request(context: _Context, run: DesiredRun, jobs: Sequence[ObservedJob]) -> Action:
    """`--replace RUN`: a new job although the spec did not change (a flaky node, a failed
    run with no retries left); a queued or running job of it is cancelled first. Its
    downstream reruns once the new output is there, as after any changed output. Never
    on a partial picture: that could cancel or duplicate a job recon cannot see."""
    if not context.observation.complete or _unseen_job(context, run) is not None:
        why = "not replaced as asked: the cluster was not fully seen; try again"
        return _set(context, run, RunOutcome.WAITING, ActionKind.NOOP, why)
    live = tuple(job.job_id for job in jobs if _live(job))
    kind = ActionKind.REPLACE if live else ActionKind.SUBMIT
    return _submit(context, run, kind, "replaced as asked (--replace)", cancels=live)


def _live(job: ObservedJob) -> bool:
    # A het job with one failed component may still hold the others: it is not over.
    return job.health in ALIVE or not job.finished


def _set(
    context: _Context,
    run: DesiredRun,
    outcome: RunOutcome,
    kind: ActionKind,
    reason: str,
    job: str | None = None,
) -> Action:
    context.outcomes[run.name] = outcome
    if job is not None:
        context.live_jobs[run.name] = job
    return Action(kind=kind, target=run.name, reason=reason, spec_hash=run.spec_hash)


def _blocked_by(context: _Context, name: str) -> Action | None:
    for upstream in context.desired.upstreams[name]:
        outcome = context.outcomes.get(upstream)
        if outcome in (RunOutcome.FAILED, RunOutcome.BLOCKED):
            context.outcomes[name] = RunOutcome.BLOCKED
            word = "failed" if outcome is RunOutcome.FAILED else "is blocked"
            return Action(
                kind=ActionKind.BLOCKED,
                target=name,
                reason=f"upstream {upstream} {word}",
                spec_hash=context.desired.runs[name].spec_hash,
            )
    return None


def _last_success(
    context: _Context, run: DesiredRun, current: list[ObservedJob]
) -> _Success | None:
    """The newest job of the current spec that succeeded: from the journal (which also
    outlives sacct's window) or, before the journal has seen its end, from the cluster.
    The journal wins for a job it judged failed (completed without its outputs)."""
    judged = {r.job_id: r for r in context.history(run.name) if r.final_health is not None}
    candidates: dict[str, SubmissionRecord | None] = {}
    for job in current:
        if job.finished and job.health is Health.SUCCEEDED and job.job_id not in judged:
            candidates[job.job_id] = None
    for record in context.history(run.name):
        if (
            record.spec_hash == run.spec_hash
            and record.job_id is not None
            and record.final_health is Health.SUCCEEDED
        ):
            candidates[record.job_id] = record
    if not candidates:
        return None
    newest = max(candidates, key=_job_order)
    return _Success(newest, candidates[newest])


def _job_order(job_id: str) -> tuple[int, int]:
    return job_order(job_id)


def _staleness(context: _Context, run: DesiredRun, success: _Success) -> str | None:
    """Why a succeeded run is no longer current: an output gone, or an input changed
    since the job read it. None when it is current."""
    for name in run.spec.outputs:
        if context.files.outputs.get((run.name, name), "present") is None:
            return f"output {name} is missing"
    used = success.record.input_versions if success.record is not None else {}
    for name, spec_input in run.spec.inputs.items():
        before = used.get(name)
        now = _input_version(context, run.name, name)
        if before is not None and now is not None and now != before:
            source = spec_input.from_ or spec_input.path
            return f"input {name} ({source}) changed since job {success.job_id} read it"
    return None


def _input_version(context: _Context, run: str, name: str) -> str | None:
    """The version an input has now; None when unknown (its upstream is rerunning, or it
    was not looked at)."""
    desired_run = context.desired.runs[run]
    spec_input = desired_run.spec.inputs[name]
    if spec_input.upstream is None:
        return context.files.inputs.get((run, name))
    upstream, output = spec_input.upstream
    members = desired_run.gathers.get(name)
    if members is not None:
        if any(context.outcomes.get(member) is not RunOutcome.DONE for member in members):
            return None
        return gathered_digest(
            {member: context.files.outputs.get((member, output)) for member in members}
        )
    if context.outcomes.get(upstream) is not RunOutcome.DONE:
        return None  # its new output is not there yet: decided on a later pass
    return context.files.outputs.get((upstream, output))


def _outdated(context: _Context, run: DesiredRun, job: ObservedJob) -> Action:
    """A job of an older spec is still queued or running."""
    if not context.observation.complete:
        return _set(
            context,
            run,
            RunOutcome.WAITING,
            ActionKind.NOOP,
            f"outdated (job {job.job_id} {job.health.value}), but the observation is "
            "incomplete: not replacing",
        )
    if job.health is Health.PENDING or run.spec.update == "replace":
        why = "pending" if job.health is Health.PENDING else "running, update: replace"
        return _submit(
            context,
            run,
            ActionKind.REPLACE,
            f"{_why_submit(context, run)} (job {job.job_id} {why})",
            cancels=(job.job_id,),
        )
    return _set(
        context,
        run,
        RunOutcome.WAITING,
        ActionKind.NOOP,
        f"outdated; job {job.job_id} is running and update: defer lets it finish, "
        "then the new spec runs",
    )


def _failed_attempts(
    context: _Context, run: DesiredRun, current: list[ObservedJob], success: _Success | None
) -> list[tuple[str, str]]:
    """(job id, how it ended) for each failed attempt at the current spec since its last
    success.

    A job Slurm cancelled because its dependency can never be met never ran: it is no
    attempt of its own (its upstream's failure is what counts).
    """
    attempts: dict[str, str] = {}
    for record in context.history(run.name):
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
    since = _job_order(success.job_id) if success is not None else (-1, -1)
    return sorted(
        ((job_id, how) for job_id, how in attempts.items() if _job_order(job_id) > since),
        key=lambda item: _job_order(item[0]),
    )


def _dependency_cancel(reason: str | None) -> bool:
    return reason is not None and reason.startswith("Dependency")


def _after_failure(context: _Context, run: DesiredRun, attempts: list[tuple[str, str]]) -> Action:
    job_id, how = attempts[-1]
    allowed = run.spec.retries + 1
    if len(attempts) < allowed:
        return _submit(
            context,
            run,
            ActionKind.RETRY,
            f"attempt {len(attempts) + 1} of {allowed}: job {job_id} {how}",
        )
    return _set(
        context,
        run,
        RunOutcome.FAILED,
        ActionKind.NOOP,
        f"failed: job {job_id} {how}; no retries left (retries: {run.spec.retries}). "
        "Fix it and commit, which changes its spec",
    )


def _unseen_job(context: _Context, run: DesiredRun) -> str | None:
    """A job of the current spec the journal holds but no observation shows yet.

    Slurm's two views lag behind each other (a job can leave squeue before sacct stores
    its comment), so absence right after submission proves nothing. Only once it has
    stayed unseen for `UNSEEN_GRACE` is it taken as lost, and the run submitted again;
    at once when Slurm shows its id as another job of recon's (``_lost_jobs``).
    """
    observed = {job.job_id for job in context.jobs(run.name)}
    lost = {job_id for job_id, _ in _lost_jobs(context, run)}
    return unseen_job(context.history(run.name), run.spec_hash, observed | lost, context.now)


def _lost_jobs(context: _Context, run: DesiredRun) -> list[tuple[str, str]]:
    """(job id, the tag it shows now) for each unsettled job of the run's current spec
    whose id Slurm now shows carrying another tag (``identity.by_id``): slurmctld killed
    and restarted can lose jobs it had just accepted and hand their ids to new
    submissions. Such a job is lost, not live, and waiting for it is pointless."""
    reused = context.observation.reused_ids
    return [
        (record.job_id, reused[record.job_id])
        for record in context.history(run.name)
        if record.spec_hash == run.spec_hash
        and record.final_health is None
        and record.job_id in reused
    ]


def _unlisted_step(context: _Context, run: DesiredRun) -> str | None:
    """A step of the current spec started lately whose id Slurm has not told yet: it may
    wait for room in its allocation. It is found by its name once listed (and adopted);
    starting it again meanwhile would run it twice."""
    if run.spec.allocation is None:
        return None
    for record in context.history(run.name):
        if (
            record.spec_hash == run.spec_hash
            and record.status is SubmissionStatus.INTENT
            and context.now - record.created_at < UNSEEN_GRACE
        ):
            return (
                f"started in allocation {run.spec.allocation}, but Slurm does not list "
                "its step yet; not starting it again"
            )
    return None


def _fate_unknown(context: _Context, run: DesiredRun) -> bool:
    """The journal holds a job of the current spec whose end it never saw."""
    return any(
        record.spec_hash == run.spec_hash
        and record.status is not SubmissionStatus.REFUSED
        and record.final_health is None
        for record in context.history(run.name)
    )


def _why_submit(context: _Context, run: DesiredRun) -> str:
    earlier = [
        r
        for r in context.history(run.name)
        if r.spec_hash != run.spec_hash and r.status is not SubmissionStatus.REFUSED
    ]
    if not earlier:
        return "not yet run"
    last = earlier[-1]
    if not last.spec_fields:
        return f"spec changed ({last.spec_hash[:8]} -> {run.spec_hash[:8]})"
    return "spec changed"  # the fields that changed travel with the action


def _submit(
    context: _Context,
    run: DesiredRun,
    kind: ActionKind,
    reason: str,
    cancels: tuple[str, ...] = (),
) -> Action:
    """Submit now; upstreams still in flight are waited for through Slurm's afterok.

    Not if no partition of the cluster can hold it: refused here, before anything is
    submitted, with the reason (only runs about to be submitted are checked: a current
    run takes no scheduler resources, so a CPU-only cluster still serves it).

    A run inside an allocation starts as a step in its ready job (``plan_allocations.place``)
    or waits for one. A step cannot wait through afterok, nor a job for a step: where
    either side is a step, the run waits for its upstreams to finish.
    """
    held = _held_originals(context, run)
    if held and not context.observation.complete:
        context.outcomes[run.name] = RunOutcome.WAITING
        return Action(
            kind=ActionKind.NOOP,
            target=run.name,
            reason=f"job {held[-1]} is held in the queue (special exit); not cancelling it "
            "to run again while the observation is incomplete",
            spec_hash=run.spec_hash,
        )
    cancels = (*cancels, *held)
    allocation = run.spec.allocation
    placed = None
    if allocation is not None:
        placed = plan_allocations.place(
            context.allocation_states[allocation], _time_limit(run), run.spec.resources
        )
        unfit = placed.blocked
    else:
        unfit = context.fit.why_not(run.spec.resources) if context.fit is not None else None
        unfit = None if unfit is None else f"does not fit the cluster: {unfit}"
    if unfit is not None:
        context.outcomes[run.name] = RunOutcome.BLOCKED
        return Action(
            kind=ActionKind.BLOCKED, target=run.name, reason=unfit, spec_hash=run.spec_hash
        )
    upstreams = sorted(set(context.desired.upstreams[run.name]))
    pending_upstreams = [up for up in upstreams if context.outcomes.get(up) is RunOutcome.INFLIGHT]
    waiting = [up for up in upstreams if context.outcomes.get(up) is RunOutcome.WAITING]
    why = f"waiting for upstream {', '.join(waiting)}"
    steps = [up for up in pending_upstreams if context.desired.runs[up].spec.allocation]
    if not waiting and pending_upstreams and (allocation is not None or steps):
        waiting = pending_upstreams
        why = (
            f"waiting for upstream {', '.join(waiting)} to finish: a step in an allocation "
            "cannot wait through afterok, nor a job for a step"
        )
    elif not waiting and placed is not None and placed.wait is not None:
        if placed.renew and allocation is not None:
            needs = _time_limit(run)
            assert needs is not None  # only a time limit makes a run wait for renewal
            context.renewals.setdefault(allocation, []).append((run.name, needs))
        waiting, why = [allocation or ""], placed.wait
    if waiting:
        context.outcomes[run.name] = RunOutcome.WAITING
        return Action(kind=ActionKind.NOOP, target=run.name, reason=why, spec_hash=run.spec_hash)
    context.outcomes[run.name] = RunOutcome.INFLIGHT
    live_jobs = tuple(context.live_jobs[up] for up in pending_upstreams if up in context.live_jobs)
    submitted_with = tuple(up for up in pending_upstreams if up not in context.live_jobs)
    changes = _field_changes(context, run) if kind is not ActionKind.RETRY else ()
    return Action(
        kind=kind,
        target=run.name,
        reason=reason,
        spec_hash=run.spec_hash,
        job_ids=cancels,
        after=submitted_with,
        after_jobs=live_jobs,
        changes=changes,
        allocation_job=placed.job_id if placed is not None else None,
        details=_component_lines(run),
    )


def _held_originals(context: _Context, run: DesiredRun) -> tuple[str, ...]:
    """The run's jobs held in SpecialExit: ended for recon (failed) but still queued, and
    one release away from running beside a new job of the run. Whatever submits the run
    again cancels them first."""
    return tuple(
        job.job_id
        for job in context.jobs(run.name)
        if any(row.state is SlurmState.SPECIAL_EXIT for row in job.components)
    )


def _time_limit(run: DesiredRun) -> timedelta | None:
    limit = run.spec.resources.time
    return timedelta(seconds=limit.seconds) if limit is not None else None


def _component_lines(run: DesiredRun) -> tuple[str, ...]:
    """For a heterogeneous run, what each component asks for: they are scheduled
    together, so the plan shows them together."""
    components = run.spec.resources.components
    if not components:
        return ()
    lines = []
    for index, shape in enumerate(components):
        asked = shape.model_dump(mode="json", exclude_defaults=True)
        text = ", ".join(f"{key} {value}" for key, value in asked.items())
        lines.append(f"component {index}: {text or 'cluster defaults'}")
    return tuple(lines)


def _field_changes(context: _Context, run: DesiredRun) -> tuple[FieldChange, ...]:
    """What changed since the run's last job; nothing once a job of this spec was made
    (an output gone missing later is not explained by an old edit)."""
    history = context.history(run.name)
    if not history or history[-1].spec_hash == run.spec_hash:
        return ()
    earlier = [r for r in history if r.spec_hash != run.spec_hash]
    if not earlier[-1].spec_fields:
        return ()
    new = flat_fields(run.spec, run.script_text)
    return tuple(
        FieldChange(field=f, old=o, new=n)
        for f, o, n in changed_fields(earlier[-1].spec_fields, new)
    )
