"""Which jobs are this deployment's: its share of an observation (the tags it writes are
``state/paths.tag_for``'s).

A deployment is one project in one place (its state directory, ``state.paths.deployment``).
The scheduler reports every recon job of this user; everything above this module sees only
the deployment's own, so no plan, settle, teardown, prune or release can ever reach a job
another clone of the same project submitted. Those are kept aside only to be named in the
plan (``elsewhere``).

A job is the deployment's by its id too: journaled ids first, tags second (``by_id``).
A job whose comment someone changed (``scontrol update jobid=N comment=...``) loses its
tag but not its id, and the journal still holds that id: it is the same job, and
submitting its run again beside it would run the run twice. So a job with no recon tag at
all whose id the journal recorded for a job it has not seen end is taken as that run's
job again, under the journal's tag; the plan says so in a note.

Not so for an id Slurm shows under another recon tag (another deployment's, project's,
run's or spec's): slurmctld killed and restarted can lose jobs it had just accepted and
hand their ids to new submissions, so the journaled job is lost, and its run is submitted
again at once (``Observation.reused_ids``, read by the planner). Nor for an untagged job
submitted well after sbatch gave recon that id: the id was handed out again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from types import MappingProxyType

from reconciler.engine.plan.arrays import ArrayMap, is_array
from reconciler.scheduler.base import Observation, ObservedJob, UntaggedJob, job_order
from reconciler.scheduler.runfolder import ARRAYS_DIR
from reconciler.scheduler.tag import Tag
from reconciler.state.records import Renames, SubmissionRecord

# Slurm's submit time and the journal's clock may differ a little (another host). Not
# scheduler/base.JOURNAL_CLOCK_MARGIN, which widens a window to read (an hour costs only
# rows): this bound decides whether a job with a journaled id is the one recon submitted,
# and the wider it is, the likelier a job Slurm gave the recycled id to soon after is
# claimed as recon's.
SUBMIT_CLOCK_SKEW = timedelta(minutes=1)


@dataclass(frozen=True)
class Ownership:
    """An observation split by owner: this deployment's jobs, and the live jobs of the
    same project that other deployments (other clones, other folders) own."""

    own: Observation
    elsewhere: tuple[ObservedJob, ...]


def split_by_owner(
    observation: Observation,
    project: str,
    deployment_id: str,
    records: Sequence[SubmissionRecord] = (),
    arrays: Mapping[str, ArrayMap] = MappingProxyType({}),
    renames: Renames | None = None,
) -> Ownership:
    """``records``: the journal's, whose ids make jobs the deployment's too (``by_id``);
    ``arrays``: the map of each of its job arrays, by the array's id (``split_arrays``);
    ``renames``: runs renamed, whose jobs tagged with the old name are the new one's."""
    observation = split_arrays(observation, project, deployment_id, arrays)
    if renames:
        observation = renamed(observation, project, deployment_id, renames, records)
    own = tuple(job for job in observation.jobs if job.tag.owned_by(project, deployment_id))
    elsewhere = tuple(
        job
        for job in observation.jobs
        if job.tag.project == project and job.tag.deployment != deployment_id and not job.finished
    )
    mine = observation.model_copy(update={"jobs": own})
    return Ownership(by_id(mine, observation, records, project, deployment_id), elsewhere)


def split_arrays(
    observation: Observation, project: str, deployment_id: str, arrays: Mapping[str, ArrayMap]
) -> Observation:
    """Every job array of the deployment's as one job per task, each under the tag of the
    member its map says the task runs: from here on a sweep's member is a run like any
    other, its task (``123_4``) its job. An array whose map is unknown stays whole, under
    the sweep's name, and makes the observation incomplete: its tasks cannot be told
    apart, so no member is submitted and nothing cancelled while it is so."""
    jobs: list[ObservedJob] = []
    problems: list[str] = []
    split = False
    for job in observation.jobs:
        if not job.tag.owned_by(project, deployment_id) or not is_array(job):
            jobs.append(job)
            continue
        known = arrays.get(job.job_id)
        if known is None:
            problems.append(
                f"job array {job.job_id} of {job.tag.name}: its member map "
                f"({ARRAYS_DIR}/{job.tag.spec_hash}.json in its directory) cannot be read"
            )
            jobs.append(job)  # whole, under the sweep's name: its members wait (plan)
            continue
        for index, task in job.tasks().items():
            member = known.members.get(index)
            if member is None:
                problems.append(f"job array {job.job_id}: task {index} is in no member map")
                continue
            name, spec_hash = member
            tag = job.tag.model_copy(update={"name": name, "spec_hash": spec_hash})
            jobs.append(task.model_copy(update={"tag": tag}))
        split = True
    if not split and not problems:
        return observation
    update: dict[str, object] = {"jobs": tuple(jobs)}
    if problems:
        update.update(complete=False, problems=(*observation.problems, *problems))
    return observation.model_copy(update=update)


def renamed(
    observation: Observation,
    project: str,
    deployment_id: str,
    renames: Renames,
    records: Sequence[SubmissionRecord] = (),
) -> Observation:
    """The deployment's jobs of a renamed run under the new name and hash: a job keeps
    the tag it was submitted with, and a move (``engine/plan/moves``) adopts it. Not a
    job the journal holds under the old name still (``records``, read under today's
    names): one submitted after the move, for a run that has the old name again."""
    kept = {
        record.job_id
        for record in records
        if record.job_id is not None
        and renames.of(record.kind, record.name, record.spec_hash) is not None
    }
    jobs = []
    for job in observation.jobs:
        now = renames.of(job.tag.kind, job.tag.name, job.tag.spec_hash)
        if now is not None and job.tag.owned_by(project, deployment_id) and job.job_id not in kept:
            job = job.model_copy(
                update={"tag": job.tag.model_copy(update={"name": now[0], "spec_hash": now[1]})}
            )
        jobs.append(job)
    return observation.model_copy(update={"jobs": tuple(jobs)})


def by_id(
    own: Observation,
    whole: Observation,
    records: Sequence[SubmissionRecord],
    project: str,
    deployment_id: str,
) -> Observation:
    """``own`` with the journal's untagged jobs claimed as the deployment's, and the
    journaled ids Slurm shows under another tag in ``whole`` listed as reused."""
    untagged = {job.job_id: job for job in whole.untagged}
    shown = {job.job_id: job.tag for job in whole.jobs}
    claimed: dict[str, ObservedJob] = {}
    reused: dict[str, str] = {}
    for record in records:
        if record.job_id is None or record.project != project or record.final_health is not None:
            continue
        tag = Tag(
            project=project,
            deployment=deployment_id,
            kind=record.kind,
            name=record.name,
            spec_hash=record.spec_hash,
        )
        other = shown.get(record.job_id)
        job = untagged.get(record.job_id)
        if other is not None and other != tag:
            reused[record.job_id] = other.format()
        elif job is not None and _submitted_by(job, record):
            claimed[job.job_id] = job.tagged(tag)  # the newest record of an id wins
    if not claimed and not reused:
        return own
    jobs = sorted([*own.jobs, *claimed.values()], key=lambda job: job_order(job.job_id))
    return own.model_copy(update={"jobs": tuple(jobs), "reused_ids": reused})


def _submitted_by(job: UntaggedJob, record: SubmissionRecord) -> bool:
    """Whether the job could be the one recon submitted: not submitted after sbatch
    returned its id to recon (then Slurm handed the id out again)."""
    submits = [row.submit for row in job.rows if row.submit is not None and not row.is_step]
    return not submits or min(submits) <= record.updated_at + SUBMIT_CLOCK_SKEW
