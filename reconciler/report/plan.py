"""`recon plan`: a live Plan as text, markdown (a PR comment) or JSON.

Pure rendering, no I/O. The text looks like Terraform's plan: one line per action with
its symbol right-aligned in a 3-character column, so `-/+` and `+` line up, then the
action, the target and why; given a width, a longer line wraps between words under the
column it continues. A caller at a terminal colours it with ``styled``.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from reconciler.desired.matrix import member_order, sweep_of
from reconciler.engine.plan.actions import (
    SUSPENDED_MARK,
    Action,
    ActionKind,
    FieldChange,
    Plan,
    RunOutcome,
    SweepShape,
)
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.holds import explain_hold, suspended_notes
from reconciler.report.wrap import wrapped
from reconciler.words import listed, plural

if TYPE_CHECKING:
    from rich.text import Text

_SYMBOL_WIDTH = 3
# The kind column fits every kind but `may rerun`, which widens it only in a plan that
# has one: other plans keep the columns they always had.
_KIND_WIDTH = max(len(kind.value) for kind in ActionKind if kind is not ActionKind.MAY_RERUN)
# Targets get at least this many columns, so plans of short names look the same from one
# run to the next and the reason column does not jump about.
_MIN_TARGET_WIDTH = 13
_GAP = "  "
_CANCELLING = frozenset({ActionKind.REPLACE, ActionKind.CANCEL, ActionKind.TEARDOWN})
# A run submitted again cancels its job held in the queue first (SpecialExit), if any.
_SUBMITTING = frozenset(
    {ActionKind.SUBMIT, ActionKind.RETRY, ActionKind.REQUEUE, ActionKind.MAY_RERUN}
)
_NEWLINES = re.compile(r"\r\n|\r|\n")
# `current (job 123_4 succeeded)`: each member's job differs, its reason does not.
_JOB_MENTION = re.compile(r" \(jobs? [0-9_., ]+[^)]*\)")
# `its job 12_3`, `job 12_[0-5]` (Slurm's pending tasks), `job 12+1` (a het component):
# each member's differs, so it is said as `its job`, never `its its job`.
_JOB_ID = re.compile(r"\b(?:its )*job [0-9]+(?:_[0-9]+|_\[[^\]]*\]|\+[0-9]+)?")


class Renderer(Protocol):
    def __call__(
        self, plan: Plan, *, show_noop: bool = True, members: bool = False, width: int | None = None
    ) -> str: ...


@dataclass(frozen=True)
class SweepBlock:
    """The actions of one kind on one sweep's members, shown as one line."""

    sweep: str
    kind: ActionKind
    actions: tuple[Action, ...]

    @property
    def symbol(self) -> str:
        return self.actions[0].symbol

    def what(self, plan: Plan) -> str:
        """``6 of 12 members (1 array, at most 4 at once): not yet run``."""
        shape = plan.sweeps.get(self.sweep)
        count = len(self.actions)
        if shape is None:  # the sweep left the specs: its members' jobs are pruned
            text = f"{plural(count, 'member')} of a sweep no longer in the specs"
        else:
            text = f"{count} of {plural(shape.members, 'member')}"
        if self.kind in _SUBMITTING or self.kind is ActionKind.REPLACE:
            text += _arrays(self.actions, shape)
        return f"{text}: {_reasons(self.actions)}"


def _arrays(actions: tuple[Action, ...], shape: SweepShape | None) -> str:
    """How many job arrays the plan puts the members in (``Action.array``), and how many
    of its tasks run at once: `` (2 arrays, at most 4 at once)``."""
    said = []
    if arrays := len({action.array.number for action in actions if action.array is not None}):
        said.append(plural(arrays, "array"))
    if shape is not None and shape.max_parallel is not None:
        said.append(f"at most {shape.max_parallel} at once")
    return f" ({', '.join(said)})" if said else ""


def _reasons(actions: tuple[Action, ...]) -> str:
    """The members' reasons, each once, the commonest first, with how many say it."""
    counts: dict[str, int] = {}
    for action in actions:
        reason = _JOB_ID.sub("its job", _JOB_MENTION.sub("", action.reason))
        reason += f": {action.changes[0]}" if len(action.changes) == 1 else ""
        counts[reason] = counts.get(reason, 0) + 1
    ordered = sorted(counts.items(), key=lambda item: -item[1])
    shown = [reason if len(ordered) == 1 else f"{reason} ({n})" for reason, n in ordered[:3]]
    more = f"; {len(ordered) - 3} more reasons" if len(ordered) > 3 else ""
    return "; ".join(shown) + more


