"""A run's `on_oom` and `on_timeout`: what its retries ask for after running out of memory
or time.

`on_oom: {memory: x2, max: 64GiB}` multiplies the memory a retry asks for after an
OUT_OF_MEMORY attempt, once per such attempt since the run's last success, up to `max`
(and the largest node that holds it: ``engine/plan/raises``); `on_timeout: {time: x1.5,
max: "24:00:00"}` does the same with the time limit after a TIMEOUT. The raised value
goes with the retry, never into the spec: neither field is part of the spec hash, and a
success with raised resources keeps the run current.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import JsonSchemaValue

from reconciler.desired.resources import Duration, Memory, SpecValue

MOST = 100.0  # the largest factor taken: a typo (x20 for x2.0) is not a cluster's worth


@dataclass(frozen=True)
class Factor(SpecValue):
    """How much a retry multiplies a resource by: `x2`, `x1.5` (or the bare number)."""

    value: float

    json_schema: ClassVar[JsonSchemaValue] = {
        "anyOf": [
            {"type": "string", "pattern": r"^x[0-9]+(\.[0-9]+)?$"},
            {"type": "number", "exclusiveMinimum": 1, "maximum": MOST},
        ],
        "description": "`x2`, `x1.5`: what each retry multiplies it by (more than 1).",
    }

    @classmethod
    def parse(cls, raw: object) -> Factor:
        number: float | None = None
        if isinstance(raw, str) and raw.strip().lower().startswith("x"):
            try:
                number = float(raw.strip()[1:])
            except ValueError:
                number = None
        elif isinstance(raw, int | float) and not isinstance(raw, bool):
            number = float(raw)
        if number is None or not 1 < number <= MOST:
            raise ValueError(
                f"expected a factor more than 1 and at most {MOST:g}, written x2 or x1.5, "
                f"got {raw!r}"
            )
        return cls(number)

    @property
    def text(self) -> str:
        return f"x{self.value:g}"

    def canonical(self) -> object:
        return self.value


class OnOom(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    memory: Factor = Field(description="What each retry after OUT_OF_MEMORY multiplies it by.")
    max: Memory | None = Field(
        None, description="The most memory a retry asks for (and never past the largest node)."
    )


class OnTimeout(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    time: Factor = Field(description="What each retry after TIMEOUT multiplies it by.")
    max: Duration | None = Field(None, description="The longest time limit a retry asks for.")
