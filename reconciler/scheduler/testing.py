"""A scripted ``Scheduler`` for tests, shipped beside the protocol as httpx ships
``MockTransport`` (and ``scheduler/slurm/testing`` ships one for the Slurm adapter's
runner): tests hand the engine a real object with every method of the protocol instead
of writing a fake of their own, and mypy checks it is one.

Each method answers as the test scripts it, by keyword:

- a value: every call returns it (``partitions=()``; ``cancel=None``: cancels are fine);
- an exception: every call raises it (``submit=PermanentSchedulerError("...")``);
- a callable: called with the method's arguments, its return is the answer (it may raise,
  block, or look at the world: the journal, a barrier);
- a list of those: one per call, in order; a call past its end fails the test.

A method nothing was scripted for must not be called: a call raises AssertionError
naming it, as kopf's tests guard their mocks with ``side_effect=Exception('Must not be
called!')``. Every call is recorded before it is answered, in order (``calls``), with a
typed view per method (``submitted``, ``cancelled``, ...), so a call shows even where the
caller swallowed its error (a watch loop goes on after any)::

    scheduler = ScriptedScheduler(submit=job_ids(101), cancel=None)
    Applier(plan, desired, scheduler, journal, code, clock).run()
    assert [request.tag.name for request in scheduler.submitted] == ["a", "b"]

``ScriptedStepScheduler`` also runs steps in allocations (``StepScheduler``, as Slurm
does); ``ScriptedScheduler`` does not, as the local backend does not.
"""

from __future__ import annotations

import itertools
import threading
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import (
    Literal,
    NamedTuple,
    ParamSpec,
    TypeAlias,
    TypedDict,
    TypeVar,
    Unpack,
    cast,
)

from reconciler.scheduler.base import AllocateRequest, Observation, StepRequest, SubmitRequest
from reconciler.scheduler.partitions import Partition

P = ParamSpec("P")
R = TypeVar("R")

# One answer, or a list of them (one per call). Parameters: the method's arguments, then
# what it returns: ``Answer[[SubmitRequest], str]``.
Answer: TypeAlias = Callable[P, R] | R | BaseException | list[Callable[P, R] | R | BaseException]

Method = Literal[
    "observe",
    "accounting",
    "submit",
    "cancel",
    "max_array_size",
    "allocate",
    "release",
    "partitions",
    "containers",
    "start_step",
]
# What a call was given: the one argument of the method (None for those that take none;
# the job ids for ``accounting``).
Argument = datetime | SubmitRequest | AllocateRequest | StepRequest | str | tuple[str, ...] | None


class Call(NamedTuple):
    """One call the scheduler got: ``("cancel", "12")``, ``("submit", SubmitRequest)``."""

    method: Method
    argument: Argument


class Scripts(TypedDict, total=False):
    """How each method of the ``Scheduler`` protocol answers; a method left out must not be
    called."""

    observe: Answer[[datetime], Observation]
    accounting: Answer[[Sequence[str], datetime, datetime], Observation]
    submit: Answer[[SubmitRequest], str]
    cancel: Answer[[str], None]
    max_array_size: Answer[[], int]
    allocate: Answer[[AllocateRequest], str]
    release: Answer[[str], None]
    partitions: Answer[[], tuple[Partition, ...]]


class StepScripts(Scripts, total=False):
    """``Scripts``, and how the ``StepScheduler`` methods answer."""

    containers: Answer[[], frozenset[str]]
    start_step: Answer[[StepRequest], str | None]


