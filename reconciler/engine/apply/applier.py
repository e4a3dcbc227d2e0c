"""Carry out exactly what a Plan says, in its order, recording intent before each call.

Every act goes through one write-ahead sequence (``writeahead``): an intent row (durable)
BEFORE sbatch, scancel..., and the job id AFTER. A crash in between leaves an intent
without a job id; the job carries its tag, so the next pass adopts it instead of
submitting again. A sweep's members go in the job arrays the plan put them in.

So that 2,000 submissions cost little more than 2,000 sbatch calls, the intents of all
the plan's batch submissions are written ahead in one transaction (one fsync), before
the first sbatch, each with the digest and #SBATCH options of the script it is to be
sent (rendered there, once, and sent as rendered); the job ids are written in groups of
``CONFIRM_EVERY`` (a crash loses at most that many, and the next pass adopts those jobs
by their tags, as after any crash between sbatch and the journal). Intents of runs never
sent (skipped, or an apply that stopped) are withdrawn at the end.

A scheduler that takes several submissions at once (``ConcurrentScheduler``: Slurm) gets
plain batch submissions that wait for nothing still in flight a few at a time, each with
its intent already durable: the next sbatch is sent while slurmctld answers
the last. Answers are taken in the plan's order; anything else the plan does (a run
waiting for one in flight, an array, an allocation, an adoption, a cancel of its own)
first waits for every answer. A crash with several in flight leaves, as above, jobs the
journal holds an intent of and the next pass adopts by their tags.

A run started as a step in an allocation keeps one intent of its own, written just
before: an open intent of a step holds its run back (``engine/plan/unseen.unlisted_step``).

A refused submission (bad partition...) is recorded and skipped; runs that were to wait
for it are skipped too (keep going, like dvc's `on_error="keep-going"`). A transient
scheduler error stops the apply: the next pass will look again. Each action is told to
`report` as soon as it is done, so an apply that stops part-way never hides the jobs it
did submit.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from reconciler.desired.desired import DesiredRun, flat_fields
from reconciler.desired.matrix import sweep_of
from reconciler.engine.apply import allocations as apply_allocations
from reconciler.engine.apply.flights import Flights, InFlight
from reconciler.engine.apply.moves import move_runs
from reconciler.engine.apply.results import ApplyResult as ApplyResult  # callers' import
from reconciler.engine.apply.results import Done as Done
from reconciler.engine.apply.results import setup_line
from reconciler.engine.apply.scripts import (
    environment_fields,
    linked_output,
    prepare,
    render_context,
    script_sent,
)
from reconciler.engine.apply.writeahead import Sent, write_ahead
from reconciler.engine.plan import arrays as plan_arrays
from reconciler.engine.plan.actions import SUBMITTING, Action, ActionKind, Raised
from reconciler.engine.plan.raises import raised_resources
from reconciler.errors import RUNS_DIR_HINT, TransientSchedulerError, cannot_create
from reconciler.scheduler.base import SubmitRequest
from reconciler.scheduler.render import array_batch_script, render_batch_script
from reconciler.scheduler.runfolder import logs_dir, map_file, task_logs, task_script
from reconciler.scheduler.tag import Tag
from reconciler.state.journal import Intent
from reconciler.state.paths import run_dir, tag_for

CONFIRM_EVERY = 100


@dataclass
class Applier(Flights):
    _intents: dict[str, int] = field(default_factory=dict)  # run -> intent not sent yet
    # run -> the batch script its intent journalled the digest of: the one it is sent
    _scripts: dict[str, str] = field(default_factory=dict)
    _written: frozenset[int] = frozenset()  # every intent written ahead by this pass
    # (sweep, number) -> the members of each job array of the plan's not sent yet
    _arrays: dict[tuple[str, int], list[Action]] = field(default_factory=dict)
    _tasks: dict[str, set[str]] = field(default_factory=dict)  # array id -> its task ids

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
        """The plan's moves, before anything else (engine/apply/moves.py)."""
        for move in move_runs(self.plan, self.desired, self.journal, self.clock):
            self.result.moved[move.new] = move.old
            self.report(Done(f"moved {move.old} -> {move.new}"))

    def _write_ahead(self) -> None:
        """The intents of every batch submission of the plan, in one transaction, each
        with the script it is to be sent (``_script``)."""
        runs = [
            self.desired.runs[action.target]
            for action in self.plan.actions
            if action.target_kind == "run"
            and action.kind in SUBMITTING
            and action.allocation_job is None
        ]
        intents = [self._intent(run, self._script(run.name)) for run in runs]
        ids = self.journal.record_intents(intents, self.clock()) if intents else []
        self._intents = {run.name: record_id for run, record_id in zip(runs, ids, strict=True)}
        self._written = frozenset(ids)

    def _intent(self, run: DesiredRun, script: str, *, sbatch: bool = True) -> Intent:
        """``run``'s intent, with the digest of the ``script`` it is to be sent and the
        #SBATCH options rendered in it (none for a step: srun reads no directive)."""
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
            script_sent(script, sbatch=sbatch),
        )

    def _script(self, name: str) -> str:
        """The batch script of run ``name`` as it is sent (with what its retry raised),
        rendered once: its intent journals its digest before sbatch, and the job is sent
        those bytes, never a second rendering."""
        script = self._scripts.get(name)
        if script is None:
            run = self.desired.runs[name]
            if (raise_ := self._raised.get(name)) is not None:  # the same spec hash
                run = run.with_resources(raised_resources(run.spec.resources, raise_))
            script = render_batch_script(run, render_context(self.desired, run, self.code_dir))
            self._scripts[name] = script
        return script

    @functools.cached_property
    def _raised(self) -> dict[str, Raised]:
        """run -> what its retry asks for beyond its spec, as the plan says."""
        return {
            action.target: action.raised
            for action in self.plan.actions
            if action.raised is not None and action.target_kind == "run"
        }

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
                self.report(Done(setup_line(action.target, step.answer)))

    def _refused_unsent(self, run: DesiredRun, why: str) -> None:
        """Refused before it was sent, as the scheduler would refuse it: journalled like
        its refusals, so the next pass shows the run refused (``plan.runs.refused``)
        rather than trying it again for ever; what waits for it is skipped."""
        self.journal.record_refused(self._intent_of(run), why, self.clock())
        self._refused(run.name, why)

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
        script = self._script(run.name)
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
            self._flying.append(InFlight(run.name, intent, answer))
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

    def _confirm_later(self, intent: int, job_id: str) -> None:
        self._confirmed.append((intent, job_id))
        if len(self._confirmed) >= CONFIRM_EVERY:
            self._confirm()

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
            script = self._script(run.name)
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
        intent = self._intent(run, self._script(run.name))
        (record_id,) = self.journal.record_intents([intent], self.clock())
        return record_id

    def _start_step(
        self, action: Action, run: DesiredRun, script: str, directory: Path, tag: Tag
    ) -> None:
        """A run's step in its allocation, with an intent of its own written just before."""
        made = write_ahead(
            lambda: self.journal.record_intents(
                [self._intent(run, script, sbatch=False)], self.clock()
            )[0],
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
