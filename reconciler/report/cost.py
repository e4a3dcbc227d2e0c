"""`recon cost` as text, markdown and JSON: the ledger of ``engine/ledger/cost``."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from datetime import UTC, timedelta
from enum import StrEnum
from typing import Any

from reconciler.desired.matrix import sweep_of
from reconciler.desired.resources import span
from reconciler.engine.ledger.cost import SAVING_WORDS, Hours, Ledger, Spent
from reconciler.engine.plan.forecast import Expected, RunEstimate
from reconciler.engine.plan.sizes import (
    FEWEST,
    LAST,
    MARGIN,
    MEMORY_STEP_MB,
    Change,
    Sizes,
    Suggested,
    Suggestion,
)
from reconciler.report.wrap import wrapped
from reconciler.words import listed, plural

# The ways hours were spent, in the order they are shown, and their headings.
COLUMNS: tuple[tuple[Spent, str], ...] = (
    (Spent.CURRENT, "current"),
    (Spent.SUPERSEDED, "superseded"),
    (Spent.FAILED, "failed"),
    (Spent.CANCELLED, "cancelled"),
    (Spent.IDLE, "alloc idle"),
    (Spent.ALLOCATION_WORK, "alloc work"),
    (Spent.RUNNING, "running"),
)


class Unit(StrEnum):
    """Which hours the columns by way of spending split: GPU-hours or CPU-hours."""

    gpu = "gpu"
    cpu = "cpu"


def _figure(hours: float) -> str:
    """Hours to three decimals (a few seconds' job shows), ``-`` for none at all."""
    return f"{hours:.3f}" if hours else "-"


def _split(hours: Hours, unit: Unit) -> dict[Spent, float]:
    return hours.gpu if unit is Unit.gpu else hours.cpu


Table = tuple[list[str], list[list[str]]]


def _project_table(book: Ledger) -> Table:
    """The project's hours, one row per way they were spent."""
    rows = [
        [
            title,
            _figure(book.project.gpu.get(spent, 0.0)),
            _figure(book.project.cpu.get(spent, 0.0)),
        ]
        for spent, title in COLUMNS
        if spent is not Spent.RUNNING or book.running_counted  # said when any job runs
    ]
    rows.append(["total", _figure(book.project.gpu_h), _figure(book.project.cpu_h)])
    return ["", "GPU-h", "CPU-h"], rows


def _table(first: str, named: Mapping[str, Hours], unit: Unit) -> Table:
    """One row per name: its hours, those of each way of spending any row has, its wait."""
    used = [
        (spent, title)
        for spent, title in COLUMNS
        if any(_split(hours, unit).get(spent) for hours in named.values())
    ]
    head = [first, "GPU-h", "CPU-h", *(f"{title} {unit.value.upper()}-h" for _, title in used)]
    rows = [
        [
            name,
            _figure(hours.gpu_h),
            _figure(hours.cpu_h),
            *(_figure(_split(hours, unit).get(spent, 0.0)) for spent, _ in used),
            _figure(hours.wait_h),
            str(hours.jobs),
        ]
        for name, hours in named.items()
    ]
    return [*head, "wait h", "jobs"], rows


def _tables(book: Ledger, unit: Unit) -> list[tuple[str, Table]]:
    runs = {
        f"{name} (in {book.in_allocation[name].partition('.')[0]})"
        if name in book.in_allocation
        else name: hours
        for name, hours in sorted(book.runs.items())
    }
    commits = {commit[:12]: hours for commit, hours in book.commits.items()}
    named = (
        ("Runs", "run", runs),
        ("Sweeps", "sweep", dict(sorted(book.sweeps.items()))),
        ("Allocations", "allocation", dict(sorted(book.allocations.items()))),
        ("Commits", "commit", commits),
    )
    return [("Project", _project_table(book))] + [
        (title, _table(first, rows, unit)) for title, first, rows in named if rows
    ]


def _notes(book: Ledger) -> list[str]:
    notes = [
        f"Queue wait: {_figure(book.project.wait_h)} h over {plural(book.project.jobs, 'job')}.",
        "GPU-h and CPU-h: what the jobs held (sacct's AllocTRES times ElapsedRaw). A run "
        "inside an allocation (in JOB) is shown on its line and counted once, in the "
        "allocation's held time.",
    ]
    if not book.project.jobs:
        notes.append("No job of the project has ended with what it held recorded yet.")
    if book.running_counted and book.looked_at is not None:
        at = book.looked_at.astimezone(UTC).strftime("%H:%M:%S")
        notes.append(
            f"{plural(book.running_counted, 'job')} still running counted as held so far "
            f"(sacct's ElapsedRaw at {at} UTC), as running (an allocation's: idle and work)."
        )
    if book.running:
        if book.looked_at is not None:
            why = "queued, or not in sacct's accounting yet"
            why += f" ({book.not_reached})" if book.not_reached else ""
        else:
            why = f"this figure excludes them ({book.not_reached or 'the cluster was not asked'})"
        notes.append(f"{plural(book.running, 'job')} not ended yet: {why}; counted once ended.")
    if book.backfilled:
        notes.append(
            f"{plural(book.backfilled, 'job')} settled before recon read usage: back-filled "
            "from the scheduler's accounting into the journal just now."
        )
    if book.unknown:
        gone, asked = book.unknown_gone, book.unknown - book.unknown_gone
        said = []
        if asked and book.not_reached:
            said.append(f"{asked} not asked for ({book.not_reached})")
        elif asked:
            said.append(f"{asked} not read from the scheduler's accounting")
        if gone:
            said.append(f"{gone} no longer in the scheduler's accounting")
        notes.append(
            f"{plural(book.unknown, 'ended job')} with no usage in the journal (settled by "
            f"a recon that did not read it): not counted; {listed(said)}."
        )
    if book.shard_h:
        notes.append(
            f"{_figure(book.shard_h)} GPU shard-hours held, not in the GPU-h: "
            f"{book.shards_unvalued or 'the shards per GPU were not read'}."
        )
    return notes


def _source(book: Ledger) -> str:
    """Where the figures come from: the journal, and the cluster when it was asked."""
    asked = book.looked_at is not None or book.backfilled
    return "from its journal and the cluster" if asked else "from its journal"


def _saved_lines(book: Ledger) -> list[str]:
    return [
        f"{_figure(saved.gpu_h)} GPU-h, {_figure(saved.cpu_h)} CPU-h over "
        f"{plural(saved.jobs, 'job')}: {SAVING_WORDS[kind]}"
        for kind, saved in book.saved.items()
    ]


# -- sizes suggested from what the jobs used (``engine/plan/sizes``) ------------------------

SIZES_HOW = (
    f"each {MARGIN:g} x the most its last {LAST} successes used (peak memory, elapsed time, "
    f"busy CPUs), rounded up; from {FEWEST} successes on; the specs are not changed"
)
_CHANGE = {Change.LOWER: "lower", Change.RAISE: "RAISE", Change.KEEP: "keep"}


def _memory(mib: float | None) -> str:
    if mib is None:
        return "-"
    return f"{mib / 1024:.2f} GiB" if mib >= 1024 else f"{mib:.0f} MiB"


def _duration(seconds: float | None) -> str:
    return "none" if seconds is None else span(timedelta(seconds=round(seconds)))


def _cpus(count: float | None) -> str:
    return "-" if count is None else f"{count:g}"


def _resource(suggested: Suggested, say: Callable[[float | None], str]) -> list[str]:
    """held, used, suggested (and what to do) of one resource."""
    change = suggested.change
    to = say(suggested.suggested) + ("" if change is Change.KEEP else f" ({_CHANGE[change]})")
    return [say(suggested.held), say(suggested.needed), to]


def _sizes_table(sizes: Sizes) -> Table:
    head = ["run", "jobs", "memory", "peak", "suggest", "time", "longest", "suggest"]
    head += ["CPUs", "busy", "suggest", "CPU-h", "mem GiB-h", "GPU-h reserved", "wait h"]
    rows = []
    for name, suggestion in [*sizes.runs.items(), *sizes.sweeps.items()]:
        shown = f"{name} (sweep)" if name in sizes.sweeps else name
        busy = Suggested(
            suggestion.cpus.held, round(suggestion.cpus.needed, 2), suggestion.cpus.suggested
        )
        rows.append(
            [
                shown,
                str(suggestion.jobs),
                *_resource(suggestion.memory, _memory),
                *_resource(suggestion.time, _duration),
                *_resource(busy, _cpus),
                _figure(suggestion.saved_cpu_h),
                _figure(suggestion.saved_memory_gib_h),
                _figure(suggestion.reserved_gpu_h),
                _figure(suggestion.wait_h),
            ]
        )
    return head, rows


def _sizes_notes(sizes: Sizes) -> list[str]:
    notes = [f"The rule: {SIZES_HOW}."]
    if sizes.runs or sizes.sweeps:
        notes.append(
            "Saved had they asked so, over the same jobs: CPU-h and memory GiB-h held beyond "
            "the suggestion; GPU-h their time limits reserved beyond the suggested one "
            "(promised to the job, so not planned for others'); and the queue wait they had, "
            "which a smaller request puts at stake (by how much it would shrink, the queue "
            "decides)."
        )
    if sizes.too_few:
        notes.append(
            f"Too few measured successes yet to suggest sizes for: {listed(list(sizes.too_few))}."
        )
    return notes


def _sizes_text(book: Ledger, width: int | None) -> list[str]:
    if book.sizes is None or not book.sizes.any:
        return []
    lines = ["", "Sizes suggested:"]
    head, rows = _sizes_table(book.sizes)
    if rows:
        lines += _aligned(head, rows)
    for note in _sizes_notes(book.sizes):
        lines += wrapped(f"  {note}", width, 4)
    return lines


def _sizes_markdown(book: Ledger) -> list[str]:
    if book.sizes is None or not book.sizes.any:
        return []
    lines = ["", "**Sizes suggested**", ""]
    head, rows = _sizes_table(book.sizes)
    if rows:
        lines += ["| " + " | ".join(head) + " |"]
        lines.append("|" + "|".join(["---", *["---:"] * (len(head) - 1)]) + "|")
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
        lines.append("")
    return lines + [f"_{note}_" for note in _sizes_notes(book.sizes)]


def _suggested_json(suggested: Suggested) -> dict[str, object]:
    return {
        "held": suggested.held,
        "needed": suggested.needed,
        "suggested": suggested.suggested,
        "change": suggested.change.value,
    }


def _suggestion_json(suggestion: Suggestion) -> dict[str, object]:
    return {
        "jobs": suggestion.jobs,
        "memory_mib_per_node": _suggested_json(suggestion.memory),
        "time_limit_seconds": _suggested_json(suggestion.time),
        "cpus": _suggested_json(suggestion.cpus),
        "saved_cpu_hours": suggestion.saved_cpu_h,
        "saved_memory_gib_hours": suggestion.saved_memory_gib_h,
        "reserved_gpu_hours": suggestion.reserved_gpu_h,
        "queue_wait_hours": suggestion.wait_h,
    }


def sizes_data(sizes: Sizes | None) -> dict[str, object] | None:
    """The suggestions as JSON data (`recon cost --format json`'s ``sizes``)."""
    if sizes is None:
        return None
    return {
        "how": SIZES_HOW,
        "rule": {
            "last": LAST,
            "fewest": FEWEST,
            "margin": MARGIN,
            "memory_step_mib": MEMORY_STEP_MB,
        },
        "runs": {name: _suggestion_json(s) for name, s in sizes.runs.items()},
        "sweeps": {name: _suggestion_json(s) for name, s in sizes.sweeps.items()},
        "too_few_successes": list(sizes.too_few),
    }


def _aligned(head: list[str], rows: list[list[str]]) -> list[str]:
    """A table's lines, its first column left-aligned and the others right."""
    widths = [max(len(cells[i]) for cells in (head, *rows)) for i in range(len(head))]
    lines = []
    for cells in (head, *rows):
        first = cells[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(cells[1:], widths[1:], strict=True)]
        lines.append("  " + "  ".join([first, *rest]).rstrip())
    return lines


def as_text(book: Ledger, project: str, unit: Unit = Unit.gpu, width: int | None = None) -> str:
    """Tables as they are (a row is never broken); the lines of words wrapped to ``width``."""
    lines = [f"Cost of project {project}, {_source(book)}"]
    for title, (head, rows) in _tables(book, unit):
        lines += ["", f"{title}:", *_aligned(head, rows)]
    saved = _saved_lines(book)
    lines += ["", "Saved by recon:"]
    for line in saved or ["nothing counted"]:
        lines += wrapped(f"  {line}", width, 4)
    lines += _sizes_text(book, width)
    lines.append("")
    for note in _notes(book):
        lines += wrapped(note, width, 2)
    return "\n".join(lines) + "\n"


def as_markdown(book: Ledger, project: str, unit: Unit = Unit.gpu, width: int | None = None) -> str:
    lines = [f"### Cost of project {project}, {_source(book)}"]
    for title, (head, rows) in _tables(book, unit):
        lines += ["", f"**{title}**", "", "| " + " | ".join(head) + " |"]
        lines.append("|" + "|".join(["---", *["---:"] * (len(head) - 1)]) + "|")
        lines += ["| " + " | ".join(cells) + " |" for cells in rows]
    saved = _saved_lines(book)
    lines += ["", "**Saved by recon**", "", *(f"- {line}" for line in saved or ["nothing counted"])]
    lines += _sizes_markdown(book)
    lines += ["", *(f"_{note}_" for note in _notes(book))]
    return "\n".join(lines) + "\n"


def _hours_json(hours: Hours) -> dict[str, object]:
    return {
        "gpu_hours": hours.gpu_h,
        "cpu_hours": hours.cpu_h,
        "gpu_hours_by": {spent.value: hours.gpu.get(spent, 0.0) for spent, _ in COLUMNS},
        "cpu_hours_by": {spent.value: hours.cpu.get(spent, 0.0) for spent, _ in COLUMNS},
        "queue_wait_hours": hours.wait_h,
        "jobs": hours.jobs,
    }


def _named(rows: Mapping[str, Hours]) -> dict[str, dict[str, object]]:
    return {name: _hours_json(hours) for name, hours in rows.items()}


def ledger_data(book: Ledger, project: str) -> dict[str, Any]:
    """Every figure of the ledger as JSON data: what ``as_json`` writes and the web view
    shows."""
    return {
        "project": project,
        "total": _hours_json(book.project),
        "runs": {
            name: {**_hours_json(hours), "in_allocation_job": book.in_allocation.get(name)}
            for name, hours in sorted(book.runs.items())
        },
        "sweeps": _named(dict(sorted(book.sweeps.items()))),
        "allocations": _named(dict(sorted(book.allocations.items()))),
        "commits": _named(book.commits),
        "saved": {
            kind.value: {
                "gpu_hours": saved.gpu_h,
                "cpu_hours": saved.cpu_h,
                "jobs": saved.jobs,
                "how": SAVING_WORDS[kind],
            }
            for kind, saved in book.saved.items()
        },
        # read back by `recon plan --durations FILE` (``durations_of``)
        "last_durations": dict(sorted(book.last_durations.items())),
        "jobs_running": book.running,
        "jobs_running_counted": book.running_counted,
        "running_read_at": None if book.looked_at is None else book.looked_at.isoformat(),
        "cluster_not_reached": book.not_reached,
        "jobs_without_usage": book.unknown,
        "jobs_without_usage_not_in_accounting": book.unknown_gone,
        "jobs_backfilled": book.backfilled,
        "shard_hours_not_counted": book.shard_h,
        "sizes": sizes_data(book.sizes),
    }


def as_json(book: Ledger, project: str, unit: Unit = Unit.gpu, width: int | None = None) -> str:
    """Every figure, both units (``unit`` and ``width`` are the text's)."""
    return json.dumps(ledger_data(book, project), indent=2) + "\n"


def durations_of(document: object) -> dict[str, float]:
    """The last durations (run -> seconds) a `recon cost --format json` document holds,
    for `recon plan --durations`; ValueError saying what is wrong, in words."""
    if not isinstance(document, dict) or not isinstance(document.get("last_durations"), dict):
        raise ValueError(
            'holds no "last_durations" object (run -> seconds): write it with `recon cost '
            "--format json > FILE` where the project's journal is"
        )
    durations: dict[str, float] = {}
    for name, seconds in document["last_durations"].items():
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0:
            raise ValueError(
                f"last_durations.{name} is {json.dumps(seconds)}, not a number of seconds"
            )
        durations[str(name)] = float(seconds)
    return durations


RENDERERS: dict[str, Callable[[Ledger, str, Unit, int | None], str]] = {
    "text": as_text,
    "markdown": as_markdown,
    "json": as_json,
}


# -- the expected cost of a plan or a change ---------------------------------------------

_NAMED = 5  # runs never run named in a line; the rest counted
_HOW = "each its last successful duration times what it asks for now"


def _grouped(estimate: Expected) -> dict[str, list[RunEstimate]]:
    """The runs, a sweep's members gathered under the sweep's name."""
    groups: dict[str, list[RunEstimate]] = {}
    for run in estimate.runs:
        groups.setdefault(sweep_of(run.name) or run.name, []).append(run)
    return groups


def _unknown_words(estimate: Expected) -> str | None:
    unknown = estimate.unknown
    if not unknown:
        return None
    names = list(dict.fromkeys(sweep_of(run.name) or run.name for run in unknown))
    if len(names) > _NAMED:
        names = [*names[:_NAMED], f"{len(names) - _NAMED} more"]
    ceiling = estimate.ceiling_gpu_h
    bound = (
        f"at most {_figure(ceiling)} GPU-h by the time limits"
        if ceiling
        else "no GPUs asked for"
        if ceiling is not None
        else "no ceiling: one asks for GPUs with no time limit"
    )
    return f"never run: {listed(names)} ({plural(len(unknown), 'run')}): cost unknown, {bound}"


def _shown(estimate: Expected) -> bool:
    """Whether a plan says its cost: when a run it will run asks for GPUs."""
    return any(run.asks.gpus for run in estimate.runs)


def _known_words(estimate: Expected) -> str:
    how = _HOW if estimate.source is None else f"{_HOW}; durations the journal lacks from "
    how += "" if estimate.source is None else estimate.source
    return (
        f"{_figure(estimate.gpu_h)} GPU-h, {_figure(estimate.cpu_h)} CPU-h for "
        f"{plural(len(estimate.known), 'run')} ({how})"
    )


def expected_text(estimate: Expected, width: int | None = None) -> str:
    """A plan's text ends with these lines, wrapped to ``width``; none when it runs nothing
    that asks for GPUs."""
    if not _shown(estimate):
        return ""
    said = [f"Expected cost: {_known_words(estimate)}."] if estimate.known else []
    if (unknown := _unknown_words(estimate)) is not None:
        said.append(f"{unknown[0].upper()}{unknown[1:]}.")
    return "".join(f"{line}\n" for text in said for line in wrapped(text, width, 2))


# A PR comment's cost table names at most this many runs or sweeps; the rest are counted.
_ROWS = 20


def expected_markdown(estimate: Expected) -> str:
    """A plan's or a spec diff's markdown ends with this section; empty when it runs
    nothing that asks for GPUs."""
    if not _shown(estimate):
        return ""
    lines = [""]
    if estimate.known:
        lines.append(f"**Expected cost: {_known_words(estimate)}.**")
    if (unknown := _unknown_words(estimate)) is not None:
        lines += [*([""] if estimate.known else []), f"**{unknown[0].upper()}{unknown[1:]}.**"]
    lines += ["", "| run | GPUs | CPUs | last run | expected GPU-h |", "|---|---:|---:|---:|---:|"]
    groups = list(_grouped(estimate).items())
    for name, runs in groups[:_ROWS]:
        shown = f"`{name}`" + (
            f" ({plural(len(runs), 'member')})" if sweep_of(runs[0].name) else ""
        )
        known = [run for run in runs if run.last_s is not None]
        last = "never" if not known else span(timedelta(seconds=max(r.last_s or 0 for r in known)))
        gpu_h = _figure(sum(run.gpu_h or 0.0 for run in known)) if known else "unknown"
        lines.append(f"| {shown} | {runs[0].asks.gpus} | {runs[0].asks.cpus} | {last} | {gpu_h} |")
    if len(groups) > _ROWS:
        lines.append(f"| and {len(groups) - _ROWS} more | | | | |")
    return "\n".join(lines) + "\n"


def expected_json(estimate: Expected) -> dict[str, object]:
    return {
        "gpu_hours": estimate.gpu_h,
        "cpu_hours": estimate.cpu_h,
        "how": _HOW,
        "durations_from": estimate.source,
        "unknown_runs": [run.name for run in estimate.unknown],
        "unknown_ceiling_gpu_hours": estimate.ceiling_gpu_h,
        "runs": [
            {
                "name": run.name,
                "gpus": run.asks.gpus,
                "cpus": run.asks.cpus,
                "last_seconds": run.last_s,
                "time_limit_seconds": run.asks.limit_s,
                "gpu_hours": run.gpu_h,
                "cpu_hours": run.cpu_h,
            }
            for run in estimate.runs
        ],
    }