class ScriptedScheduler:
    """A ``Scheduler`` answering as scripted (see the module's docstring).

    ``submissions_at_once``: how many ``submit`` calls apply may make at once
    (``ConcurrentScheduler``); 1, the default, sends them one at a time. Calls may come
    from several threads: they are recorded under a lock, and answered outside it.
    """

    def __init__(
        self, *, name: str = "slurm", submissions_at_once: int = 1, **scripts: Unpack[Scripts]
    ) -> None:
        self.name = name
        self.submissions_at_once = submissions_at_once
        self.calls: list[Call] = []
        # Held as StepScripts, whose step keys only a ScriptedStepScheduler is given.
        self._scripts = cast(StepScripts, scripts)
        self._turns: Counter[Method] = Counter()
        self._lock = threading.Lock()

    # -- the Scheduler protocol ----------------------------------------------------------

    def observe(self, since: datetime) -> Observation:
        turn = self._called("observe", since)
        return _answer("observe", self._scripts["observe"], turn, since)

    def accounting(self, job_ids: Sequence[str], since: datetime, until: datetime) -> Observation:
        """``AccountingScheduler``: the ids are what the call records."""
        turn = self._called("accounting", tuple(job_ids))
        return _answer("accounting", self._scripts["accounting"], turn, job_ids, since, until)

    def submit(self, request: SubmitRequest) -> str:
        turn = self._called("submit", request)
        return _answer("submit", self._scripts["submit"], turn, request)

    def cancel(self, job_id: str) -> None:
        turn = self._called("cancel", job_id)
        return _answer("cancel", self._scripts["cancel"], turn, job_id)

    def max_array_size(self) -> int:
        turn = self._called("max_array_size", None)
        return _answer("max_array_size", self._scripts["max_array_size"], turn)

    def allocate(self, request: AllocateRequest) -> str:
        turn = self._called("allocate", request)
        return _answer("allocate", self._scripts["allocate"], turn, request)

    def release(self, job_id: str) -> None:
        turn = self._called("release", job_id)
        return _answer("release", self._scripts["release"], turn, job_id)

    def partitions(self) -> tuple[Partition, ...]:
        turn = self._called("partitions", None)
        return _answer("partitions", self._scripts["partitions"], turn)

    # -- what it was asked ---------------------------------------------------------------

    def methods(self, *only: Method) -> list[Method]:
        """The names of the methods called, in order (of these alone, when named)."""
        return [call.method for call in self.calls if not only or call.method in only]

    def calls_to(self, *methods: Method) -> list[Call]:
        """The calls to these methods, in order."""
        return [call for call in self.calls if call.method in methods]

    @property
    def observed_since(self) -> list[datetime]:
        """Each ``observe``'s ``since``."""
        return [a for m, a in self.calls if m == "observe" and isinstance(a, datetime)]

    @property
    def submitted(self) -> list[SubmitRequest]:
        return [a for m, a in self.calls if m == "submit" and isinstance(a, SubmitRequest)]

    @property
    def cancelled(self) -> list[str]:
        return [a for m, a in self.calls if m == "cancel" and isinstance(a, str)]

    @property
    def allocated(self) -> list[AllocateRequest]:
        return [a for m, a in self.calls if m == "allocate" and isinstance(a, AllocateRequest)]

    @property
    def released(self) -> list[str]:
        return [a for m, a in self.calls if m == "release" and isinstance(a, str)]

    def _called(self, method: Method, argument: Argument) -> int:
        """Record a call; its turn (0 for the method's first call), or AssertionError when
        nothing was scripted for the method."""
        with self._lock:
            self.calls.append(Call(method, argument))
            turn = self._turns[method]
            self._turns[method] += 1
        if method not in self._scripts:
            given = "" if argument is None else f" (given {argument!r})"
            raise AssertionError(
                f"{self.name} scheduler: {method} must not be called here: nothing was "
                f"scripted for it{given}"
            )
        return turn


class ScriptedStepScheduler(ScriptedScheduler):
    """A ``ScriptedScheduler`` that also runs steps in allocations (``StepScheduler``)."""

    def __init__(
        self, *, name: str = "slurm", submissions_at_once: int = 1, **scripts: Unpack[StepScripts]
    ) -> None:
        super().__init__(name=name, submissions_at_once=submissions_at_once)
        self._scripts = scripts

    def containers(self) -> frozenset[str]:
        turn = self._called("containers", None)
        return _answer("containers", self._scripts["containers"], turn)

    def start_step(self, request: StepRequest) -> str | None:
        turn = self._called("start_step", request)
        return _answer("start_step", self._scripts["start_step"], turn, request)

    @property
    def started(self) -> list[StepRequest]:
        """Each ``start_step``'s request."""
        return [a for m, a in self.calls if m == "start_step" and isinstance(a, StepRequest)]


def job_ids(first: int = 101) -> Callable[[object], str]:
    """An answer for ``submit`` or ``allocate``: job ids in order from ``first``, as Slurm
    hands them out (one for both methods gives one sequence)."""
    numbers = itertools.count(first)
    return lambda _request: str(next(numbers))


def _answer(
    method: Method, script: Answer[P, R], turn: int, /, *args: P.args, **kwargs: P.kwargs
) -> R:
    answer = script
    if isinstance(answer, list):
        if turn >= len(answer):
            raise AssertionError(
                f"{method} was called {turn + 1} times; {len(answer)} answers were scripted"
            )
        answer = answer[turn]
    if isinstance(answer, BaseException):
        raise answer
    if callable(answer):
        return answer(*args, **kwargs)
    return answer
