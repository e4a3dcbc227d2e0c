"""Carry out exactly what a Plan says, in its order, recording intent before each call.

Every act goes through one write-ahead sequence (``writeahead``): an intent row (durable)
BEFORE sbatch, scancel..., and the job id AFTER. A crash in between leaves an intent
without a job id; the job carries its tag, so the next pass adopts it instead of
submitting again. A sweep's members go in the job arrays the plan put them in.

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

import functools
import os
from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from reconciler.desired.desired import Desired, DesiredRun, flat_fields
from reconciler.desired.matrix import sweep_of
from reconciler.engine.apply import allocations as apply_allocations
from reconciler.engine.apply.faults import fault_point
from reconciler.engine.apply.scripts import (
    environment_fields,
    linked_output,
    prepare,
    render_context,
)
from reconciler.engine.apply.writeahead import Sent, write_ahead
from reconciler.engine.plan import arrays as plan_arrays
from reconciler.engine.plan.actions import SUBMITTING, Action, ActionKind, Plan, Raised
from reconciler.engine.plan.identity import tag_for
from reconciler.engine.plan.moves import rename_of
from reconciler.engine.plan.raises import raised_resources
from reconciler.errors import RUNS_DIR_HINT, TransientSchedulerError, cannot_create
from reconciler.scheduler.base import ConcurrentScheduler, Scheduler, SubmitRequest
from reconciler.scheduler.render import array_batch_script, render_batch_script
from reconciler.scheduler.runfolder import logs_dir, map_file, task_logs, task_script
from reconciler.scheduler.tag import Tag
from reconciler.state.journal import Intent, Journal
from reconciler.state.moving import move_folder, move_manifest
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
    moved: dict[str, str] = field(default_factory=dict)  # new name -> old name
    set_up: dict[str, str | None] = field(default_factory=dict)  # allocation -> its step
    refused: dict[str, str] = field(default_factory=dict)  # run -> the scheduler's message
    skipped: dict[str, str] = field(default_factory=dict)  # run -> why
    warnings: list[str] = field(default_factory=list)
    # run -> its requeues since its last success, for a run whose new job resumes it
    requeued: dict[str, int] = field(default_factory=dict)

    def submitted_line(self, name: str, job_id: str) -> str:
        """What a submission is said as: `submitted train: job 42`, and for a requeue
        `(resumes from its checkpoint, requeue 2)` after it."""
        requeues = self.requeued.get(name)
        resumes = f" (resumes from its checkpoint, requeue {requeues})" if requeues else ""
        return f"submitted {name}: job {job_id}{resumes}"

    def lines(self) -> list[Done]:
        """Everything it did, kind by kind: for a caller that did not follow `report`."""
        return [
            *(Done(self.submitted_line(name, job_id)) for name, job_id in self.submitted.items()),
            *(Done(f"cancelled job {job_id}") for job_id in self.cancelled),
            *(Done(f"adopted job {job_id}") for job_id in self.adopted),
            *(Done(f"moved {old} -> {new}") for new, old in self.moved.items()),
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
    # (sweep, number) -> the members of each job array of the plan's not sent yet
    _arrays: dict[tuple[str, int], list[Action]] = field(default_factory=dict)
    _tasks: dict[str, set[str]] = field(default_factory=dict)  # array id -> its task ids
    _given: dict[str, list[str]] = field(default_factory=dict)  # job id -> runs it was given to
    _flying: deque[_InFlight] = field(default_factory=deque)  # in the plan's order
    _pool: ThreadPoolExecutor | None = None
    _width: int = 1  # submissions in flight at most

    def run(self) -> ApplyResult:
        self._move()
        self._write_ahead()
        for action in self.plan.actions:
            if action.array is not None:
                self._arrays.setdefault(_array_of(action), []).append(action)
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

    def _move(self) -> None:
        """The plan's moves, before anything else: each renamed run's folder renamed
        (``state/moving``), its manifest under the new name, then every move journalled in
        one transaction. A folder that cannot be moved stops the apply before any job is
        submitted or cancelled."""
        if not self.plan.moves:
            return
        root = self.desired.root.resolve()
        linked = {move.old_dir for move in self.plan.moves if move.live_jobs}
        for move in self.plan.moves:
            if move.old_dir is None or move.new_dir is None:
                continue
            # a sweep's folder is moved with its first member, found moved by the rest
            move_folder(root, move.old_dir, move.new_dir, link=move.old_dir in linked)
            assert move.old_run_dir is not None and move.new_run_dir is not None
            new_run_dir, old_run_dir = root / move.new_run_dir, root / move.old_run_dir
            move_manifest(new_run_dir, move.new, old_run_dir, move.new_hash)
        fault_point("after-move")
        project = self.desired.project.project
        renames = [rename_of(move) for move in self.plan.moves]
        self.journal.record_renames(project, renames, self.clock())
        for move in self.plan.moves:
            if move.renamed:
                self.result.moved[move.new] = move.old
                self.report(Done(f"moved {move.old} -> {move.new}"))

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
        run = self.desired.runs.get(run.name, run)  # its fields as declared, not as raised
        fields = flat_fields(run.spec, run.script_text, run.environment_files)
        raise_ = self._raised.get(run.name)
        raised = (
            None if raise_ is None else {"memory_mb": raise_.memory_mb, "time_s": raise_.time_s}
        )
        return Intent(
            self.plan.project,
            "run",
            run.name,
            run.spec_hash,
            self.plan.commit,
            fields,
            run.code,
            raised,
        )

    @functools.cached_property
    def _raised(self) -> dict[str, Raised]:
        """run -> what its retry asks for beyond its spec, as the plan says."""
        return {
            action.target: action.raised
            for action in self.plan.actions
            if action.raised is not None and action.target_kind == "run"
        }

    def _confirm(self) -> None:
        if self._confirmed:
            self.journal.record_submissions(self._confirmed, self.clock())
            self._confirmed = []

    def _carry_out(self, action: Action) -> None:
        if action.array is not None and _array_of(action) not in self._arrays:
            return  # it went with its array
        if self._flying and not self._may_fly(action):
            self._land_all()
        if action.array is not None:
            self._submit_arrays(action)
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
        elif action.kind in (
            ActionKind.SUBMIT,
            ActionKind.RETRY,
            ActionKind.REQUEUE,
            ActionKind.MAY_RERUN,
        ):
            # A job of the run held in the queue (SpecialExit) is cancelled first, intent
            # journalled, so a release can never run it beside the new one.
            if action.kind is ActionKind.REQUEUE and action.requeues is not None:
                self.result.requeued[action.target] = action.requeues
            self._cancel(action, f"held original of a run submitted again: {action.reason}")
            self._submit(action)

    def _carry_out_allocation(self, action: Action) -> None:
        """Releases are cancels; a replaced allocation's old job is released by an action
        of its own, once no step runs in it, never here."""
        args = (self.desired, self.plan.commit, self.scheduler, self.journal, self.clock)
        if action.kind is ActionKind.CANCEL:
            self._cancel(action, action.reason)
        elif action.kind in (ActionKind.SUBMIT, ActionKind.REPLACE):
            self._answered(action.target, apply_allocations.allocate(action, *args))
        elif action.kind is ActionKind.SETUP:
            step = apply_allocations.set_up(
                action, self.desired, self.code_dir, self.scheduler, self.journal, self.clock
            )
            if step.refused is not None:
                self._refused(action.target, step.refused)
            else:
                self.result.set_up[action.target] = step.answer
                self.report(Done(_setup_line(action.target, step.answer)))

    def _submitted(self, name: str, job_id: str) -> None:
        others = list(self._given.get(job_id, ()))
        self._given.setdefault(job_id, []).append(name)
        self.result.submitted[name] = job_id
        self.report(Done(self.result.submitted_line(name, job_id)))
        if others:
            # slurmctld restarted and handed out the id of a job it lost; the next pass
            # sees the id under one tag only and submits the others again.
            self._warn(
                f"job {job_id} was given to {', '.join([*others, name])} in this apply: "
                "the scheduler lost the earlier job (restarted?); the next pass submits "
                "the lost runs again"
            )

    def _refused_unsent(self, run: DesiredRun, why: str) -> None:
        """Refused before it was sent, as the scheduler would refuse it: journalled like
        its refusals, so the next pass shows the run refused (``plan.runs.refused``)
        rather than trying it again for ever; what waits for it is skipped."""
        self.journal.record_refused(self._intent_of(run), why, self.clock())
        self._refused(run.name, why)

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
            self._end(action, job_id, reason)
            self.result.cancelled.append(job_id)
            self.report(Done(f"cancelled job {job_id}"))

    def _end(self, action: Action, job_id: str, reason: str) -> None:
        """Cancel a job (release an allocation's). Never refused: an error goes up, and
        its intent stays open for the next pass."""
        end = self.scheduler.release if action.target_kind == "alloc" else self.scheduler.cancel
        write_ahead(
            lambda: self.journal.record_cancel_intent(
                self.plan.project, action.target, job_id, reason, self.clock(), action.cause
            ),
            lambda: end(job_id),
            lambda intent, _: self.journal.record_cancel_done(intent, self.clock()),
            fault="after-scancel",
        )

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
        if action.raised is not None:  # a retry asking for more: the same spec hash
            run = run.with_resources(raised_resources(run.spec.resources, action.raised))
        context = render_context(self.desired, run, self.code_dir)
        tag = context.tag
        if (linked := linked_output(run, context)) is not None:
            self._refused_unsent(run, linked)
            return
        script = render_batch_script(run, context)
        try:
            prepare(run, context, action.skip_check)
        except OSError as error:
            where = Path(error.filename) if error.filename else Path(context.run_dir)
            self._refused_unsent(run, str(cannot_create(where, error, RUNS_DIR_HINT)))
            return
        if action.allocation_job is not None:
            self._start_step(action, run, script, Path(context.run_dir), tag)
            return
        intent = self._intent_of(run)
        request = SubmitRequest(
            script=script,
            workdir=Path(context.run_dir),
            dependencies=self._dependencies(action),
            tag=tag,
            **environment_fields(run),
        )
        pool = self._pool_for(action)
        if pool is not None:
            answer = pool.submit(self.scheduler.submit, request)
            self._flying.append(_InFlight(run.name, intent, answer))
            if len(self._flying) >= self._width:
                self._land(self._flying.popleft())
            return
        self._sbatch(run.name, intent, lambda: self.scheduler.submit(request))

    def _sbatch(self, name: str, intent: int, call: Callable[[], str]) -> None:
        """One batch job's sbatch (``call``, or the answer of one sent in flight), its
        intent durable before it went: its job id is journalled with the next group of
        ``CONFIRM_EVERY``."""
        made = write_ahead(
            lambda: intent,
            call,
            self._confirm_later,
            lambda intent, why: self._refusals([intent], why),
            fault="after-sbatch",
        )
        self._answered(name, made)

    def _confirm_later(self, intent: int, job_id: str) -> None:
        self._confirmed.append((intent, job_id))
        if len(self._confirmed) >= CONFIRM_EVERY:
            self._confirm()

    def _refusals(self, intents: list[int], why: str) -> None:
        for intent in intents:
            self.journal.record_refused(intent, why, self.clock())

    def _answered(self, name: str, made: Sent[str]) -> None:
        if made.refused is not None:
            self._refused(name, made.refused)
        elif made.answer is not None:
            self._submitted(name, made.answer)

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
        self._sbatch(flight.run, flight.intent, flight.answer.result)

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

    def _submit_arrays(self, member: Action) -> None:
        """At the turn of a member whose job array has not gone: that array, and with it
        every other array of its sweep that may go now, in the plan's order (as the plan
        made them: ``plan/arrays.place``)."""
        sweep, number = _array_of(member)
        ready = (key for key, members in self._arrays.items() if self._may_go(members))
        for key in sorted({(sweep, number), *(key for key in ready if key[0] == sweep)}):
            self._submit_members(sweep, self._arrays.pop(key))

    def _may_go(self, members: list[Action]) -> bool:
        """Whether a job array may go now: its members wait for nothing not submitted."""
        return all(up in self.result.submitted for member in members for up in member.after)

    def _submit_members(self, sweep: str, actions: list[Action]) -> None:
        """One job array: each member's held original cancelled, a member whose upstream
        was not submitted skipped, the rest sent."""
        self._check_size(sweep, len(actions))
        ready = []
        for action in actions:
            if action.kind is ActionKind.REPLACE:
                self._cancel(action, f"replaced: {action.reason}")
            else:
                self._cancel(action, f"held original of a run submitted again: {action.reason}")
            missing = [up for up in action.after if up not in self.result.submitted]
            run = self.desired.runs[action.target]
            if missing:
                self._skipped(action.target, f"upstream {missing[0]} was not submitted")
            elif linked := linked_output(run, render_context(self.desired, run, self.code_dir)):
                self._refused_unsent(run, linked)
            else:
                ready.append(action)
        if ready:
            self._submit_array(sweep, ready)

    def _check_size(self, sweep: str, members: int) -> None:
        """A plan made without the scheduler's MaxArraySize did not split its arrays: ask
        it now (an array split on a guess would be refused by sbatch)."""
        shape = self.plan.sweeps.get(sweep)
        if shape is not None and shape.max_array_size is not None:
            return
        size = self.scheduler.max_array_size()
        if members > size:
            raise TransientSchedulerError(
                f"the plan was made without the scheduler's MaxArraySize ({size}) and puts "
                f"{members} members of {sweep} in one job array; the next pass plans again"
            )

    def _submit_array(self, sweep: str, actions: list[Action]) -> None:
        """One job array of the members ``actions`` submit (waiting for the same jobs):
        each member's script and the array's map written first, then one sbatch."""
        runs = [self.desired.runs[action.target] for action in actions]
        sweep_dir = run_dir(self.desired, runs[0]).parent
        members = plan_arrays.ArrayMap(
            sweep, {i: (run.name, run.spec_hash) for i, run in enumerate(runs)}
        )
        tag = tag_for(self.desired, "run", sweep, members.digest)
        try:
            first_script = self._write_tasks(actions, sweep_dir, members)
        except OSError as error:
            where = Path(error.filename or sweep_dir)
            for run in runs:
                self._refused_unsent(run, str(cannot_create(where, error, RUNS_DIR_HINT)))
            return
        tasks = task_script(sweep_dir, members.digest, 0).parent
        sweep_spec = self.desired.sweeps.get(sweep)
        request = SubmitRequest(
            script=array_batch_script(first_script, tag, sweep_dir, tasks),
            workdir=sweep_dir,
            dependencies=self._dependencies(actions[0]),
            tag=tag,
            array=plan_arrays.request_for(
                range(len(runs)), sweep_spec.max_parallel if sweep_spec else None
            ),
            **environment_fields(runs[0]),  # a sweep's members share their environment
        )
        made = write_ahead(
            lambda: [self._intent_of(run) for run in runs],
            lambda: self.scheduler.submit(request),
            self._confirm_tasks,
            self._refusals,
            fault="after-sbatch",
        )
        for index, run in enumerate(runs):
            task = None if made.answer is None else f"{made.answer}_{index}"
            self._answered(run.name, Sent(task, made.refused))

    def _confirm_tasks(self, intents: list[int], top: str) -> None:
        task_ids = [f"{top}_{index}" for index in range(len(intents))]
        self._tasks[top] = set(task_ids)
        self._confirmed.extend(zip(intents, task_ids, strict=True))
        if len(self._confirmed) >= CONFIRM_EVERY:
            self._confirm()

    def _write_tasks(
        self, actions: list[Action], sweep_dir: Path, members: plan_arrays.ArrayMap
    ) -> str:
        """Each member's directories, input lists and task script, then the array's map;
        returns the first member's batch script (the array takes its directives)."""
        first = ""
        tasks = task_script(sweep_dir, members.digest, 0).parent
        tasks.mkdir(parents=True, exist_ok=True)
        for index, action in enumerate(actions):
            run = self.desired.runs[action.target]
            context = render_context(self.desired, run, self.code_dir)
            script = render_batch_script(run, context)
            prepare(run, context, action.skip_check)
            task_script(sweep_dir, members.digest, index).write_text(script)
            logs = task_logs(sweep_dir, members.digest, index)
            logs.write_text(os.fspath(logs_dir(context.run_dir)))
            first = first or script
        logs_dir(sweep_dir).mkdir(parents=True, exist_ok=True)
        map_file(sweep_dir, members.digest).write_text(members.to_json())
        return first

    def _intent_of(self, run: DesiredRun) -> int:
        if run.name in self._intents:
            return self._intents.pop(run.name)  # from here on it may have been sent
        # not written ahead: a plan that names a run twice
        (intent,) = self.journal.record_intents([self._intent(run)], self.clock())
        return intent

    def _start_step(
        self, action: Action, run: DesiredRun, script: str, directory: Path, tag: Tag
    ) -> None:
        """A run's step in its allocation, with an intent of its own written just before."""
        made = write_ahead(
            lambda: self.journal.record_intents([self._intent(run)], self.clock())[0],
            lambda: apply_allocations.start_run(
                action, self.desired, run, script, directory, tag, self.scheduler
            ),
            lambda intent, step: (
                None if step is None else self.journal.record_submitted(intent, step, self.clock())
            ),
            lambda intent, why: self._refusals([intent], why),
            fault="after-srun",
        )
        if made.refused is not None:
            self._refused(run.name, made.refused)
        elif made.answer is not None:
            self._submitted(run.name, made.answer)
        else:
            # The intent stays open: the step is found by its name once Slurm lists it.
            self._submitted(run.name, f"{action.allocation_job} (step not listed yet)")


def _array_of(member: Action) -> tuple[str, int]:
    """The job array the plan put a sweep's member in: its sweep and number."""
    assert member.array is not None
    return sweep_of(member.target) or "", member.array.number


def _setup_line(name: str, step: str | None) -> str:
    return f"started the setup of {name}" + (f": step {step}" if step else "")
