"""Which jobs are this deployment's: the tags it writes, and its share of an observation.

A deployment is one project in one place (its state directory, ``state.paths.deployment``).
The scheduler reports every recon job of this user; everything above this module sees only
the deployment's own, so no plan, settle, teardown, prune or release can ever reach a job
another clone of the same project submitted. Those are kept aside only to be named in the
plan (``elsewhere``).
"""

from __future__ import annotations

from dataclasses import dataclass

from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.scheduler.tag import Tag, TagKind
from reconciler.spec.desired import Desired
from reconciler.state.paths import deployment


def tag_for(desired: Desired, kind: TagKind, name: str, spec_hash: str) -> Tag:
    """The tag a job of this deployment's run or allocation carries."""
    return Tag(
        project=desired.project.project,
        deployment=deployment(desired),
        kind=kind,
        name=name,
        spec_hash=spec_hash,
    )


@dataclass(frozen=True)
class Share:
    """An observation split by owner: this deployment's jobs, and the live jobs of the
    same project that other deployments (other clones, other folders) own."""

    own: Observation
    elsewhere: tuple[ObservedJob, ...]


def share_of(observation: Observation, project: str, deployment_id: str) -> Share:
    own = tuple(job for job in observation.jobs if job.tag.owned_by(project, deployment_id))
    elsewhere = tuple(
        job
        for job in observation.jobs
        if job.tag.project == project and job.tag.deployment != deployment_id and not job.finished
    )
    return Share(observation.model_copy(update={"jobs": own}), elsewhere)