def grouped(actions: list[Action]) -> list[Action | SweepBlock]:
    """The actions with each sweep's members gathered into one block per kind, where the
    first of them stands; a run of its own stays one action."""
    blocks: dict[tuple[str, ActionKind], list[Action]] = {}
    order: list[Action | tuple[str, ActionKind]] = []
    for action in actions:
        sweep = sweep_of(action.target) if action.target_kind == "run" else None
        if sweep is None:
            order.append(action)
            continue
        key = (sweep, action.kind)
        if key not in blocks:
            blocks[key] = []
            order.append(key)
        blocks[key].append(action)
    return [
        item if isinstance(item, Action) else SweepBlock(item[0], item[1], tuple(blocks[item]))
        for item in order
    ]


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
    skipped = skipped_allocations(plan)
    if plan.has_changes:
        tail = [unseen] if plan.waiting_unseen else []
        tail += [skipped] if skipped else []
        return " ".join([plan.summary, *(f"{text[0].upper()}{text[1:]}." for text in tail)])
    # Nothing would touch the cluster; say what is still not as the specs want it, and
    # only claim a match when the cluster was fully observed and no job is unaccounted for.
    pending = [unseen] if plan.waiting_unseen else []
    if suspended := len(plan.suspended):
        pending.append(f"{plural(suspended, 'action')} suspended")
    if adopt := plan.count(ActionKind.ADOPT):
        pending.append(f"{plural(adopt, 'job')} to adopt into the journal")
    # A run failed with no retries left is a no-op, but not a match: say so.
    if failed := sum(1 for a in plan.actions if a.outcome is RunOutcome.FAILED):
        pending.append(f"{plural(failed, 'run')} failed with no retries left")
    blocked = [a for a in plan.actions if a.kind is ActionKind.BLOCKED]
    if runs := sum(1 for a in blocked if a.target_kind == "run"):
        pending.append(f"{plural(runs, 'run')} blocked")
    if not skipped and (allocations := len(blocked) - runs):
        pending.append(f"{plural(allocations, 'allocation')} blocked")
    pending += [skipped] if skipped else []
    if pending:
        return f"No changes to the cluster; {', '.join(pending)}."
    if not plan.observation_complete:
        return "No changes to the cluster."
    return "No changes. The cluster matches the specs."


def skipped_allocations(plan: Plan) -> str | None:
    """`allocation interactive skipped on the local backend, which holds none`: on the
    local backend every allocation is blocked as unsupported (engine/plan/allocations/
    state.py), which a summary says as what it is, a step left out, not an error."""
    if plan.scheduler != "local":
        return None
    names = [
        a.target
        for a in plan.actions
        if a.target_kind == "alloc"
        and a.kind is ActionKind.BLOCKED
        and a.cause is Cause.UNSUPPORTED
    ]
    if not names:
        return None
    word = "allocation" if len(names) == 1 else "allocations"
    return f"{word} {listed(names)} skipped on the local backend, which holds none"


def guard_line(plan: Plan) -> list[str]:
    """Under the summary: why apply would carry out nothing of the plan (its prunes look
    like an accident, or it passes the GPU-hour budget), or that a person confirmed it."""
    lines = []
    for guard in (plan.prune_guard, plan.budget_guard):
        if guard is not None:
            said = explain_hold(guard)
            lines.append(f"{said[0].upper()}{said[1:]}." if guard.confirmed else f"Held: {said}.")
    return lines


def banner(plan: Plan) -> list[str]:
    """What a person must see first (`recon status`, the web view): each guard that holds
    the plan, with the command that confirms it, and what is suspended."""
    lines = [f"HELD: {explain_hold(guard)}." for guard in plan.holds]
    return lines + [f"SUSPENDED: {note.removeprefix('suspended: ')}." for note in
                    suspended_notes(plan.actions)]  # fmt: skip


def _notes(plan: Plan) -> list[str]:
    if plan.notes or plan.observation_complete:
        return list(plan.notes)
    # The planner explains an incomplete observation in a note; never let it go unsaid.
    return ["Observation incomplete."]


def _context(action: Action) -> str:
    """What follows the reason in every format: the runs awaited, the jobs cancelled."""
    text = ""
    if action.after and action.kind is not ActionKind.MAY_RERUN:  # its reason names them
        text += f"; after {', '.join(_runs(action.after))}"
    resubmitting = action.target_kind == "run" and action.kind in _SUBMITTING
    if (action.kind in _CANCELLING or resubmitting) and action.job_ids:
        word = "job" if len(action.job_ids) == 1 else "jobs"
        text += f" (cancels {word} {', '.join(action.job_ids)})"
    if action.array is not None:
        text += f"; array {action.array.number}, index {action.array.index}"
    return text


