"""`recon plan`: a live Plan as text, markdown (a PR comment) or JSON.

Pure rendering, no I/O, no colour: a caller may colour the text later. The text looks
like Terraform's plan: one line per action with its symbol right-aligned in a 3-character
column, so `-/+` and `+` line up, then the action, the target and why.
"""

from __future__ import annotations

import json
import re
from typing import Any, Protocol

from reconciler.engine.actions import Action, ActionKind, FieldChange, Plan, RunOutcome
from reconciler.report.words import plural

_SYMBOL_WIDTH = 3
_KIND_WIDTH = max(len(kind.value) for kind in ActionKind)
# Targets get at least this many columns, so plans of short names look the same from one
# run to the next and the reason column does not jump about.
_MIN_TARGET_WIDTH = 13
_GAP = "  "
_CANCELLING = frozenset({ActionKind.REPLACE, ActionKind.CANCEL, ActionKind.TEARDOWN})
# A run submitted again cancels its job held in the queue first (SpecialExit), if any.
_SUBMITTING = frozenset({ActionKind.SUBMIT, ActionKind.RETRY})
_NEWLINES = re.compile(r"\r\n|\r|\n")


class Renderer(Protocol):
    def __call__(self, plan: Plan, *, show_noop: bool = True) -> str: ...


def _short(commit: str | None) -> str:
    return f"at commit {commit[:12]}" if commit else "from the work tree"


def _one_line(text: str) -> str:
    # A newline in a reason or a value (a multi-line command) would break the columns.
    return _NEWLINES.sub(r"\\n", text)


def header(plan: Plan) -> str:
    scope = f"scheduler: {plan.scheduler}"
    if plan.targets:
        scope += f"; targets: {', '.join(plan.targets)}"
    return f"recon plan for project {plan.project} {_short(plan.commit)} ({scope})"


def summary(plan: Plan) -> str:
    unseen = (
        f"{plural(plan.waiting_unseen, 'run')} {'waits' if plan.waiting_unseen == 1 else 'wait'}"
        " for jobs the scheduler does not show yet"
    )
    if plan.has_changes:
        return plan.summary + (f" {unseen[0].upper()}{unseen[1:]}." if plan.waiting_unseen else "")
    # Nothing would touch the cluster; say what is still not as the specs want it, and
    # only claim a match when the cluster was fully observed and no job is unaccounted for.
    pending = [unseen] if plan.waiting_unseen else []
    if adopt := plan.count(ActionKind.ADOPT):
        pending.append(f"{plural(adopt, 'job')} to adopt into the journal")
    # A run failed with no retries left is a no-op, but not a match: say so.
    if failed := sum(1 for a in plan.actions if a.outcome is RunOutcome.FAILED):
        pending.append(f"{plural(failed, 'run')} failed with no retries left")
    if blocked := plan.count(ActionKind.BLOCKED):
        pending.append(f"{plural(blocked, 'run')} blocked")
    if pending:
        return f"No changes to the cluster; {', '.join(pending)}."
    if not plan.observation_complete:
        return "No changes to the cluster."
    return "No changes. The cluster matches the specs."


def _notes(plan: Plan) -> list[str]:
    if plan.notes or plan.observation_complete:
        return list(plan.notes)
    # The planner explains an incomplete observation in a note; never let it go unsaid.
    return ["Observation incomplete."]


def _context(action: Action) -> str:
    """What follows the reason in every format: the runs awaited, the jobs cancelled."""
    text = ""
    if action.after:
        text += f"; after {', '.join(action.after)}"
    resubmitting = action.target_kind == "run" and action.kind in _SUBMITTING
    if (action.kind in _CANCELLING or resubmitting) and action.job_ids:
        word = "job" if len(action.job_ids) == 1 else "jobs"
        text += f" (cancels {word} {', '.join(action.job_ids)})"
    return text


def _visible(plan: Plan, show_noop: bool) -> list[Action]:
    return [a for a in plan.actions if show_noop or a.kind is not ActionKind.NOOP]


