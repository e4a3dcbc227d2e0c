"""A run's `retries`: one number for any failure, or a budget per kind of ending.

`retries: 3` is what it always was: three more attempts after failed ones, whatever
ended them, one budget shared by every kind. `retries: {failure: 1, timeout: 3,
preemption: unlimited}` gives each kind its own budget; a kind it does not name gets
none (0). `unlimited` is taken for preemption and node failure only: those are the
cluster's doing, while a run that always fails, times out or runs out of memory would
run forever. Which kind a failed attempt is comes from how its job ended
(``engine/plan/budgets.kind_of``); neither form is part of the spec hash.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from enum import StrEnum
from typing import ClassVar

from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema

from reconciler.desired.resources import SpecValue

MOST = 100  # the most retries one budget holds, as for the plain number
UNLIMITED = "unlimited"


class RetryKind(StrEnum):
    """The kinds of failed attempt, each with a budget of its own in the mapping form."""

    FAILURE = "failure"  # anything else: a non-zero exit, no outputs, a cancel by a person
    TIMEOUT = "timeout"  # Slurm's TIMEOUT: the time limit was reached
    PREEMPTION = "preemption"  # PREEMPTED
    NODE_FAILURE = "node_failure"  # NODE_FAIL, BOOT_FAIL
    OUT_OF_MEMORY = "out_of_memory"  # OUT_OF_MEMORY

    @property
    def in_words(self) -> str:
        """As a budget is named in plans: "2 of 3 timeout retries left"."""
        return _WORDS[self]


_WORDS = {
    RetryKind.FAILURE: "failure",
    RetryKind.TIMEOUT: "timeout",
    RetryKind.PREEMPTION: "preemption",
    RetryKind.NODE_FAILURE: "node failure",
    RetryKind.OUT_OF_MEMORY: "out-of-memory",
}
# The kinds that may be `unlimited`: not the run's own doing.
UNBOUNDED = frozenset({RetryKind.PREEMPTION, RetryKind.NODE_FAILURE})
_KINDS = ", ".join(kind.value for kind in RetryKind)
_EXAMPLE = "{failure: 1, timeout: 3, preemption: unlimited}"


def _count_schema(kind: RetryKind | None) -> JsonSchemaValue:
    count = {"type": "integer", "minimum": 0, "maximum": MOST}
    if kind not in UNBOUNDED:
        return count
    return {"anyOf": [count, {"const": UNLIMITED}]}


@dataclass(frozen=True)
class Retries(SpecValue):
    """A plain number (``count``: one budget shared by every kind), or a budget per kind
    (``budgets``, in kind order; a kind not listed has 0; None: unlimited)."""

    count: int | None = 0
    budgets: tuple[tuple[RetryKind, int | None], ...] = ()

    json_schema: ClassVar[JsonSchemaValue] = {
        "anyOf": [
            {**_count_schema(None), "description": "retries after any failure, one budget"},
            {
                "type": "object",
                "additionalProperties": False,
                "properties": {kind.value: _count_schema(kind) for kind in RetryKind},
                "description": "a budget per kind; a kind left out gets 0",
            },
        ],
        "description": "How many times to resubmit after a failed attempt: a number (any "
        f"failure), or budgets per kind, e.g. `{_EXAMPLE}`. Not part of the spec hash.",
    }

    @property
    def shared(self) -> bool:
        """A plain number: every kind draws from the one budget."""
        return self.count is not None

    def allowed(self, kind: RetryKind) -> int | None:
        """The retries ``kind`` may draw (the shared count for a plain number); None:
        unlimited."""
        if self.count is not None:
            return self.count
        return dict(self.budgets).get(kind, 0)

    def lists(self, kind: RetryKind) -> bool:
        """Whether the mapping form names ``kind`` (a plain number names them all)."""
        return self.count is not None or kind in dict(self.budgets)

    @classmethod
    def parse(cls, raw: object) -> Retries:
        if isinstance(raw, dict):
            return cls(None, _budgets(raw))
        if isinstance(raw, int) and not isinstance(raw, bool):
            return cls(_count(raw, ""), ())
        raise ValueError(
            f"expected a whole number (retries after any failure, 0 to {MOST}) or budgets "
            f"per kind ({_EXAMPLE}), got {_shown(raw)}"
        )

    @property
    def text(self) -> str:
        if self.count is not None:
            return str(self.count)
        pairs = (f"{kind.value}: {UNLIMITED if n is None else n}" for kind, n in self.budgets)
        return "{" + ", ".join(pairs) + "}"

    def canonical(self) -> object:
        return self.form()

    def form(self) -> object:
        """As written: the number, or kind -> budget (`unlimited` as the word)."""
        if self.count is not None:
            return self.count
        return {kind.value: UNLIMITED if n is None else n for kind, n in self.budgets}

    def _serialize(self, info: core_schema.SerializationInfo) -> object:
        return self.form()


def _budgets(raw: dict[object, object]) -> tuple[tuple[RetryKind, int | None], ...]:
    found: dict[RetryKind, int | None] = {}
    for key, value in raw.items():
        kind = RetryKind.__members__.get(str(key).upper()) if isinstance(key, str) else None
        if kind is None:
            close = difflib.get_close_matches(str(key), [k.value for k in RetryKind], n=1)
            hint = f"did you mean {close[0]}?" if close else f"the kinds are {_KINDS}"
            raise ValueError(f"{key} is not a kind of retry: {hint}")
        found[kind] = _budget(kind, value)
    return tuple((kind, found[kind]) for kind in RetryKind if kind in found)


def _budget(kind: RetryKind, value: object) -> int | None:
    where = f"{kind.value}: "
    if value == UNLIMITED:
        if kind in UNBOUNDED:
            return None
        raise ValueError(
            f"{where}`{UNLIMITED}` is taken for preemption and node_failure only (the "
            f"cluster's doing): a run that always ends in a {kind.in_words} would be "
            f"submitted forever; give a number from 0 to {MOST}"
        )
    if isinstance(value, int) and not isinstance(value, bool):
        return _count(value, where)
    unlimited = f" or `{UNLIMITED}`" if kind in UNBOUNDED else ""
    raise ValueError(
        f"{where}expected a whole number from 0 to {MOST}{unlimited}, got {_shown(value)}"
    )


def _count(value: int, where: str) -> int:
    if not 0 <= value <= MOST:
        raise ValueError(f"{where}must be from 0 to {MOST}, got {value}")
    return value


def _shown(value: object) -> str:
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (yes/no)"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, list | tuple):
        return "a list"
    return repr(value)
