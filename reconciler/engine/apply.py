"""Carry out exactly what a Plan says, in its order, recording intent before each call.

For every submission the journal gets an intent row (durable) BEFORE sbatch, and the job
id AFTER. A crash in between leaves an intent without a job id; the job itself carries
its tag, so the next pass finds it and adopts it instead of submitting again. Cancels
are journalled the same way.

A refused submission (bad partition...) is recorded and skipped; runs that were to wait
for it are skipped too (keep going, like dvc's `on_error="keep-going"`). A transient
scheduler error stops the apply: the next pass will look again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from reconciler.engine.actions import Action, ActionKind, Plan
from reconciler.engine.faults import fault_point
from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.base import Scheduler, SubmitRequest
from reconciler.scheduler.render import RenderContext, render_batch_script, required_directories
from reconciler.scheduler.tag import Tag
from reconciler.spec.desired import Desired, DesiredRun, flat_fields
from reconciler.state.journal import Journal
from reconciler.state.paths import input_paths, run_dir

Clock = Callable[[], datetime]


@dataclass
class ApplyResult:
    submitted: dict[str, str] = field(default_factory=dict)  # run -> job id
    cancelled: list[str] = field(default_factory=list)  # job ids
    torn_down: list[str] = field(default_factory=list)  # job ids, also in `cancelled`
    adopted: list[str] = field(default_factory=list)  # job ids
    refused: dict[str, str] = field(default_factory=dict)  # run -> the scheduler's message
    skipped: dict[str, str] = field(default_factory=dict)  # run -> why

    @property
    def ok(self) -> bool:
        return not self.refused and not self.skipped


@dataclass
class Applier:
    plan: Plan
    desired: Desired
    scheduler: Scheduler
    journal: Journal
    code_dir: Path
    clock: Clock
    result: ApplyResult = field(default_factory=ApplyResult)

    def run(self) -> ApplyResult:
        for action in self.plan.actions:
            self._carry_out(action)
        return self.result

    def _carry_out(self, action: Action) -> None:
        if action.kind is ActionKind.ADOPT:
            self._adopt(action)
        elif action.kind is ActionKind.CANCEL:
            self._cancel(action, action.reason)
        elif action.kind is ActionKind.TEARDOWN:
            self.journal.log_event(
                self.plan.project, action.target, "teardown", action.reason, self.clock()
            )
            self._cancel(action, f"teardown: {action.reason}")
            self.result.torn_down.extend(action.job_ids)
        elif action.kind is ActionKind.REPLACE:
            self._cancel(action, f"replaced: {action.reason}")
            self._submit(action)
        elif action.kind in (ActionKind.SUBMIT, ActionKind.RETRY):
            self._submit(action)

    def _adopt(self, action: Action) -> None:
        assert action.spec_hash is not None
        for job_id in action.job_ids:
            self.journal.record_adopted(
                self.plan.project, action.target_kind, action.target, action.spec_hash,
                job_id, self.clock(),
            )  # fmt: skip
            self.result.adopted.append(job_id)

    def _cancel(self, action: Action, reason: str) -> None:
        for job_id in action.job_ids:
            intent = self.journal.record_cancel_intent(
                self.plan.project, action.target, job_id, reason, self.clock()
            )
            self.scheduler.cancel(job_id)
            self.journal.record_cancel_done(intent, self.clock())
            self.result.cancelled.append(job_id)

    def _submit(self, action: Action) -> None:
        missing = [up for up in action.after if up not in self.result.submitted]
        if missing:
            self.result.skipped[action.target] = f"upstream {', '.join(missing)} was not submitted"
            return
        run = self.desired.runs[action.target]
        tag = Tag(project=self.plan.project, kind="run", name=run.name, spec_hash=run.spec_hash)
        context = self._context(run, tag)
        script = render_batch_script(run, context)
        for directory in required_directories(run, context):
            directory.mkdir(parents=True, exist_ok=True)
        dependencies = (*action.after_jobs, *(self.result.submitted[up] for up in action.after))
        intent = self.journal.record_intent(
            self.plan.project, "run", run.name, run.spec_hash, self.plan.commit,
            flat_fields(run.spec, run.script_text), self.clock(),
        )  # fmt: skip
        request = SubmitRequest(
            script=script, workdir=Path(context.run_dir), dependencies=dependencies, tag=tag
        )
        try:
            job_id = self.scheduler.submit(request)
        except PermanentSchedulerError as error:
            self.journal.record_refused(intent, str(error), self.clock())
            self.result.refused[run.name] = str(error)
            return
        fault_point("after-sbatch")
        self.journal.record_submitted(intent, job_id, self.clock())
        self.result.submitted[run.name] = job_id

    def _context(self, run: DesiredRun, tag: Tag) -> RenderContext:
        return RenderContext(
            project=self.plan.project,
            code_dir=self.code_dir,
            run_dir=run_dir(self.desired, run),
            tag=tag,
            input_paths=input_paths(self.desired, run),
        )
