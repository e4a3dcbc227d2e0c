"""A sweep's job arrays as the plan sees them: which index runs which member.

The files that hold a map and a task's script are written, and read back, by
``engine/apply/arrays.py``, where ``scheduler/runfolder.py`` says; here is only what a
plan decides and reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property

from reconciler.scheduler.base import ArrayRequest, ObservedJob


@dataclass(frozen=True)
class ArrayMap:
    """Which member each index of one job array runs: index -> (member name, spec hash)."""

    sweep: str
    members: Mapping[int, tuple[str, str]]

    @cached_property
    def digest(self) -> str:
        """The array's tag hash: the same members at the same indices, the same digest."""
        return hashlib.sha256(self.to_json().encode()).hexdigest()[:16]

    def to_json(self) -> str:
        rows = [[index, *self.members[index]] for index in sorted(self.members)]
        return json.dumps({"sweep": self.sweep, "members": rows}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> ArrayMap:
        data = json.loads(text)
        members = {int(index): (str(name), str(digest)) for index, name, digest in data["members"]}
        return cls(str(data["sweep"]), members)


def chunks(members: Sequence[str], size: int) -> list[list[str]]:
    """Members in arrays of at most ``size`` (indices 0..size-1 each)."""
    return [list(members[start : start + size]) for start in range(0, len(members), size)]


def request_for(indices: Sequence[int], max_parallel: int | None) -> ArrayRequest:
    return ArrayRequest(indices=tuple(indices), max_parallel=max_parallel)


def is_array(job: ObservedJob) -> bool:
    return any(row.array_task is not None for row in job.rows)
