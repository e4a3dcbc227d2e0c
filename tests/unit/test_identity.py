"""A job is recon's by its journaled id too: an untagged job of the journal's is claimed
under the journal's tag, and the plan says so."""

from __future__ import annotations

from datetime import timedelta

from reconciler.engine.identity import claim_by_id, claimed_notes
from reconciler.engine.plan import plan
from reconciler.scheduler.base import JobRecord, Observation, UntaggedJob
from reconciler.scheduler.states import Health, SlurmState
from tests.planning import NOW, PROJECT, desired, hash_of, observed, record, run


def untagged(
    job_id: str, state: SlurmState = SlurmState.RUNNING, submit_after: int = 0
) -> UntaggedJob:
    row = JobRecord(
        job_id=job_id, top_id=job_id, state=state, source="squeue",
        submit=NOW + timedelta(seconds=submit_after),
    )  # fmt: skip
    return UntaggedJob(job_id=job_id, rows=(row,))


def seen(*jobs: UntaggedJob) -> Observation:
    return observed().model_copy(update={"untagged": jobs})


def test_an_untagged_job_the_journal_knows_is_the_runs_job_and_not_submitted_again() -> None:
    state = desired(run("a"))
    records = [record("a", hash_of(state, "a"), "40")]
    observation = claim_by_id(seen(untagged("40"), untagged("41")), records, PROJECT)
    (job,) = observation.jobs
    assert (job.job_id, job.tag.name, job.tag.spec_hash) == ("40", "a", hash_of(state, "a"))
    result = plan(state, observation, records, NOW + timedelta(hours=1), scheduler="slurm")
    (action,) = result.actions
    assert (action.kind.value, action.reason) == ("no-op", "in progress: job 40 running")
    assert result.notes == (
        "Job 40 of run a no longer carries its recon tag in its comment (changed by hand?): "
        "it is still a's job, known by its id from the journal, and is not submitted again. "
        f"Its tag was recon1:p:run:a:{hash_of(state, 'a')}.",
    )
    assert claimed_notes(observation, "other") == ()


def test_settled_other_projects_and_later_submitted_jobs_are_not_claimed() -> None:
    state = desired(run("a"))
    digest = hash_of(state, "a")
    settled = record("a", digest, "40", final=Health.SUCCEEDED)
    other = record("a", digest, "41").model_copy(update={"project": "other"})
    reused = record("a", digest, "42")  # sbatch returned 42 at NOW; this 42 came 2 minutes later
    observation = seen(untagged("40"), untagged("41"), untagged("42", submit_after=120))
    assert claim_by_id(observation, [settled, other, reused], PROJECT).jobs == ()


def test_the_newest_record_of_an_id_is_the_one_claimed() -> None:
    state = desired(run("a"), run("b"))
    records = [record("a", hash_of(state, "a"), "40"), record("b", hash_of(state, "b"), "40")]
    (job,) = claim_by_id(seen(untagged("40")), records, PROJECT).jobs
    assert job.tag.name == "b"
