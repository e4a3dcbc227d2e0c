"""`recon status` as text for people: one line per run, in columns that fit the terminal.

Only the last column (what the next apply does, and why) is long; it is shortened to fit
the width when there is one (a terminal, or COLUMNS), with its full text in `--wide` and
`--format json`. Piped without COLUMNS, lines are never shortened and never wrapped, so
they can be grepped whole. Styles only go to a terminal; `ascii` replaces the ellipsis
for a terminal that cannot show it (LC_ALL=C).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from rich.text import Text

from reconciler.desired.matrix import sweep_of
from reconciler.engine.ledger.status import AllocationStatus, RunStatus
from reconciler.engine.plan.actions import ActionKind, Plan
from reconciler.report.plan import banner
from reconciler.scheduler.states import Health
from reconciler.words import plural

GAP = "  "
# Health words in colour on a terminal; sync words too, where they call for an apply.
STYLES = {
    "succeeded": "green",
    "current": "green",
    "running": "cyan",
    "pending": "cyan",
    "failed": "red",
    "blocked": "red",
    "cancelled": "yellow",
    "outdated": "yellow",
    "missing": "yellow",
}
_MIN_LAST, _MIN_FIRST = 20, 12  # what shortening leaves of the last and the first column


@dataclass(frozen=True)
class Layout:
    """How to lay the text out: `width` None for no limit (piped)."""

    width: int | None = None
    wide: bool = False
    styled: bool = False
    ascii: bool = False


def render(
    plan: Plan,
    rows: Sequence[RunStatus],
    allocations: Sequence[AllocationStatus],
    layout: Layout,
    now: datetime,
) -> Text:
    commit = plan.commit[:12] if plan.commit else "the work tree"
    out = Text(f"{plan.project} at {commit} (scheduler: {plan.scheduler})\n")
    for line in banner(plan):
        out.append(f"{line}\n", style="bold red" if line.startswith("HELD") else "bold yellow")
    out.append("\n")
    header = ["RUN", "SYNC", "HEALTH", "JOB"]
    if layout.wide:
        header += ["FINISHED", "LAST SUCCESS", "OUTPUTS"]
    table = [
        _sweep_cells(item, layout, now) if isinstance(item, list) else _cells(item, layout, now)
        for item in by_sweep(rows, plan.targets)
    ]
    out.append_text(_columns([*header, "NEXT"], table, layout))
    out.append(f"\n{summary(rows)}\n")
    for note in plan.notes:
        out.append(f"{note}\n")
    if allocations:
        out.append("\n")
        out.append_text(_allocations(allocations, layout))
    return out


def _cells(row: RunStatus, layout: Layout, now: datetime) -> list[str]:
    wide = [
        _when(row.finished_at, now),
        row.last_success_commit[:12] if row.last_success_commit else "-",
        ", ".join(f"{name}={path}" for name, path in row.outputs.items()) or "-",
    ]
    return [
        row.name,
        row.sync.value,
        health_words(row),
        row.job_id or "-",
        *(wide if layout.wide else []),
        next_words(row) if row.note is None else f"{next_words(row)} (last: {row.note})",
    ]


def by_sweep(
    rows: Sequence[RunStatus], targets: Sequence[str]
) -> list[RunStatus | list[RunStatus]]:
    """The rows with each sweep's members gathered into one list where the first stands,
    unless the sweep was asked for by name (`recon status train` lists its members)."""
    items: list[RunStatus | list[RunStatus]] = []
    groups: dict[str, list[RunStatus]] = {}
    for row in rows:
        sweep = sweep_of(row.name)
        if sweep is None or sweep in targets:
            items.append(row)
        elif sweep in groups:
            groups[sweep].append(row)
        else:
            groups[sweep] = [row]
            items.append(groups[sweep])
    return items


def _sweep_cells(members: list[RunStatus], layout: Layout, now: datetime) -> list[str]:
    """One row for a sweep: its members counted by sync, by health, and by what the next
    apply does; its job arrays."""
    sweep = sweep_of(members[0].name) or members[0].name
    syncs = Counter(row.sync.value for row in members)
    healths = Counter(row.health.value if row.health else "no job" for row in members)
    arrays = sorted({row.job_id.partition("_")[0] for row in members if row.job_id}, key=_number)
    nexts = Counter(row.next.value for row in members)
    finished = [row.finished_at for row in members if row.finished_at is not None]
    return [
        f"{sweep} ({plural(len(members), 'member')})",
        counts(syncs),
        counts(healths),
        ", ".join(arrays[:3]) + (", ..." if len(arrays) > 3 else "") or "-",
        *([_when(max(finished), now) if finished else "-", "-", "-"] if layout.wide else []),
        counts(nexts),
    ]


def _number(job_id: str) -> int:
    return int(job_id) if job_id.isdigit() else -1


def counts(counter: Counter[str]) -> str:
    """A sweep's members counted, as its row says it: `current`, or `4 current, 2
    missing`: the commonest first."""
    if len(counter) == 1:
        return next(iter(counter))
    return ", ".join(f"{n} {word}" for word, n in counter.most_common())


def summary(rows: Sequence[RunStatus]) -> str:
    """`4 runs: 3 current, 1 never run; 1 failed, 1 blocked`."""
    if not rows:
        return "No runs."
    syncs = Counter(row.sync.value for row in rows)
    healths = Counter(row.health for row in rows)
    line = f"{plural(len(rows), 'run')}: " + ", ".join(f"{n} {s}" for s, n in syncs.items())
    trouble = [
        f"{healths[health]} {health.value}"
        for health in (Health.FAILED, Health.BLOCKED)
        if healths[health]
    ]
    return line + (f"; {', '.join(trouble)}" if trouble else "") + "."


def _allocations(rows: Sequence[AllocationStatus], layout: Layout) -> Text:
    header = ["ALLOCATION", "JOB", "HEALTH", "NODES", "TIME LEFT", "STEPS"]
    if layout.wide:
        header.append("HISTORY")
    table = [
        [
            row.name,
            row.job_id or "-",
            row.health.value if row.health else "-",
            row.nodes or "-",
            _duration(row.time_left),
            # No step runs: how long none has (what idle_release counts).
            ", ".join(map(str, row.steps_running))
            or (f"none for {_duration(row.idle)}" if row.idle is not None else "-"),
            *([", ".join(map(str, row.history)) or "-"] if layout.wide else []),
            next_words(row),
        ]
        for row in rows
    ]
    return _columns([*header, "NEXT"], table, layout)


def _columns(header: list[str], table: list[list[str]], layout: Layout) -> Text:
    """Left-aligned columns; the last one shortened to what the width leaves it."""
    widths = [max(len(cell) for cell in column) for column in zip(header, *table, strict=True)]
    room: dict[int, int] = {}  # column -> the width it is shortened to
    if layout.width is not None and not layout.wide:
        left = layout.width - sum(widths[:-1]) - len(GAP) * (len(widths) - 1)
        if left < _MIN_LAST:  # very long names: the first column gives way too
            widths[0] = room[0] = max(widths[0] - (_MIN_LAST - left), _MIN_FIRST)
        room[len(widths) - 1] = max(left, _MIN_LAST)
    if not layout.styled:
        # NO_COLOR, --no-color, or not a terminal: plain text, joined as strings (a Text
        # of 10,000 styled lines costs seconds to build and to print).
        return Text("".join(_plain_line(cells, widths, room, layout) for cells in [header, *table]))
    out = Text()
    for index, cells in enumerate([header, *table]):
        line = Text()
        for column, cell in enumerate(cells):
            last = column == len(cells) - 1
            shown = _shorten(cell, room[column], layout.ascii) if column in room else cell
            style = "bold" if index == 0 else STYLES.get(cell.split(" (")[0], "")
            line.append(shown if last else shown.ljust(widths[column]), style or None)
            if not last:
                line.append(GAP)
        line.rstrip()
        out.append_text(line)
        out.append("\n")
    return out


def _plain_line(cells: list[str], widths: list[int], room: dict[int, int], layout: Layout) -> str:
    """One row as `_columns` lays it out, without styles."""
    last = len(cells) - 1
    shown = [
        _shorten(cell, room[column], layout.ascii) if column in room else cell
        for column, cell in enumerate(cells)
    ]
    padded = [
        cell if column == last else cell.ljust(widths[column]) for column, cell in enumerate(shown)
    ]
    return GAP.join(padded).rstrip() + "\n"


def _shorten(text: str, room: int, ascii: bool) -> str:
    if len(text) <= room:
        return text
    mark = "..." if ascii else "…"
    cut = text[: room - len(mark)]
    # At a word's end, not mid-word, when there is a space in the last third.
    space = cut.rfind(" ")
    if space > room * 2 // 3:
        cut = cut[:space]
    return cut.rstrip(" ,;:(") + mark


def health_words(row: RunStatus) -> str:
    """The HEALTH column: `failed (timed out)`, `pending (Resources)`, `-` with no job."""
    if row.health is None:
        return "-"
    # Slurm's state in words (timed out, held in special exit (...)), else why it waits.
    words = row.how or row.waiting_for
    if not words:
        return row.health.value
    # "pending (Resources)", but "pending, held (JobHeldAdmin)": no parentheses in parentheses.
    return f"{row.health.value}, {words}" if "(" in words else f"{row.health.value} ({words})"


def next_words(row: RunStatus | AllocationStatus) -> str:
    """The NEXT column: what the next apply would do, and why."""
    # "no-op: current (job 1 succeeded)": the sync column already says it does nothing.
    return row.why if row.next is ActionKind.NOOP else row.reason


def _when(moment: datetime | None, now: datetime) -> str:
    """`15:21` today, `11-30 15:21` this year, `2025-11-30` before: short, and exact to
    the minute while it matters."""
    if moment is None:
        return "-"
    local, today = moment.astimezone(), now.astimezone()
    if local.date() == today.date():
        return local.strftime("%H:%M")
    if local.year == today.year:
        return local.strftime("%m-%d %H:%M")
    return local.strftime("%Y-%m-%d")


def _duration(left: timedelta | None) -> str:
    if left is None:
        return "-"
    minutes = int(left.total_seconds()) // 60
    hours, minutes = divmod(max(minutes, 0), 60)
    return f"{hours}h{minutes:02d}m" if hours else f"{minutes}m"
