"""The live view of `recon apply --wait`: runs by state and the time elapsed."""

from __future__ import annotations

from collections import Counter

from rich.console import Group
from rich.table import Table
from rich.text import Text

from reconciler.engine.wait import Progress
from reconciler.report.plan import in_value_order

_ORDER = ("inflight", "waiting", "done", "failed", "blocked")
_WORDS = {
    "inflight": "in flight",
    "waiting": "waiting",
    "done": "done",
    "failed": "failed",
    "blocked": "blocked",
}


def counts_line(progress: Progress) -> str:
    counts: Counter[str] = Counter(action.outcome or "waiting" for action in progress.runs)
    parts = [f"{counts[key]} {_WORDS[key]}" for key in _ORDER if counts[key]]
    minutes, seconds = divmod(int(progress.elapsed), 60)
    return f"[{minutes:02d}:{seconds:02d}] pass {progress.passes}: " + (
        ", ".join(parts) or "no runs"
    )


def live_view(progress: Progress) -> Group:
    table = Table(show_header=True, header_style="bold", box=None)
    table.add_column("run")
    table.add_column("state")
    table.add_column("why")
    # Text, not markup: a member's values (`seeds[lr=0.5,seed=0]`) are no style tag.
    for action in in_value_order(progress.runs):
        word = _WORDS[action.outcome or "waiting"]
        table.add_row(Text(action.target), Text(word), Text(action.reason))
    return Group(Text(counts_line(progress)), table)
