"""What an apply did, as it goes: each thing done told as a line at once (``Done``, to
``report``), and the whole kept for the caller (``ApplyResult``). ``Reporting`` is what
every act of engine/apply/applier.py ends in: a job id taken, a refusal or a skip
recorded, the job ids taken so far journalled (``_confirm``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from reconciler.desired.desired import Desired
from reconciler.engine.apply.writeahead import Sent
from reconciler.engine.plan.actions import Plan
from reconciler.scheduler.base import Scheduler
from reconciler.state.journal import Journal

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Done:
    """One thing an apply did (or could not do), as a line for people."""

    line: str
    problem: bool = False  # refused, skipped or a warning: for stderr
    # the run a submission's line tells of; None for anything else (the line says it)
    submitted: str | None = field(default=None, compare=False)


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
            *(
                Done(self.submitted_line(name, job_id), submitted=name)
                for name, job_id in self.submitted.items()
            ),
            *(Done(f"cancelled job {job_id}") for job_id in self.cancelled),
            *(Done(f"adopted job {job_id}") for job_id in self.adopted),
            *(Done(f"moved {old} -> {new}") for new, old in self.moved.items()),
            *(Done(setup_line(name, step)) for name, step in self.set_up.items()),
            *(Done(f"refused {name}: {why}", True) for name, why in self.refused.items()),
            *(Done(f"skipped {name}: {why}", True) for name, why in self.skipped.items()),
            *(Done(f"warning: {why}", True) for why in self.warnings),
        ]

    @property
    def ok(self) -> bool:
        return not self.refused and not self.skipped


@dataclass
class Reporting:
    """An apply's bookkeeping: what it did, told and kept, and the job ids journalled."""

    plan: Plan
    desired: Desired
    scheduler: Scheduler
    journal: Journal
    code_dir: Path
    clock: Clock
    result: ApplyResult = field(default_factory=ApplyResult)
    report: Callable[[Done], None] = lambda _done: None
    _confirmed: list[tuple[int, str]] = field(default_factory=list)  # not written yet
    _given: dict[str, list[str]] = field(default_factory=dict)  # job id -> runs it was given to

    def _confirm(self) -> None:
        if self._confirmed:
            self.journal.record_submissions(self._confirmed, self.clock())
            self._confirmed = []

    def _submitted(self, name: str, job_id: str) -> None:
        others = list(self._given.get(job_id, ()))
        self._given.setdefault(job_id, []).append(name)
        self.result.submitted[name] = job_id
        self.report(Done(self.result.submitted_line(name, job_id), submitted=name))
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

    def _refusals(self, intents: list[int], why: str) -> None:
        for intent in intents:
            self.journal.record_refused(intent, why, self.clock())

    def _answered(self, name: str, made: Sent[str]) -> None:
        if made.refused is not None:
            self._refused(name, made.refused)
        elif made.answer is not None:
            self._submitted(name, made.answer)


def setup_line(name: str, step: str | None) -> str:
    return f"started the setup of {name}" + (f": step {step}" if step else "")
