"""Plain batch submissions sent a few at a time, for a scheduler that takes several at
once (``ConcurrentScheduler``: Slurm): each waits for nothing still in flight and has
its intent already durable, so the next sbatch is rendered and sent while slurmctld
answers the last. Answers are taken in the plan's order (engine/apply/applier.py)."""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

from reconciler.engine.apply.results import Reporting
from reconciler.engine.plan.actions import SUBMITTING, Action
from reconciler.scheduler.base import ConcurrentScheduler


@dataclass(frozen=True)
class InFlight:
    """A submission handed to the scheduler whose answer is not taken yet."""

    run: str
    intent: int
    answer: Future[str]


@dataclass
class Flights(Reporting):
    """The submissions in flight, in the plan's order, and the threads that send them."""

    _flying: deque[InFlight] = field(default_factory=deque)  # in the plan's order
    _pool: ThreadPoolExecutor | None = None
    _width: int = 1  # submissions in flight at most

    def _sbatch(self, name: str, intent: int, call: Callable[[], str]) -> None:
        """One batch job's sbatch (the applier's: its intent, call and answer)."""
        raise NotImplementedError

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

    def _land(self, flight: InFlight) -> None:
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