def _unchanged_line(plan: Plan, show_noop: bool) -> list[str]:
    noop = plan.count(ActionKind.NOOP)
    return [] if show_noop or not noop else [f"{plural(noop, 'run')} unchanged."]


def as_text(plan: Plan, *, show_noop: bool = True) -> str:
    actions = _visible(plan, show_noop)
    width = max([_MIN_TARGET_WIDTH, *(len(a.target) for a in actions)])
    body = [line for action in actions for line in _text_lines(action, width)]
    body += _unchanged_line(plan, show_noop)
    lines = [header(plan), *_notes(plan), ""]
    if body:
        lines += [*body, ""]
    lines.append(summary(plan))
    return "\n".join(lines) + "\n"


def _text_lines(action: Action, target_width: int) -> list[str]:
    reason = action.reason
    several = len(action.changes) > 1
    if len(action.changes) == 1:
        reason += f": {action.changes[0]}"
    lead = (
        f"{action.symbol:>{_SYMBOL_WIDTH}} {action.kind.value:<{_KIND_WIDTH}}{_GAP}"
        f"{action.target:<{target_width}}{_GAP}"
    )
    first = _one_line(lead + reason + _context(action)).rstrip()
    # Several changed fields: one per line, under the reason; then any details.
    indent = " " * (len(lead) + 2)
    return [
        first,
        *(indent + _one_line(str(c)) for c in action.changes if several),
        *(indent + _one_line(line) for line in action.details),
    ]


def _cell(text: str) -> str:
    # A `|` ends a table cell even inside a code span, and a newline ends the row.
    return _NEWLINES.sub(" ", text).replace("|", "\\|")


def _code(text: str) -> str:
    """A code span that holds any text: its fence is longer than any backtick run inside."""
    text = _cell(text)
    longest = max((len(run) for run in re.findall("`+", text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _value(value: Any) -> str:
    return "(unset)" if value is None else str(value)


def _change_cell(change: FieldChange) -> str:
    return f"{_code(change.field)}: {_code(_value(change.old))} → {_code(_value(change.new))}"


def _markdown_row(action: Action) -> str:
    symbol = _code(action.symbol) if action.symbol.strip() else ""
    fields = "<br>".join(
        [*(_change_cell(c) for c in action.changes), *(_cell(line) for line in action.details)]
    )
    reason = _cell(action.reason + _context(action))
    return f"| {symbol} | {action.kind.value} | {_code(action.target)} | {reason} | {fields} |"


def as_markdown(plan: Plan, *, show_noop: bool = True) -> str:
    lines = [f"### {header(plan)}", ""]
    # Blank quote lines between notes, else markdown joins them into one paragraph.
    quoted = "\n>\n".join(f"> {_cell(note)}" for note in _notes(plan))
    if quoted:
        lines += [quoted, ""]
    actions = _visible(plan, show_noop)
    if actions:
        lines += ["| | action | target | reason | changed fields |", "|---|---|---|---|---|"]
        lines += [_markdown_row(action) for action in actions]
        lines.append("")
    if unchanged := _unchanged_line(plan, show_noop):
        lines += [*unchanged, ""]
    lines.append(f"**{summary(plan)}**")
    return "\n".join(lines) + "\n"


def as_json(plan: Plan, *, show_noop: bool = True) -> str:
    """The whole plan, so that it reads back equal without `summary`, plus the counts.

    JSON is for machines, which filter for themselves: every action is always there and
    `show_noop` is accepted only so that all renderers are called the same way.
    """
    document = plan.model_dump(mode="json")
    counts: dict[str, int | bool] = {kind.value: plan.count(kind) for kind in ActionKind}
    document["summary"] = {**counts, "has_changes": plan.has_changes}
    return json.dumps(document, indent=2) + "\n"


RENDERERS: dict[str, Renderer] = {"text": as_text, "markdown": as_markdown, "json": as_json}
