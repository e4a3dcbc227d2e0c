"""Observation on every backend finds recon's jobs by their tag, and by nothing else."""

from __future__ import annotations

from reconciler.scheduler.tag import Tag
from tests.contract.harness import SPEC_HASH, Harness, final


def test_jobs_are_found_by_the_tag_they_were_submitted_with(backend: Harness) -> None:
    other = f"{backend.project}x"
    impostor = Tag(
        project=other, deployment="0123456789ab", kind="run", name="lookalike", spec_hash=SPEC_HASH
    )
    # The script's own header claims another tag; the request's tag is the job's.
    mine = backend.submit(
        "mine",
        "true",
        header=[f"--comment={impostor.format()}", f"--job-name={impostor.job_name}"],
    )
    theirs = backend.submit("mine", "true", tag=backend.tag("mine", project=other))
    backend.wait("mine", final)
    observation = backend.observe()
    assert observation.complete, observation.problems
    assert [job.job_id for job in observation.find(backend.project, "mine")] == [mine]
    assert [job.job_id for job in observation.find(other, "mine")] == [theirs]
    assert observation.find(other, "lookalike") == ()
    (job,) = observation.find(backend.project, "mine")
    assert job.tag == backend.tag("mine")
    assert job.components[0].name == f"{backend.project}.mine"
