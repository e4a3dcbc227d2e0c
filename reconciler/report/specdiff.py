"""`recon plan --against`: a spec diff as text, markdown (a PR comment) or JSON."""

from __future__ import annotations

import json
from typing import Any

from reconciler.repository.specdiff import Change, EntryDiff, SpecDiff

SYMBOLS = {Change.ADD: "+", Change.CHANGE: "~", Change.REMOVE: "-", Change.MOVE: "->"}


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "work tree"


def _value(value: Any) -> str:
    return "(unset)" if value is None else json.dumps(value)


def summary(result: SpecDiff) -> str:
    if not result.has_changes:
        return "No changes. The specs match."
    moved = result.count(Change.MOVE)
    return (
        f"Plan: {result.count(Change.ADD)} to add, {result.count(Change.CHANGE)} to change, "
        f"{result.count(Change.REMOVE)} to remove" + (f", {moved} to move." if moved else ".")
    )


def header(result: SpecDiff) -> str:
    return f"Spec diff for project {result.project}: {_short(result.base)} -> {_short(result.head)}"


def as_text(result: SpecDiff) -> str:
    lines = [header(result), ""]
    for entry in result.entries:
        lines.append(
            f"  {SYMBOLS[entry.change]} {entry.kind.lower()} {entry.name}  ({entry.location})"
        )
        if entry.moved_from is not None:
            lines.append(f"      renamed from {entry.moved_from}: moved, with no job")
        lines.extend(f"      {line}" for line in member_lines(entry))
        lines.extend(
            f"      {change.field}: {_value(change.old)} -> {_value(change.new)}"
            for change in entry.fields
        )
    if result.entries:
        lines.append("")
    lines.append(summary(result))
    return "\n".join(lines) + "\n"


# A sweep's added or removed members are named up to this many; the rest are counted.
_NAMED = 10


def member_lines(entry: EntryDiff) -> list[str]:
    """`members added (2 of 8): train[seed=3], ...`, `members changed: 6 of 8`."""
    members = entry.members
    if members is None:
        return []
    lines = []
    for word, names in (("added", members.added), ("removed", members.removed)):
        if names:
            shown = ", ".join(names[:_NAMED])
            more = f", and {len(names) - _NAMED} more" if len(names) > _NAMED else ""
            lines.append(f"members {word} ({len(names)}): {shown}{more}")
    if members.changed:
        lines.append(f"members changed: {len(members.changed)} of {members.count}")
    return lines


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def as_markdown(result: SpecDiff) -> str:
    lines = [f"### recon: {header(result)}", ""]
    if result.entries:
        lines += ["| | kind | name | changed fields |", "|---|---|---|---|"]
        lines += [_markdown_row(entry) for entry in result.entries]
        lines.append("")
    lines.append(f"**{summary(result)}**")
    return "\n".join(lines) + "\n"


def _markdown_row(entry: EntryDiff) -> str:
    moved = [] if entry.moved_from is None else [f"renamed from `{entry.moved_from}`"]
    fields = "<br>".join(
        [
            *moved,
            *(_cell(line) for line in member_lines(entry)),
            *(
                f"`{_cell(c.field)}`: `{_cell(_value(c.old))}` → `{_cell(_value(c.new))}`"
                for c in entry.fields
            ),
        ]
    )
    return f"| `{SYMBOLS[entry.change]}` | {entry.kind} | `{entry.name}` | {fields} |"


def as_json(result: SpecDiff) -> str:
    document = {
        "project": result.project,
        "base": result.base,
        "head": result.head,
        "changes": [
            {
                "kind": entry.kind,
                "name": entry.name,
                "action": entry.change.value,
                "file": entry.location.file,
                "line": entry.location.line,
                "fields": [{"field": c.field, "old": c.old, "new": c.new} for c in entry.fields],
                **({"moved_from": entry.moved_from} if entry.moved_from is not None else {}),
                **(
                    {
                        "members": {
                            "added": list(entry.members.added),
                            "removed": list(entry.members.removed),
                            "changed": list(entry.members.changed),
                            "count": entry.members.count,
                        }
                    }
                    if entry.members is not None
                    else {}
                ),
            }
            for entry in result.entries
        ],
        "summary": {change.value: result.count(change) for change in Change},
    }
    return json.dumps(document, indent=2) + "\n"


RENDERERS = {"text": as_text, "markdown": as_markdown, "json": as_json}
