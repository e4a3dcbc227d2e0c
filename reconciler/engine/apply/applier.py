"""Carry out exactly what a Plan says, in its order, recording intent before each call.

For every submission the journal gets an intent row (durable) BEFORE sbatch, and the job
id AFTER. A crash in between leaves an intent without a job id; the job itself carries
its tag, so the next pass finds it and adopts it instead of submitting again. Cancels
are journalled the same way.

So that 2,000 submissions cost little more than 2,000 sbatch calls, the intents of all
the plan's batch submissions are written ahead in one transaction (one fsync), before
the first sbatch; the job ids are written in groups of ``CONFIRM_EVERY`` (a crash loses
at most that many, and the next pass adopts those jobs by their tags, as after any crash
between sbatch and the journal). Intents of runs never sent (skipped, or an apply that
stopped) are withdrawn at the end.

A scheduler that takes several submissions at once (``ConcurrentScheduler``: Slurm) gets
plain batch submissions that wait for nothing still in flight a few at a time, each with
its intent already durable: the next sbatch is rendered and sent while slurmctld answers
the last. Answers are taken in the plan's order; anything else the plan does (a run
waiting for one in flight, an array, an allocation, an adoption, a cancel of its own)
first waits for every answer. A crash with several in flight leaves, as above, jobs the
journal holds an intent of and the next pass adopts by their tags.

A run started as a step in an allocation keeps one intent of its own, written just
before: an open intent of a step holds its run back (``plan_history.unlisted_step``).

A refused submission (bad partition...) is recorded and skipped; runs that were to wait
for it are skipped too (keep going, like dvc's `on_error="keep-going"`). A transient
scheduler error stops the apply: the next pass will look again. Each action is told to
`report` as soon as it is done, so an apply that stops part-way never hides the jobs it
did submit.
"""

from __future__ import annotations

import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from reconciler.desired.desired import Desired, DesiredRun, flat_fields
from reconciler.engine.apply import allocations as apply_allocations
from reconciler.engine.apply import arrays
from reconciler.engine.apply.faults import fault_point
from reconciler.engine.apply.scripts import render_context
from reconciler.engine.apply.skips import skip_check_files
from reconciler.engine.plan import arrays as plan_arrays
from reconciler.engine.plan.actions import SUBMITTING, Action, ActionKind, Plan, SkipCheck
from reconciler.engine.plan.identity import tag_for
from reconciler.errors import RUNS_DIR_HINT, PermanentSchedulerError, cannot_create
from reconciler.scheduler.base import ConcurrentScheduler, Scheduler, SubmitRequest
from reconciler.scheduler.jobenv import submission_environment
from reconciler.scheduler.render import (
    RenderContext,
    render_batch_script,
    required_directories,
    required_files,
)
from reconciler.scheduler.runfolder import logs_dir
from reconciler.scheduler.tag import Tag
from reconciler.state.journal import Intent, Journal
from reconciler.state.paths import run_dir

Clock = Callable[[], datetime]

CONFIRM_EVERY = 100


@dataclass(frozen=True)
class Done:
    """One thing an apply did (or could not do), as a line for people."""

    line: str
    problem: bool = False  # refused, skipped or a warning: for stderr


@dataclass
class ApplyResult:
    submitted: dict[str, str] = field(default_factory=dict)  # run -> job id
    cancelled: list[str] = field(default_factory=list)  # job ids
    torn_down: list[str] = field(default_factory=list)  # job ids, also in `cancelled`
    adopted: list[str] = field(default_factory=list)  # job ids
    set_up: dict[str, str | None] = field(default_factory=dict)  # allocation -> its step
    refused: dict[str, str] = field(default_factory=dict)  # run -> the scheduler's message
    skipped: dict[str, str] = field(default_factory=dict)  # run -> why
    warnings: list[str] = field(default_factory=list)

    def lines(self) -> list[Done]:
        """Everything it did, kind by kind: for a caller that did not follow `report`."""
        return [
            *(Done(f"submitted {name}: job {job_id}") for name, job_id in self.submitted.items()),
            *(Done(f"cancelled job {job_id}") for job_id in self.cancelled),
            *(Done(f"adopted job {job_id}") for job_id in self.adopted),
            *(Done(_setup_line(name, step)) for name, step in self.set_up.items()),
            *(Done(f"refused {name}: {why}", True) for name, why in self.refused.items()),
            *(Done(f"skipped {name}: {why}", True) for name, why in self.skipped.items()),
            *(Done(f"warning: {why}", True) for why in self.warnings),
        ]

    @property
    def ok(self) -> bool:
        return not self.refused and not self.skipped


