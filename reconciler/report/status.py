"""`recon status` as a table for people."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table

from reconciler.engine.actions import Plan
from reconciler.engine.status import AllocationStatus, RunStatus


def as_table(plan: Plan, rows: Sequence[RunStatus]) -> Table:
    commit = plan.commit[:12] if plan.commit else "work tree"
    table = Table(
        title=f"{plan.project} at {commit} (scheduler: {plan.scheduler})",
        title_justify="left",
    )
    for column in ("run", "sync", "health", "job", "finished", "last success", "outputs", "next"):
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(
            row.name,
            row.sync.value,
            _health(row),
            row.job_id or "-",
            row.finished_at.strftime("%Y-%m-%d %H:%M") if row.finished_at else "-",
            row.last_success_commit[:12] if row.last_success_commit else "-",
            ", ".join(f"{name}={path}" for name, path in row.outputs.items()) or "-",
            row.reason if row.note is None else f"{row.reason} (last: {row.note})",
        )
    if plan.notes:
        table.caption = "\n".join(plan.notes)
    return table


def allocations_table(rows: Sequence[AllocationStatus]) -> Table:
    table = Table(title="allocations", title_justify="left")
    for column in ("allocation", "job", "health", "nodes", "time left", "steps", "history"):
        table.add_column(column, overflow="fold")
    table.add_column("next", overflow="fold")
    for row in rows:
        left = str(row.time_left) if row.time_left is not None else "-"
        table.add_row(
            row.name,
            row.job_id or "-",
            row.health.value if row.health else "-",
            row.nodes or "-",
            left,
            ", ".join(row.steps_running) or "-",
            "\n".join(row.history) or "-",
            row.reason,
        )
    return table


def _health(row: RunStatus) -> str:
    if row.health is None:
        return "-"
    return f"{row.health.value} ({row.how})" if row.how else row.health.value
