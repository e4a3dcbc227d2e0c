"""Teardowns: cancel a job that holds nodes for nothing. Pure.

A het job one of whose components (or their steps) failed while the others still run,
and a run whose coupled partner ended badly, hold nodes for a job that cannot succeed.
Cancelling them frees the nodes; the run then retries or stays failed.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from reconciler.desired.desired import DesiredRun
from reconciler.engine.plan.actions import Action, ActionKind
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.inputs import PlanInputs, is_live
from reconciler.scheduler.base import ObservedJob, job_order
from reconciler.scheduler.states import ENDED_BADLY, ending


def teardowns(inputs: PlanInputs, chosen: Sequence[str]) -> list[Action]:
    """The teardowns among the chosen runs' unfinished jobs. Only on a complete
    observation (a teardown is a cancel): the caller checks."""
    actions = []
    for name in chosen:
        run = inputs.desired.runs[name]
        for job in inputs.jobs(name):
            if job.finished:
                continue
            why = _broken_component(job) if _coupled_het(run) else None
            cause = Cause.COMPONENT_FAILED
            if why is None:
                why, cause = _partner_down(inputs, run, job), Cause.PARTNER_FAILED
            if why is not None:
                actions.append(
                    Action(
                        kind=ActionKind.TEARDOWN,
                        target=name,
                        cause=cause,
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


def _partner_down(inputs: PlanInputs, run: DesiredRun, job: ObservedJob) -> str | None:
    """A partner whose latest job ended badly while `job` was already there. A partner
    that died before `job` was submitted (the teardown that ended this run's previous
    job, say) is no reason to tear down the new one."""
    submitted = _earliest_submit(job)
    for partner in inputs.partners(run.name):
        jobs = inputs.jobs(partner)
        if not jobs or any(is_live(other) for other in jobs):
            continue
        last = max(jobs, key=lambda other: job_order(other.job_id))
        ended = max((row.end for row in last.components if row.end is not None), default=None)
        if submitted is not None and ended is not None and ended < submitted:
            continue
        if last.health in ENDED_BADLY:
            return f"coupled run {partner} ended {last.health.value} (job {last.job_id})"
    return None


def _earliest_submit(job: ObservedJob) -> datetime | None:
    return min((row.submit for row in job.components if row.submit is not None), default=None)
