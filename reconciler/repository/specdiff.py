"""The spec-level diff between two commits: what a PR would change, with no cluster at all.

Pure: two `Desired` in, a `SpecDiff` out. A run or allocation counts as changed only when
its spec hash changed or, for a run, one of its code files (``DesiredRun.code``) did, so
comments, key order, formatting and descriptions never show; the changed fields are
listed in the user's own notation, and each changed code file as `code PATH` with its
blob ids.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from reconciler.desired.desired import (
    Desired,
    DesiredAllocation,
    DesiredRun,
    Location,
    changed_fields,
    code_of,
    flat_fields,
    former_identity,
    spec_hash_of,
)


class Change(StrEnum):
    ADD = "add"
    CHANGE = "change"
    REMOVE = "remove"
    MOVE = "move"  # renamed (`renamed_from`), its spec otherwise unchanged


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
    moved_from: str | None = None  # a move's old name


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
    changed, and the changed fields once (every member changes alike).

    Entries are compared by spec hash, which the loader knows without building a run's
    model; only what is shown is built (a location, the fields that changed), so one
    changed file among 10,000 builds one run on each side."""
    moved = _moved(base, head)
    gone = set(moved.values())
    old_sweeps = {name: m for name, m in _by_sweep(base).items() if name not in gone}
    new_sweeps = {name: m for name, m in _by_sweep(head).items() if name not in moved}
    entries = _sweeps(old_sweeps, new_sweeps)
    for new, old in moved.items():
        kind = "Sweep" if new in head.sweeps else "Run"
        where = head.runs[head.sweeps[new].members[0] if kind == "Sweep" else new].location
        entries.append(EntryDiff(kind, new, Change.MOVE, where, moved_from=old))
    members = {
        name for sweeps in (_by_sweep(base), _by_sweep(head)) for m in sweeps.values() for name in m
    }
    pairs: tuple[tuple[str, Entries, Entries, set[str]], ...] = (
        ("Run", base.runs, head.runs, members),
        ("Allocation", base.allocations, head.allocations, set()),
    )
    for kind, before, after, swept in pairs:
        for name in before:
            if name in swept:
                continue
            if name not in after:
                if name not in gone:
                    entries.append(EntryDiff(kind, name, Change.REMOVE, before[name].location))
                continue
            code = _code_changes(before, after, name) if kind == "Run" else ()
            if spec_hash_of(before, name) != spec_hash_of(after, name) and not (
                kind == "Run" and former_identity(head, name) == (name, before[name].spec_hash)
            ):  # a run whose input names a renamed run by its new name is unchanged
                was, now = before[name], after[name]
                changes = field_changes(was, now) + code
                entries.append(EntryDiff(kind, name, Change.CHANGE, now.location, changes))
            elif code:
                entries.append(EntryDiff(kind, name, Change.CHANGE, after[name].location, code))
        for name in after:
            if name not in before and name not in swept and name not in moved:
                entries.append(EntryDiff(kind, name, Change.ADD, after[name].location))
    entries.sort(key=lambda entry: (entry.name, entry.kind))
    return SpecDiff(base.commit, head.commit, head.project.project, tuple(entries))


# The mapping that holds an entry (a Desired's runs or allocations): its model is built
# only when asked for.
Entries = Mapping[str, DesiredRun] | Mapping[str, DesiredAllocation]


def _sweeps(
    before: dict[str, dict[str, Entries]], after: dict[str, dict[str, Entries]]
) -> list[EntryDiff]:
    entries = []
    for sweep in sorted(before.keys() | after.keys()):
        was, now = before.get(sweep, {}), after.get(sweep, {})
        changed = [
            name
            for name in now
            if name in was
            and (
                spec_hash_of(was[name], name) != spec_hash_of(now[name], name)
                or _code_changes(was[name], now[name], name)
            )
        ]
        members = Members(
            added=tuple(name for name in now if name not in was),
            removed=tuple(name for name in was if name not in now),
            changed=tuple(changed),
            count=len(now),
        )
        if not (members.added or members.removed or members.changed):
            continue
        first, holder = next(iter((now or was).items()))
        change = Change.ADD if not was else Change.REMOVE if not now else Change.CHANGE
        fields: tuple[FieldChange, ...] = ()
        if changed:
            name = changed[0]
            old, new = was[name][name], now[name][name]
            fields = _code_changes(was[name], now[name], name)
            if spec_hash_of(was[name], name) != spec_hash_of(now[name], name):
                spec_fields = field_changes(old, new)
                fields = (*(f for f in spec_fields if f.field not in ("name", "workdir")), *fields)
        location = holder[first].location
        entries.append(EntryDiff("Sweep", sweep, change, location, fields, members))
    return entries


def _moved(base: Desired, head: Desired) -> dict[str, str]:
    """Each run or sweep of ``head`` renamed from one of ``base`` (`renamed_from`), its spec
    otherwise unchanged (``former_identity``: what a plan moves): new name -> old name."""
    moved = {}
    for new, old in head.renamed.items():
        if new in base.runs or new in base.sweeps:
            continue
        if new in head.sweeps:
            if old not in base.sweeps:
                continue
            names = head.sweeps[new].members
            if len(names) != len(base.sweeps[old].members):
                continue
        elif old in base.runs:
            names = (new,)
        else:
            continue
        formers = [former_identity(head, name) for name in names]
        if all(
            former is not None
            and former[0] in base.runs
            and spec_hash_of(base.runs, former[0]) == former[1]
            for former in formers
        ):
            moved[new] = old
    return moved


def _by_sweep(desired: Desired) -> dict[str, dict[str, Entries]]:
    """Sweep -> its members that are runs, in their order -> the mapping that holds them."""
    return {
        sweep.name: {name: desired.runs for name in sweep.members if name in desired.runs}
        for sweep in desired.sweeps.values()
        if any(name in desired.runs for name in sweep.members)
    }


def field_changes(before: Entry, after: Entry) -> tuple[FieldChange, ...]:
    changes = [
        FieldChange(path, old, new)
        for path, old, new in changed_fields(_flat(before), _flat(after))
    ]
    if not changes:
        # Same text, different hash: values that read alike but render differently.
        changes.append(FieldChange("spec", before.spec_hash, after.spec_hash))
    return tuple(changes)


def _code_changes(before: Entries, after: Entries, name: str) -> tuple[FieldChange, ...]:
    """A run's code files (in both commits' code) whose blob ids differ, as `code PATH`
    with the first 12 characters of each blob id; known without building the run."""
    was = code_of(before, name)  # type: ignore[arg-type]  # runs: the caller's kind
    now = code_of(after, name)  # type: ignore[arg-type]
    return tuple(
        FieldChange(f"code {path}", was[path][:12], blob[:12])
        for path, blob in sorted(now.items())
        if path in was and was[path] != blob
    )


def _flat(entry: Entry) -> dict[str, Any]:
    if isinstance(entry, DesiredRun):
        return flat_fields(entry.spec, entry.script_text, entry.environment_files)
    return flat_fields(entry.spec)