@dataclass(frozen=True)
class _InFlight:
    """A submission handed to the scheduler whose answer is not taken yet."""

    run: str
    intent: int
    answer: Future[str]


@dataclass
class Applier:
    plan: Plan
    desired: Desired
    scheduler: Scheduler
    journal: Journal
    code_dir: Path
    clock: Clock
    result: ApplyResult = field(default_factory=ApplyResult)
    report: Callable[[Done], None] = lambda _done: None
    _intents: dict[str, int] = field(default_factory=dict)  # run -> intent not sent yet
    _written: frozenset[int] = frozenset()  # every intent written ahead by this pass
    _confirmed: list[tuple[int, str]] = field(default_factory=list)  # not written yet
    _sweeps: dict[str, list[Action]] = field(default_factory=dict)  # members to submit
    _sent: set[int] = field(default_factory=set)  # member actions carried out in an array
    _tasks: dict[str, set[str]] = field(default_factory=dict)  # array id -> its task ids
    _max_array_size: int | None = None
    _given: dict[str, list[str]] = field(default_factory=dict)  # job id -> runs it was given to
    _flying: deque[_InFlight] = field(default_factory=deque)  # in the plan's order
    _pool: ThreadPoolExecutor | None = None
    _width: int = 1  # submissions in flight at most

    def run(self) -> ApplyResult:
        self._write_ahead()
        for action in self.plan.actions:
            if self._is_member_submit(action):
                sweep = self.desired.runs[action.target].sweep
                assert sweep is not None
                self._sweeps.setdefault(sweep, []).append(action)
        try:
            for action in self.plan.actions:
                self._carry_out(action)
            self._land_all()
        finally:
            self._land_rest()
            self._confirm()
            if self._intents:
                self.journal.withdraw_intents(list(self._intents.values()))
        return self.result

    def _write_ahead(self) -> None:
        """The intents of every batch submission of the plan, in one transaction."""
        runs = [
            self.desired.runs[action.target]
            for action in self.plan.actions
            if action.target_kind == "run"
            and action.kind in SUBMITTING
            and action.allocation_job is None
        ]
        intents = [self._intent(run) for run in runs]
        ids = self.journal.record_intents(intents, self.clock()) if intents else []
        self._intents = {run.name: record_id for run, record_id in zip(runs, ids, strict=True)}
        self._written = frozenset(ids)

    def _intent(self, run: DesiredRun) -> Intent:
        fields = flat_fields(run.spec, run.script_text, run.environment_files)
        return Intent(
            self.plan.project, "run", run.name, run.spec_hash, self.plan.commit, fields, run.code
        )

    def _confirm(self) -> None:
        if self._confirmed:
            self.journal.record_submissions(self._confirmed, self.clock())
            self._confirmed = []

    def _is_member_submit(self, action: Action) -> bool:
        return (
            action.target_kind == "run"
            and action.kind in SUBMITTING
            and action.allocation_job is None
            and self.desired.runs[action.target].member is not None
        )

    def _carry_out(self, action: Action) -> None:
        if id(action) in self._sent:
            return
        if self._flying and not self._may_fly(action):
            self._land_all()
        if self._is_member_submit(action):
            self._submit_members(action)
            return
        if action.kind is ActionKind.ADOPT:
            self._adopt(action)
        elif action.target_kind == "alloc":
            self._carry_out_allocation(action)
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
        elif action.kind in (ActionKind.SUBMIT, ActionKind.RETRY, ActionKind.MAY_RERUN):
            # A job of the run held in the queue (SpecialExit) is cancelled first, intent
            # journalled, so a release can never run it beside the new one.
            self._cancel(action, f"held original of a run submitted again: {action.reason}")
            self._submit(action)

    def _carry_out_allocation(self, action: Action) -> None:
        """Releases are cancels; a replaced allocation's old job is released by an action
        of its own, once no step runs in it, never here."""
        args = (self.desired, self.plan.commit, self.scheduler, self.journal, self.clock)
        if action.kind is ActionKind.CANCEL:
            self._cancel(action, action.reason)
        elif action.kind in (ActionKind.SUBMIT, ActionKind.REPLACE):
            self._record(action.target, apply_allocations.allocate(action, *args))
        elif action.kind is ActionKind.SETUP:
            made = apply_allocations.set_up(
                action, self.desired, self.code_dir, self.scheduler, self.journal, self.clock
            )
            if made.refused is not None:
                self._refused(action.target, made.refused)
            else:
                self.result.set_up[action.target] = made.job_id
                self.report(Done(_setup_line(action.target, made.job_id)))

    def _record(self, name: str, made: apply_allocations.Started) -> None:
        if made.refused is not None:
            self._refused(name, made.refused)
        elif made.job_id is not None:
            self._submitted(name, made.job_id)

    def _submitted(self, name: str, job_id: str) -> None:
        others = list(self._given.get(job_id, ()))
        self._given.setdefault(job_id, []).append(name)
        self.result.submitted[name] = job_id
        self.report(Done(f"submitted {name}: job {job_id}"))
        if others:
            # slurmctld restarted and handed out the id of a job it lost; the next pass
            # sees the id under one tag only and submits the others again.
            self._warn(
                f"job {job_id} was given to {', '.join([*others, name])} in this apply: "
                "the scheduler lost the earlier job (restarted?); the next pass submits "
                "the lost runs again"
            )

    def _refused(self, name: str, why: str) -> None:
        self.result.refused[name] = why
        self.report(Done(f"refused {name}: {why}", problem=True))

    def _skipped(self, name: str, why: str) -> None:
        self.result.skipped[name] = why
        self.report(Done(f"skipped {name}: {why}", problem=True))

    def _warn(self, why: str) -> None:
        self.result.warnings.append(why)
        self.report(Done(f"warning: {why}", problem=True))
        self.journal.log_event(self.plan.project, None, "warning", why, self.clock())

    def _adopt(self, action: Action) -> None:
        assert action.spec_hash is not None
        for job_id in action.job_ids:
            self.journal.record_adopted(
                self.plan.project, action.target_kind, action.target, action.spec_hash,
                job_id, self.clock(), written_now=self._written,
            )  # fmt: skip
            self.result.adopted.append(job_id)
            self.report(Done(f"adopted job {job_id}"))

    def _cancel(self, action: Action, reason: str) -> None:
        for job_id in action.job_ids:
            intent = self.journal.record_cancel_intent(
                self.plan.project, action.target, job_id, reason, self.clock()
            )
            if action.target_kind == "alloc":
                self.scheduler.release(job_id)
            else:
                self.scheduler.cancel(job_id)
            self.journal.record_cancel_done(intent, self.clock())
            self.result.cancelled.append(job_id)
            self.report(Done(f"cancelled job {job_id}"))

    def _submit(self, action: Action) -> None:
        missing = [up for up in action.after if up not in self.result.submitted]
        if missing:
            self._skipped(
                action.target,
                f"upstream {missing[0]} was not submitted"
                if len(missing) == 1
                else f"upstreams {', '.join(missing)} were not submitted",
            )
            return
        run = self.desired.runs[action.target]
        context = render_context(self.desired, run, self.code_dir)
        tag = context.tag
        script = render_batch_script(run, context)
        try:
            _prepare(run, context, action.skip_check)
        except OSError as error:
            # Like a refusal by the scheduler: this run and what waits for it are skipped.
            where = Path(error.filename) if error.filename else Path(context.run_dir)
            self._refused(run.name, str(cannot_create(where, error, RUNS_DIR_HINT)))
            return
        dependencies = self._dependencies(action)
        if action.allocation_job is not None:
            (intent,) = self.journal.record_intents([self._intent(run)], self.clock())
            self._start_step(action, run, script, Path(context.run_dir), tag, intent)
            return
        if run.name in self._intents:
            intent = self._intents.pop(run.name)  # from here on it may have been sent
        else:  # not written ahead: a plan that names a run twice
            (intent,) = self.journal.record_intents([self._intent(run)], self.clock())
        request = SubmitRequest(
            script=script,
            workdir=Path(context.run_dir),
            dependencies=dependencies,
            tag=tag,
            **_environment_of(run),
        )
        pool = self._pool_for(action)
        if pool is not None:
            answer = pool.submit(self.scheduler.submit, request)
            self._flying.append(_InFlight(run.name, intent, answer))
            if len(self._flying) >= self._width:
                self._land(self._flying.popleft())
            return
        try:
            job_id = self.scheduler.submit(request)
        except PermanentSchedulerError as error:
            self.journal.record_refused(intent, str(error), self.clock())
            self._refused(run.name, str(error))
            return
        self._accepted(run.name, intent, job_id)

    def _accepted(self, name: str, intent: int, job_id: str) -> None:
        fault_point("after-sbatch")
        self._confirmed.append((intent, job_id))
        if len(self._confirmed) >= CONFIRM_EVERY:
            self._confirm()
        self._submitted(name, job_id)

    def _may_fly(self, action: Action) -> bool:
        """Whether ``action`` may be sent while the submissions in flight are: a plain
        batch submission waiting for none of them."""
        flying = {flight.run for flight in self._flying}
        return (
            action.target_kind == "run"
            and action.kind in SUBMITTING
            and action.allocation_job is None
            and self.desired.runs[action.target].member is None
            and not flying.intersection(action.after)
        )

    def _pool_for(self, action: Action) -> ThreadPoolExecutor | None:
        """Where ``action``'s sbatch goes when it may overlap others: None to send it here."""
        if not isinstance(self.scheduler, ConcurrentScheduler) or not self._may_fly(action):
            return None
        if self.scheduler.submissions_at_once < 2:
            return None
        if self._pool is None:
            self._width = self.scheduler.submissions_at_once
            self._pool = ThreadPoolExecutor(self._width, thread_name_prefix="sbatch")
        return self._pool

    def _land(self, flight: _InFlight) -> None:
        """Take one answer: the job id, or the scheduler's refusal. Its other errors (a
        transient one stops the apply) are raised, as from a submission sent here."""
        try:
            job_id = flight.answer.result()
        except PermanentSchedulerError as error:
            self.journal.record_refused(flight.intent, str(error), self.clock())
            self._refused(flight.run, str(error))
            return
        self._accepted(flight.run, flight.intent, job_id)

    def _land_all(self) -> None:
        while self._flying:
            self._land(self._flying.popleft())

    def _land_rest(self) -> None:
        """After an error (or at the end): what is still in flight was sent, or may have
        been; each job id that comes back is recorded, and the first error is the one the
        apply stops with. The threads end here."""
        try:
            while self._flying:
                flight = self._flying.popleft()
                try:
                    self._land(flight)
                except Exception:  # the first error is already on its way out
                    continue
        finally:
            if self._pool is not None:
                self._pool.shutdown(wait=True)
                self._pool = None

    def _dependencies(self, action: Action) -> tuple[str, ...]:
        """The jobs ``action`` waits for; every task of an array this apply submitted is
        said once, by the array's id."""
        wanted = [*action.after_jobs, *(self.result.submitted[up] for up in action.after)]
        whole = {top for top, tasks in self._tasks.items() if tasks <= set(wanted)}
        said = [job for job in wanted if job.partition("_")[0] not in whole]
        return tuple(dict.fromkeys([*said, *sorted(whole)]))

    def _submit_members(self, first: Action) -> None:
        """Every member of ``first``'s sweep that this plan submits and that can go now
        (its upstreams submitted), in job arrays: one per set of jobs they wait for, split
        at the scheduler's MaxArraySize."""
        sweep = self.desired.runs[first.target].sweep
        assert sweep is not None
        ready = [
            action
            for action in self._sweeps[sweep]
            if id(action) not in self._sent
            and (action is first or all(up in self.result.submitted for up in action.after))
        ]
        self._sent.update(id(action) for action in ready)
        groups: dict[tuple[str, ...], list[Action]] = {}
        for action in ready:
            if action.kind is ActionKind.REPLACE:
                self._cancel(action, f"replaced: {action.reason}")
            else:
                self._cancel(action, f"held original of a run submitted again: {action.reason}")
            missing = [up for up in action.after if up not in self.result.submitted]
            if missing:
                self._skipped(action.target, f"upstream {missing[0]} was not submitted")
                continue
            groups.setdefault(self._dependencies(action), []).append(action)
        if self._max_array_size is None:
            self._max_array_size = self.scheduler.max_array_size()
        for dependencies, actions in groups.items():
            names = [action.target for action in actions]
            for chunk in plan_arrays.chunks(names, self._max_array_size):
                self._submit_array(sweep, chunk, dependencies)

    def _submit_array(self, sweep: str, names: list[str], dependencies: tuple[str, ...]) -> None:
        """One job array of ``names``: each member's script and the array's map written
        first, then one sbatch."""
        runs = [self.desired.runs[name] for name in names]
        sweep_dir = run_dir(self.desired, runs[0]).parent
        members = plan_arrays.ArrayMap(
            sweep, {i: (run.name, run.spec_hash) for i, run in enumerate(runs)}
        )
        tag = tag_for(self.desired, "run", sweep, members.digest)
        try:
            first_script = self._write_tasks(runs, sweep_dir, members)
        except OSError as error:
            where = Path(error.filename or sweep_dir)
            for run in runs:
                self._refused(run.name, str(cannot_create(where, error, RUNS_DIR_HINT)))
            return
        intents = [self._intent_of(run) for run in runs]
        sweep_spec = self.desired.sweeps.get(sweep)
        directives = arrays.array_directives(first_script, tag, sweep_dir)
        request = SubmitRequest(
            script=arrays.array_script(directives, sweep_dir, members.digest),
            workdir=sweep_dir,
            dependencies=dependencies,
            tag=tag,
            array=plan_arrays.request_for(
                range(len(runs)), sweep_spec.max_parallel if sweep_spec else None
            ),
            **_environment_of(runs[0]),  # a sweep's members share their environment
        )
        try:
            top = self.scheduler.submit(request)
        except PermanentSchedulerError as error:
            for run, intent in zip(runs, intents, strict=True):
                self.journal.record_refused(intent, str(error), self.clock())
                self._refused(run.name, str(error))
            return
        fault_point("after-sbatch")
        task_ids = [f"{top}_{index}" for index in range(len(runs))]
        self._tasks[top] = set(task_ids)
        for run, intent, task_id in zip(runs, intents, task_ids, strict=True):
            self._confirmed.append((intent, task_id))
            self._submitted(run.name, task_id)
        if len(self._confirmed) >= CONFIRM_EVERY:
            self._confirm()

    def _write_tasks(
        self, runs: list[DesiredRun], sweep_dir: Path, members: plan_arrays.ArrayMap
    ) -> str:
        """Each member's directories, input lists and task script, then the array's map;
        returns the first member's batch script (the array takes its directives)."""
        first = ""
        tasks = arrays.task_script(sweep_dir, members.digest, 0).parent
        tasks.mkdir(parents=True, exist_ok=True)
        checks = {
            action.target: action.skip_check for action in self._sweeps.get(runs[0].sweep or "", ())
        }
        for index, run in enumerate(runs):
            context = render_context(self.desired, run, self.code_dir)
            script = render_batch_script(run, context)
            _prepare(run, context, checks.get(run.name))
            arrays.task_script(sweep_dir, members.digest, index).write_text(script)
            logs = arrays.task_logs(sweep_dir, members.digest, index)
            logs.write_text(os.fspath(logs_dir(context.run_dir)))
            first = first or script
        logs_dir(sweep_dir).mkdir(parents=True, exist_ok=True)
        arrays.map_file(sweep_dir, members.digest).write_text(members.to_json())
        return first

    def _intent_of(self, run: DesiredRun) -> int:
        if run.name in self._intents:
            return self._intents.pop(run.name)  # from here on it may have been sent
        (intent,) = self.journal.record_intents([self._intent(run)], self.clock())
        return intent

    def _start_step(
        self, action: Action, run: DesiredRun, script: str, directory: Path, tag: Tag, intent: int
    ) -> None:
        made = apply_allocations.start_run(
            action, self.desired, run, script, directory, tag, self.scheduler
        )
        if made.refused is not None:
            self.journal.record_refused(intent, made.refused, self.clock())
            self._refused(run.name, made.refused)
        elif made.job_id is not None:
            self.journal.record_submitted(intent, made.job_id, self.clock())
            self._submitted(run.name, made.job_id)
        else:
            # The intent stays open: the step is found by its name once Slurm lists it.
            self._submitted(run.name, f"{action.allocation_job} (step not listed yet)")


def _environment_of(run: DesiredRun) -> dict[str, Any]:
    """The request fields that give a job the environment its run declares (a clean base
    and what it passes by name, ``scheduler/jobenv``), or none when it inherits."""
    made = submission_environment(run.spec.environment, os.environ)
    if made is None:
        return {}
    environment, passed = made
    return {"environment": environment, "passed": passed}


def _prepare(run: DesiredRun, context: RenderContext, check: SkipCheck | None = None) -> None:
    """What must exist before sbatch: the run's directories, its inputs' list files, and
    the versions its job compares its inputs with (a run that may rerun); any left from an
    earlier submission are removed, so no other job of the run ever skips."""
    for directory in required_directories(run, context):
        directory.mkdir(parents=True, exist_ok=True)
    for path, text in required_files(run, context).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path, content in skip_check_files(run, context, check).items():
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def _setup_line(name: str, step: str | None) -> str:
    return f"started the setup of {name}" + (f": step {step}" if step else "")
