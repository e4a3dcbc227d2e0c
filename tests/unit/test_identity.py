"""A job is the deployment's by its journaled id too: an untagged job of the journal's is
claimed under the journal's tag (and the plan says so); a journaled id Slurm shows under
another recon tag is reused, its journaled job lost."""

from __future__ import annotations

from dataclasses import replace
from datetime import timedelta

from reconciler.engine.plan import plan
from reconciler.engine.plan.identity import split_by_owner
from reconciler.scheduler.base import JobRecord, Observation, UntaggedJob
from reconciler.scheduler.states import Health, SlurmState
from tests.planning import NOW, PROJECT, desired, hash_of, job, observed, record, run

HERE = "0123456789ab"  # the deployment tests.planning's jobs carry


def untagged(
    job_id: str, state: SlurmState = SlurmState.RUNNING, submit_after: int = 0
) -> UntaggedJob:
    row = JobRecord(
        job_id=job_id, top_id=job_id, state=state, source="squeue",
        submit=NOW + timedelta(seconds=submit_after),
    )  # fmt: skip
    return UntaggedJob(job_id=job_id, rows=(row,))


def seen(*jobs: UntaggedJob, tagged: Observation | None = None) -> Observation:
    return (tagged or observed()).model_copy(update={"untagged": jobs})


def test_an_untagged_job_the_journal_knows_is_the_runs_job_and_not_submitted_again() -> None:
    state = desired(run("a"))
    records = [record("a", hash_of(state, "a"), "40")]
    own = split_by_owner(seen(untagged("40"), untagged("41")), PROJECT, HERE, records).own
    (claimed,) = own.jobs
    assert (claimed.job_id, claimed.tag.name, claimed.tag.deployment) == ("40", "a", HERE)
    result = plan(state, own, records, NOW + timedelta(hours=1), scheduler="slurm")
    (action,) = result.actions
    assert (action.kind.value, action.reason) == ("no-op", "in progress: job 40 running")
    assert result.notes == (
        "Job 40 of run a no longer carries its recon tag in its comment (changed by hand?): "
        "it is still a's job, known by its id from the journal, and is not submitted again. "
        f"Its tag was recon2:p:{HERE}:run:a:{hash_of(state, 'a')}.",
    )


def test_settled_other_projects_and_later_submitted_jobs_are_not_claimed() -> None:
    state = desired(run("a"))
    digest = hash_of(state, "a")
    settled = record("a", digest, "40", final=Health.SUCCEEDED)
    other = replace(record("a", digest, "41"), project="other")
    reused = record("a", digest, "42")  # sbatch returned 42 at NOW; this 42 came 2 minutes later
    observation = seen(untagged("40"), untagged("41"), untagged("42", submit_after=120))
    assert split_by_owner(observation, PROJECT, HERE, [settled, other, reused]).own.jobs == ()


def test_the_newest_record_of_an_id_is_the_one_claimed() -> None:
    state = desired(run("a"), run("b"))
    records = [record("a", hash_of(state, "a"), "40"), record("b", hash_of(state, "b"), "40")]
    (claimed,) = split_by_owner(seen(untagged("40")), PROJECT, HERE, records).own.jobs
    assert claimed.tag.name == "b"


def test_a_journaled_id_under_another_deployments_tag_is_reused_not_ours() -> None:
    state = desired(run("a"))
    theirs = job("a", hash_of(state, "a"), SlurmState.RUNNING, "3127")
    theirs = theirs.model_copy(
        update={"tag": theirs.tag.model_copy(update={"deployment": "f" * 12})}
    )
    records = [record("a", hash_of(state, "a"), "3127")]
    share = split_by_owner(observed(theirs), PROJECT, HERE, records)
    assert share.own.jobs == ()
    assert share.own.reused_ids == {"3127": theirs.tag.format()}
    result = plan(state, share.own, records, NOW, scheduler="slurm")
    (action,) = result.actions
    assert action.kind.value == "submit" and "3127 was lost" in action.reason
