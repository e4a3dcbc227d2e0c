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
from reconciler.spec.matrix import sweep_of


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
class Members:
    """How a sweep's members differ: by name (their values), and how many it has now."""

    added: tuple[str, ...] = ()
    removed: tuple[str, ...] = ()
    changed: tuple[str, ...] = ()
    count: int = 0


@dataclass(frozen=True)
class EntryDiff:
    kind: str  # "Run", "Allocation" or "Sweep"
    name: str
    change: Change
    location: Location  # where it is in the newer commit, or was in the older
    fields: tuple[FieldChange, ...] = ()  # a sweep's: those of its changed members, once
    members: Members | None = None  # a sweep's


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
    """A sweep is one entry, whatever the number of its members: those added, removed or
    changed, and the changed fields once (every member changes alike)."""
    old = _entries(base)
    new = _entries(head)
    entries = _sweeps(old, new)
    for entries_of in (old, new):
        for key in [key for key in entries_of if key[0] == "Run" and sweep_of(key[1])]:
            del entries_of[key]
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
    entries.sort(key=lambda entry: (entry.name, entry.kind))
    return SpecDiff(base.commit, head.commit, head.project.project, tuple(entries))


def _sweeps(
    old: dict[tuple[str, str], Entry], new: dict[tuple[str, str], Entry]
) -> list[EntryDiff]:
    before = _by_sweep(old)
    after = _by_sweep(new)
    entries = []
    for sweep in sorted(before.keys() | after.keys()):
        was, now = before.get(sweep, {}), after.get(sweep, {})
        changed = [
            name for name in now if name in was and was[name].spec_hash != now[name].spec_hash
        ]
        members = Members(
            added=tuple(name for name in now if name not in was),
            removed=tuple(name for name in was if name not in now),
            changed=tuple(changed),
            count=len(now),
        )
        if not (members.added or members.removed or members.changed):
            continue
        any_entry = next(iter((now or was).values()))
        change = Change.ADD if not was else Change.REMOVE if not now else Change.CHANGE
        fields: tuple[FieldChange, ...] = ()
        if changed:
            fields = tuple(
                field
                for field in field_changes(was[changed[0]], now[changed[0]])
                if field.field not in ("name", "workdir")
            )
        entries.append(EntryDiff("Sweep", sweep, change, any_entry.location, fields, members))
    return entries


def _hash(entries: dict[str, Entry], name: str) -> str:
    return entries[name].spec_hash


def _by_sweep(entries: dict[tuple[str, str], Entry]) -> dict[str, dict[str, Entry]]:
    sweeps: dict[str, dict[str, Entry]] = {}
    for (kind, name), entry in entries.items():
        sweep = sweep_of(name) if kind == "Run" else None
        if sweep is not None:
            sweeps.setdefault(sweep, {})[name] = entry
    return sweeps


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