def _runs(names: tuple[str, ...]) -> list[str]:
    """Run names with a sweep's members said once: `seeds (6 members)`."""
    shown: dict[str, int] = {}
    for name in names:
        key = sweep_of(name) or name
        shown[key] = shown.get(key, 0) + (1 if key != name else 0)
    return [
        f"{name} ({plural(count, 'member')})" if count else name for name, count in shown.items()
    ]


def _visible(plan: Plan, show_noop: bool) -> list[Action]:
    return [a for a in plan.actions if show_noop or a.kind is not ActionKind.NOOP]


def _unchanged_line(plan: Plan, show_noop: bool) -> list[str]:
    noop = plan.count(ActionKind.NOOP)
    return [] if show_noop or not noop else [f"{plural(noop, 'run')} unchanged."]


def as_text(
    plan: Plan, *, show_noop: bool = True, members: bool = False, width: int | None = None
) -> str:
    """A sweep's members show as one line per kind of action; with ``members``, each
    member's own line follows it. With a ``width`` (a terminal's, or COLUMNS), a line
    longer than it wraps at word boundaries, under the column it continues."""
    items = grouped(_visible(plan, show_noop))
    targets = [item.target if isinstance(item, Action) else item.sweep for item in items] + [
        action.target
        for item in items
        if isinstance(item, SweepBlock) and members
        for action in item.actions
    ]
    target_width = max([_MIN_TARGET_WIDTH, *(len(target) for target in targets)])
    kinds = max([_KIND_WIDTH, *(len(item.kind.value) for item in items)])
    columns = _Columns(target_width, kinds, width)
    body: list[Line] = []
    for item in items:
        if isinstance(item, Action):
            body.extend(_text_lines(item, columns))
            continue
        lead = columns.lead(item.symbol, item.kind, item.sweep)
        body.append(Line(_one_line(lead + item.what(plan)).rstrip(), len(lead)))
        if members:
            body.extend(
                line
                for action in in_value_order(item.actions)
                for line in _text_lines(action, columns)
            )
    body += [Line(text) for text in _unchanged_line(plan, show_noop)]
    lines = [Line(header(plan)), *(Line(note) for note in _notes(plan)), Line("")]
    if body:
        lines += [*body, Line("")]
    lines += [Line(summary(plan)), *(Line(text) for text in guard_line(plan))]
    return "".join(line.fitted(width) for line in lines)


@dataclass(frozen=True)
class Line:
    """One line of the text, and the column its words continue at when it wraps."""

    text: str
    indent: int = 2  # a sentence (the header, a note, the summary): under its second letter

    def fitted(self, width: int | None) -> str:
        return "\n".join(wrapped(self.text, width, self.indent)) + "\n"


@dataclass(frozen=True)
class _Columns:
    """Where the text's columns are: the kind's and the target's widths."""

    target: int
    kind: int
    width: int | None

    def lead(self, symbol: str, kind: ActionKind, target: str) -> str:
        """`  + submit    prepare        `: everything before the reason."""
        kind_column = f"{symbol:>{_SYMBOL_WIDTH}} {kind.value:<{self.kind}}"
        return f"{kind_column}{_GAP}{target:<{self.target}}{_GAP}"


def _text_lines(action: Action, columns: _Columns) -> list[Line]:
    lead = columns.lead(action.symbol, action.kind, action.target)
    first = lead + _suspended(action) + action.reason
    own_line = len(action.changes) > 1
    if len(action.changes) == 1:
        one = f"{first}: {action.changes[0]}"
        # A change too long for the line goes on a line of its own, as several do.
        shown = len(_one_line(one + _context(action)))
        own_line = columns.width is not None and shown > columns.width
        first = first if own_line else one
    under = len(lead) + 2
    lines = [Line(_one_line(first + _context(action)).rstrip(), len(lead))]
    for change in action.changes if own_line else ():
        lines.extend(_change_lines(change, under, columns.width))
    lines.extend(Line(" " * under + _one_line(detail), under + 2) for detail in action.details)
    return lines


def _suspended(action: Action) -> str:
    return SUSPENDED_MARK if action.suspended else ""


def _change_lines(change: FieldChange, indent: int, width: int | None) -> list[Line]:
    """A changed field under its run: `field old -> new`; too long for the width, the old
    value and the new one each start a line."""
    pad = " " * indent
    line = pad + _one_line(str(change))
    if width is None or len(line) <= width:
        return [Line(line, indent + 2)]
    old = f"{pad}{change.field} {_one_line(_value(change.old))}"
    return [Line(old, indent + 2), Line(f"{pad}-> {_one_line(_value(change.new))}", indent + 3)]


