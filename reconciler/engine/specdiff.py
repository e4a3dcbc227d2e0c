"""The spec-level diff between two commits: what a PR would change, with no cluster at all.

Pure: two `Desired` in, a `SpecDiff` out. A run or allocation counts as changed only when
its spec hash changed, so comments, key order, formatting and descriptions never show;
the changed fields are listed in the user's own notation.
"""

from __future__ import annotations

from collections.abc import Mapping
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
    spec_hash_of,
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
    """Entries are compared by spec hash; only those added, removed or changed are built
    (their location and fields), so one changed file among 10,000 builds one run."""
    old, new = _entries(base), _entries(head)
    entries = []
    for key in sorted(old.keys() | new.keys(), key=lambda k: (k[1], k[0])):
        kind, name = key
        before, after = old.get(key), new.get(key)
        if before is None and after is not None:
            entries.append(EntryDiff(kind, name, Change.ADD, after[name].location))
        elif after is None and before is not None:
            entries.append(EntryDiff(kind, name, Change.REMOVE, before[name].location))
        elif (
            before is not None
            and after is not None
            and spec_hash_of(before, name) != spec_hash_of(after, name)
        ):
            was, now = before[name], after[name]
            entries.append(
                EntryDiff(kind, name, Change.CHANGE, now.location, field_changes(was, now))
            )
    return SpecDiff(base.commit, head.commit, head.project.project, tuple(entries))


Entries = Mapping[str, DesiredRun] | Mapping[str, DesiredAllocation]


def _entries(desired: Desired) -> dict[tuple[str, str], Entries]:
    """(kind, name) -> the mapping that holds it, whose models are built only if asked."""
    entries: dict[tuple[str, str], Entries] = {}
    for name in desired.runs:
        entries[("Run", name)] = desired.runs
    for name in desired.allocations:
        entries[("Allocation", name)] = desired.allocations
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
