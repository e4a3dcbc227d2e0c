"""`recon plan --against`: a spec diff as text, markdown (a PR comment) or JSON."""

from __future__ import annotations

import json
from typing import Any

from reconciler.engine.specdiff import Change, EntryDiff, SpecDiff

SYMBOLS = {Change.ADD: "+", Change.CHANGE: "~", Change.REMOVE: "-"}


def _short(commit: str | None) -> str:
    return commit[:12] if commit else "work tree"


def _value(value: Any) -> str:
    return "(unset)" if value is None else json.dumps(value)


def summary(result: SpecDiff) -> str:
    if not result.has_changes:
        return "No changes. The specs match."
    return (
        f"Plan: {result.count(Change.ADD)} to add, {result.count(Change.CHANGE)} to change, "
        f"{result.count(Change.REMOVE)} to remove."
    )


def header(result: SpecDiff) -> str:
    return f"Spec diff for project {result.project}: {_short(result.base)} -> {_short(result.head)}"


def as_text(result: SpecDiff) -> str:
    lines = [header(result), ""]
    for entry in result.entries:
        lines.append(
            f"  {SYMBOLS[entry.change]} {entry.kind.lower()} {entry.name}  ({entry.location})"
        )
        lines.extend(
            f"      {change.field}: {_value(change.old)} -> {_value(change.new)}"
            for change in entry.fields
        )
    if result.entries:
        lines.append("")
    lines.append(summary(result))
    return "\n".join(lines) + "\n"


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
    fields = "<br>".join(
        f"`{_cell(c.field)}`: `{_cell(_value(c.old))}` → `{_cell(_value(c.new))}`"
        for c in entry.fields
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
            }
            for entry in result.entries
        ],
        "summary": {change.value: result.count(change) for change in Change},
    }
    return json.dumps(document, indent=2) + "\n"


RENDERERS = {"text": as_text, "markdown": as_markdown, "json": as_json}
