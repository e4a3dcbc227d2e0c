"""The spec-level diff between two commits: what a PR would change, with no cluster at all.

Pure: two `Desired` in, a `SpecDiff` out. A run or allocation counts as changed only when
its spec hash changed, so comments, key order, formatting and descriptions never show;
the changed fields are listed in the user's own notation.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.spec.desired import (
    Desired,
    DesiredAllocation,
    DesiredRun,
    Location,
    changed_fields,
    flat_fields,
)


class Change(StrEnum):
    ADD = "add"
    CHANGE = "change"
    REMOVE = "remove"


@dataclass(frozen=True)
class FieldChange:
    field: str
    old: Any
    new: Any


@dataclass(frozen=True)
class EntryDiff:
    kind: str  # "Run" or "Allocation"
    name: str
    change: Change
    location: Location  # where it is in the newer commit, or was in the older
    fields: tuple[FieldChange, ...] = ()


@dataclass(frozen=True)
class SpecDiff:
    base: str | None
    head: str | None
    project: str
    entries: tuple[EntryDiff, ...]

    def count(self, change: Change) -> int:
        return sum(1 for entry in self.entries if entry.change is change)

    @property
    def has_changes(self) -> bool:
        return bool(self.entries)


Entry = DesiredRun | DesiredAllocation


def diff(base: Desired, head: Desired) -> SpecDiff:
    old = _entries(base)
    new = _entries(head)
    entries = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: (k[1], k[0])):
        kind, name = key
        before, after = old.get(key), new.get(key)
        if before is None and after is not None:
            entries.append(EntryDiff(kind, name, Change.ADD, after.location))
        elif after is None and before is not None:
            entries.append(EntryDiff(kind, name, Change.REMOVE, before.location))
        elif before is not None and after is not None and before.spec_hash != after.spec_hash:
            entries.append(
                EntryDiff(kind, name, Change.CHANGE, after.location, field_changes(before, after))
            )
    return SpecDiff(base.commit, head.commit, head.project.project, tuple(entries))


def _entries(desired: Desired) -> dict[tuple[str, str], Entry]:
    entries: dict[tuple[str, str], Entry] = {}
    for name, run in desired.runs.items():
        entries[("Run", name)] = run
    for name, allocation in desired.allocations.items():
        entries[("Allocation", name)] = allocation
    return entries


def field_changes(before: Entry, after: Entry) -> tuple[FieldChange, ...]:
    changes = [
        FieldChange(path, old, new)
        for path, old, new in changed_fields(_flat(before), _flat(after))
    ]
    if not changes:
        # Same text, different hash: values that read alike but render differently.
        changes.append(FieldChange("spec", before.spec_hash, after.spec_hash))
    return tuple(changes)


def _flat(entry: Entry) -> dict[str, Any]:
    script = entry.script_text if isinstance(entry, DesiredRun) else None
    return flat_fields(entry.spec, script)
