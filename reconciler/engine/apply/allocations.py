"""Carrying out what a plan says about allocations: hold one, set it up, start a run's step
in it. Each journals its intent before the scheduler call, like every submission.

Setup and runs' steps are started detached (``StepScheduler.start_step``): they outlive
this process, and a later pass observes them by their names. A backend that cannot run
steps (the local one) never gets here: the planner blocks allocations there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

from reconciler.desired.desired import Desired, DesiredAllocation, DesiredRun, flat_fields
from reconciler.engine.apply.writeahead import Sent, write_ahead
from reconciler.engine.plan.actions import Action
from reconciler.engine.plan.allocations.placement import holds_gpus
from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.base import (
    AllocateRequest,
    Scheduler,
    StepRequest,
    StepScheduler,
)
from reconciler.scheduler.jobenv import submission_environment
from reconciler.scheduler.runfolder import logs_dir, step_script
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag
from reconciler.state.journal import Journal
from reconciler.state.paths import state_dir, tag_for

Clock = Callable[[], datetime]


def allocate(
    action: Action,
    desired: Desired,
    commit: str | None,
    scheduler: Scheduler,
    journal: Journal,
    clock: Clock,
) -> Sent[str]:
    allocation = desired.allocations[action.target]
    tag = _tag(desired, allocation)
    return write_ahead(
        lambda: journal.record_intent(
            tag.project,
            "alloc",
            allocation.name,
            allocation.spec_hash,
            commit,
            flat_fields(allocation.spec),
            clock(),
        ),
        lambda: scheduler.allocate(AllocateRequest(allocation=allocation.spec, tag=tag)),
        lambda intent, job_id: journal.record_submitted(intent, job_id, clock()),
        lambda intent, why: journal.record_refused(intent, why, clock()),
        fault="after-salloc",
    )


def set_up(
    action: Action,
    desired: Desired,
    code_dir: Path,
    scheduler: Scheduler,
    journal: Journal,
    clock: Clock,
) -> Sent[str | None]:
    """The allocation's setup commands as one script, started in the job the action names
    (on each of its nodes). Its output goes to <state_dir>/allocations/<name>/."""
    allocation = desired.allocations[action.target]
    (job_id,) = action.job_ids
    directory = state_dir(desired) / "allocations" / allocation.name
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / f"setup-{allocation.spec_hash}.sh"
    script.write_text("set -euo pipefail\n" + "\n".join(allocation.spec.setup) + "\n")
    request = StepRequest(
        allocation_id=job_id,
        script=script,
        workdir=code_dir,
        log_dir=directory,
        shape=None,
        container=allocation.spec.container,
        container_name=allocation.name,
        tag=_tag(desired, allocation),
    )
    return write_ahead(
        lambda: journal.record_setup(
            request.tag.project, allocation.name, allocation.spec_hash, job_id, clock()
        ),
        lambda: _steps(scheduler).start_step(request),
        lambda setup, step: (
            None if step is None else journal.record_setup_step(setup, step, clock())
        ),
        lambda setup, why: journal.record_setup_end(setup, Health.FAILED, None, why, clock()),
        fault="after-srun",
    )


def start_run(
    action: Action,
    desired: Desired,
    run: DesiredRun,
    script: str,
    run_dir: Path,
    tag: Tag,
    scheduler: Scheduler,
) -> str | None:
    """The run's batch script (its #SBATCH lines are comments to bash) as a step in the
    allocation's job the plan chose: the step's id, None while it is not listed. Its
    output goes to the run's logs/slurm-<job>.<step>. The caller journals the intent
    first (``write_ahead``)."""
    assert action.allocation_job is not None and run.allocation is not None
    allocation = desired.allocations[run.allocation]
    logs = logs_dir(run_dir)
    logs.mkdir(parents=True, exist_ok=True)
    path = step_script(run_dir, run.spec_hash)
    path.write_text(script)
    request = StepRequest(
        allocation_id=action.allocation_job,
        script=path,
        workdir=run_dir,
        log_dir=logs,
        shape=run.spec.resources,
        container=allocation.spec.container,
        container_name=allocation.name,
        allocation_gpus=holds_gpus(allocation.spec.resources),
        tag=tag,
        environment=_environment_of(run),
    )
    return _steps(scheduler).start_step(request)


def _tag(desired: Desired, allocation: DesiredAllocation) -> Tag:
    return tag_for(desired, "alloc", allocation.name, allocation.spec_hash)


def _steps(scheduler: Scheduler) -> StepScheduler:
    if not isinstance(scheduler, StepScheduler):
        raise PermanentSchedulerError(
            f"the {scheduler.name} backend cannot run steps inside an allocation"
        )
    return scheduler


def _environment_of(run: DesiredRun) -> dict[str, str] | None:
    """A run's step environment: the clean base and what it passes (``scheduler/jobenv``);
    None when it inherits recon's. A passed value stays in memory: srun hands it on."""
    made = submission_environment(run.spec.environment, os.environ)
    return None if made is None else made[0]