def in_value_order(actions: Sequence[Action]) -> list[Action]:
    """The actions in their order, but a sweep's members in the order of their values
    (`i=2` before `i=10`), where the first of them stands."""
    first: dict[str, int] = {}
    for index, action in enumerate(actions):
        first.setdefault(sweep_of(action.target) or action.target, index)
    return sorted(
        actions,
        key=lambda a: (first[sweep_of(a.target) or a.target], member_order(a.target)),
    )


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
    reason = _cell(_suspended(action) + action.reason + _context(action))
    return f"| {symbol} | {action.kind.value} | {_code(action.target)} | {reason} | {fields} |"


def _markdown_block(block: SweepBlock, plan: Plan) -> str:
    symbol = _code(block.symbol) if block.symbol.strip() else ""
    return (
        f"| {symbol} | {block.kind.value} | {_code(block.sweep)} | {_cell(block.what(plan))} |  |"
    )


def as_markdown(
    plan: Plan, *, show_noop: bool = True, members: bool = False, width: int | None = None
) -> str:
    """For a PR comment: a table, never wrapped (`width` is accepted, as by every renderer)."""
    lines = [f"### {header(plan)}", ""]
    # Blank quote lines between notes, else markdown joins them into one paragraph.
    quoted = "\n>\n".join(f"> {_cell(note)}" for note in _notes(plan))
    if quoted:
        lines += [quoted, ""]
    actions = _visible(plan, show_noop)
    if actions:
        lines += ["| | action | target | reason | changed fields |", "|---|---|---|---|---|"]
        for item in grouped(actions):
            if isinstance(item, Action):
                lines.append(_markdown_row(item))
                continue
            lines.append(_markdown_block(item, plan))
            if members:
                lines += [_markdown_row(action) for action in in_value_order(item.actions)]
        lines.append("")
    if unchanged := _unchanged_line(plan, show_noop):
        lines += [*unchanged, ""]
    lines.append(f"**{summary(plan)}**")
    lines += [f"\n**{_cell(line)}**" for line in guard_line(plan)]
    return "\n".join(lines) + "\n"


def as_json(
    plan: Plan, *, show_noop: bool = True, members: bool = False, width: int | None = None
) -> str:
    """The whole plan, so that it reads back equal without `summary`, plus the counts.

    JSON is for machines, which filter for themselves: every action is always there and
    `show_noop`, `members` and `width` are accepted only so that all renderers are called
    the same way.
    """
    return json.dumps(document(plan), indent=2) + "\n"


def document(plan: Plan) -> dict[str, Any]:
    """The plan as JSON data, with its counts: what ``as_json`` writes."""
    data = plan.model_dump(mode="json")
    counts: dict[str, int | bool] = {kind.value: plan.count(kind) for kind in ActionKind}
    data["summary"] = {**counts, "has_changes": plan.has_changes, "held": plan.held}
    return data


RENDERERS: dict[str, Renderer] = {"text": as_text, "markdown": as_markdown, "json": as_json}


# The action's symbol and word in colour at a terminal, as status colours its words.
STYLES = {
    ActionKind.SUBMIT: "green",
    ActionKind.RETRY: "green",
    ActionKind.REQUEUE: "green",
    ActionKind.REPLACE: "yellow",
    ActionKind.MAY_RERUN: "yellow",
    ActionKind.CANCEL: "red",
    ActionKind.TEARDOWN: "red",
    ActionKind.BLOCKED: "red",
    ActionKind.ADOPT: "cyan",
    ActionKind.REUSE: "cyan",
    ActionKind.SETUP: "cyan",
    ActionKind.MOVED: "cyan",
}
_KINDS = "|".join(re.escape(kind.value) for kind in sorted(ActionKind, key=lambda k: -len(k.value)))
# A line of an action (not its continuations): the symbol's column, then its kind.
_ACTION_LINE = re.compile(rf"^.{{{_SYMBOL_WIDTH}}} ({_KINDS})(?=  |$)", re.MULTILINE)


def styled(text: str) -> Text:
    """The text of ``as_text`` with each action's symbol and word in its colour."""
    from rich.text import Text

    out = Text(text)
    for match in _ACTION_LINE.finditer(text):
        style = STYLES.get(ActionKind(match.group(1)))
        if style is not None:
            out.stylize(style, match.start(), match.end())
    return out
