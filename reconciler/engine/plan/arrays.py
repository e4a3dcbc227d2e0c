"""A sweep's job arrays as the plan sees them: which array each member it submits goes
in (``place``), and which index runs which member of an array observed (``ArrayMap``).

The files that hold a map and a task's script are written by ``engine/apply/applier.py``
and read back by ``engine/observe/arrays.py``, where ``scheduler/runfolder.py`` says; here
is only what a plan decides and reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import TypeVar

from reconciler.desired.matrix import sweep_of
from reconciler.engine.plan.actions import SUBMITTING, Action, ArrayPlace
from reconciler.scheduler.base import ArrayRequest, ObservedJob

T = TypeVar("T")


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


def place(actions: Sequence[Action], max_array_size: int | None) -> list[Action]:
    """The actions, each sweep member submitted as a batch job given the job array it
    goes in (``Action.array``).

    At the first of a sweep's members, every member of the sweep that waits for nothing
    this plan submits later (its upstreams come before it, the sweep's own members
    aside) goes, one array per set of jobs they wait for, split at the scheduler's
    MaxArraySize (not split when it is not known); a member that waits for a later run
    goes with the sweep's members ready at its own turn. Arrays are numbered in that
    order, which is the order apply sends them in: at the turn of a member whose array
    has not gone, that array and every other of its sweep that may go then."""
    sweeps: dict[str, list[int]] = {}
    for position, action in enumerate(actions):
        if (sweep := _batch_member(action)) is not None:
            sweeps.setdefault(sweep, []).append(position)
    arrays: list[list[int]] = []
    placed: set[int] = set()
    submitted: set[str] = set()
    for position, action in enumerate(actions):
        sweep = _batch_member(action)
        if sweep is None:
            if action.kind in SUBMITTING:
                submitted.add(action.target)
            continue
        if position in placed:
            continue
        ready = [
            other
            for other in sweeps[sweep]
            if other not in placed
            and (other == position or submitted.issuperset(actions[other].after))
        ]
        groups: dict[tuple[tuple[str, ...], tuple[str, ...]], list[int]] = {}
        for other in ready:
            groups.setdefault((actions[other].after_jobs, actions[other].after), []).append(other)
        for group in groups.values():
            arrays.extend(chunks(group, max_array_size or len(group)))
        placed.update(ready)
        submitted.update(actions[other].target for other in ready)
    where: dict[int, ArrayPlace] = {}
    numbers: dict[str, int] = {}
    for members in arrays:
        sweep = _batch_member(actions[members[0]])
        assert sweep is not None
        numbers[sweep] = numbers.get(sweep, 0) + 1
        for index, position in enumerate(members):
            where[position] = ArrayPlace(number=numbers[sweep], index=index)
    return [
        action.model_copy(update={"array": where[position]}) if position in where else action
        for position, action in enumerate(actions)
    ]


def _batch_member(action: Action) -> str | None:
    """The sweep of a member submitted as a batch job (one started as a step in an
    allocation goes in no array)."""
    if action.target_kind != "run" or action.kind not in SUBMITTING:
        return None
    return sweep_of(action.target) if action.allocation_job is None else None


def chunks(members: Sequence[T], size: int) -> list[list[T]]:
    """Members in arrays of at most ``size`` (indices 0..size-1 each)."""
    return [list(members[start : start + size]) for start in range(0, len(members), size)]


def request_for(indices: Sequence[int], max_parallel: int | None) -> ArrayRequest:
    return ArrayRequest(indices=tuple(indices), max_parallel=max_parallel)


def is_array(job: ObservedJob) -> bool:
    return any(row.array_task is not None for row in job.rows)
