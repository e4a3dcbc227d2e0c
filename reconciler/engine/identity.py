"""A job is recon's by its id too: journaled ids first, tags second. Pure.

Observation finds recon's jobs by their tag. A job whose comment someone changed
(``scontrol update jobid=N comment=...``) loses its tag but not its id, and the journal
still holds that id: it is the same job, and submitting its run again beside it would
run the run twice. So an untagged job of this user whose id the journal recorded for a
job it has not seen end is taken as that run's job again, under the journal's tag; the
plan says so in a note.

Not so for an id Slurm shows under another recon tag (another run's, spec's or project's):
that id was handed out again after slurmctld lost the job, and the journaled job is lost
(``plan._lost_jobs``). Nor for an untagged job submitted well after sbatch gave recon that
id: a reused id again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from reconciler.scheduler.base import Observation, ObservedJob, UntaggedJob, job_order
from reconciler.scheduler.tag import Tag
from reconciler.state.records import SubmissionRecord

# Slurm's submit time and the journal's clock may differ a little (another host).
CLOCK_SLACK = timedelta(minutes=1)


def claim_by_id(
    observation: Observation, records: Sequence[SubmissionRecord], project: str
) -> Observation:
    """The observation with the project's untagged journaled jobs added as its own."""
    untagged = {job.job_id: job for job in observation.untagged}
    tagged = {job.job_id for job in observation.jobs}
    claimed: dict[str, ObservedJob] = {}
    for record in records:
        job = untagged.get(record.job_id or "")
        if (
            job is None
            or record.project != project
            or record.final_health is not None
            or job.job_id in tagged
            or not _submitted_by(job, record)
        ):
            continue
        tag = Tag(project=project, kind=record.kind, name=record.name, spec_hash=record.spec_hash)
        claimed[job.job_id] = job.tagged(tag)  # the newest record of an id wins
    if not claimed:
        return observation
    jobs = sorted([*observation.jobs, *claimed.values()], key=lambda job: job_order(job.job_id))
    return observation.model_copy(update={"jobs": tuple(jobs)})


def claimed_notes(observation: Observation, project: str) -> tuple[str, ...]:
    """What the plan says of each job taken as recon's by its id alone."""
    untagged = {job.job_id for job in observation.untagged}
    return tuple(
        f"Job {job.job_id} of {job.tag.kind} {job.tag.name} no longer carries its recon tag "
        f"in its comment (changed by hand?): it is still {job.tag.name}'s job, known by its "
        f"id from the journal, and is not submitted again. Its tag was {job.tag.format()}."
        for job in observation.jobs
        if job.job_id in untagged and job.tag.project == project
    )


def _submitted_by(job: UntaggedJob, record: SubmissionRecord) -> bool:
    """Whether the job could be the one recon submitted: not submitted after sbatch
    returned its id to recon (then Slurm handed the id out again)."""
    submits = [row.submit for row in job.rows if row.submit is not None and not row.is_step]
    return not submits or min(submits) <= record.updated_at + CLOCK_SLACK

