"""Small words every report uses."""

from __future__ import annotations


def plural(count: int, word: str) -> str:
    """`1 run`, `2 runs`, `0 runs`."""
    return f"{count} {word}{'' if count == 1 else 's'}"
