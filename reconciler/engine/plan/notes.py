"""The notes a plan shows beside its actions: what it saw that it does not act on. Pure."""

from __future__ import annotations

import posixpath
from collections.abc import Mapping, Sequence

from reconciler.desired.desired import DesiredRun, EnvironmentKind
from reconciler.engine.plan.actions import SUBMITTING, Action
from reconciler.engine.plan.inputs import PlanInputs
from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.scheduler.jobenv import BASE_LANG, BASE_PATH
from reconciler.scheduler.states import Health


def incomplete_notes(observation: Observation) -> tuple[str, ...]:
    if observation.complete:
        return ()
    why = "; ".join(observation.problems) or "part of the cluster state could not be read"
    return (
        f"Observation incomplete: {why}. This plan cancels, replaces and prunes nothing, "
        "and does not resubmit runs whose last job's state is unknown.",
    )


def claimed_notes(observation: Observation) -> tuple[str, ...]:
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


def coupled_waits(inputs: PlanInputs, chosen: Sequence[str]) -> list[str]:
    """Coupled runs of which one holds nodes while another still queues."""
    notes = []
    for name in chosen:
        running = [j for j in inputs.jobs(name) if j.health is Health.RUNNING]
        for partner in inputs.partners(name):
            waiting = [j for j in inputs.jobs(partner) if j.health is Health.PENDING]
            if running and waiting:
                notes.append(
                    f"Coupled runs: {name} runs (job {running[-1].job_id}) while {partner} "
                    f"still waits in the queue (job {waiting[-1].job_id})."
                )
    return notes


def elsewhere_note(project: str, jobs: Sequence[ObservedJob]) -> tuple[str, ...]:
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
    return posixpath.commonpath(known) if len(known) > 1 else known[0]


# What a job that declares no environment starts from (``scheduler/jobenv``), in words.
CLEAN_BASE = f"PATH={BASE_PATH}, HOME, USER, LOGNAME and LANG={BASE_LANG}"


def environment_notes(
    runs: Mapping[str, DesiredRun], chosen: Sequence[str], actions: Sequence[Action]
) -> tuple[str, ...]:
    """What a plan says of its runs' environments: in every plan, the runs that take the
    environment of whoever applies; in a plan that submits runs declaring none, that
    their jobs start from the clean base (before this release, they took the applier's)."""
    return (*inheriting_notes(runs, chosen), *bare_notes(runs, actions))


def inheriting_notes(runs: Mapping[str, DesiredRun], chosen: Sequence[str]) -> tuple[str, ...]:
    """The runs that take the environment of whoever applies (from the runs alone)."""
    inheriting = [
        runs[name].sweep or name
        for name in chosen
        if runs[name].shape.environment is EnvironmentKind.INHERIT
    ]
    if not inheriting:
        return ()
    return (
        f"Results depend on who applies: {_some(inheriting)} "
        f"{'takes' if len(set(inheriting)) == 1 else 'take'} the environment of "
        "the process that runs recon (environment: {inherit: true}), so a shell with "
        "a conda env, cron or recon watch give their jobs different PATH, PYTHONPATH "
        "and modules. Declare the environment instead (docs/specs.md, environment).",
    )


def bare_notes(runs: Mapping[str, DesiredRun], actions: Sequence[Action]) -> tuple[str, ...]:
    """The runs submitted with no environment declared (from the plan's actions: a
    re-plan of a few runs says it again over the whole plan)."""
    bare = [
        runs[action.target].sweep or action.target
        for action in actions
        if action.kind in SUBMITTING
        and action.target_kind == "run"
        and action.target in runs
        and runs[action.target].shape.environment is EnvironmentKind.NONE
    ]
    if not bare:
        return ()
    return (
        f"No environment declared for {_some(bare)}: their jobs start from a clean "
        f"one ({CLEAN_BASE}), not from the environment of whoever applies. Declare "
        "what they need (environment: in recon.yaml's defaults or the run), or "
        "environment: {inherit: true} to keep the applier's (docs/specs.md, environment).",
    )


def _some(names: Sequence[str]) -> str:
    """`run prepare`, `runs prepare, train, evaluate and 3 more` (a sweep named once)."""
    unique = list(dict.fromkeys(names))  # a sweep's members are named by their sweep
    if len(unique) == 1:
        return f"run {unique[0]}"
    shown = ", ".join(unique[:3])
    more = len(unique) - 3
    return f"runs {shown}" + (f" and {more} more" if more > 0 else "")
