"""Small words every message uses, from the engine's reasons to the reports: one home,
at the bottom of the layers, so a count or a list reads the same everywhere."""

from __future__ import annotations

from collections.abc import Sequence


def plural(count: int, word: str, words: str | None = None) -> str:
    """`1 run`, `2 runs`, `0 runs`; `1 GPU`, `2 GPUs`; ``words`` for an irregular plural."""
    return f"{count} {word if count == 1 else (words or word + 's')}"


def listed(items: Sequence[str]) -> str:
    """`a`, `a and b`, `a, b and c`."""
    if len(items) <= 1:
        return "".join(items)
    return f"{', '.join(items[:-1])} and {items[-1]}"
