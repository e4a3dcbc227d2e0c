"""Lines that fit a width: broken between words, continued under a column (a hanging
indent). Plain text in, plain text out; no rich, so any command may use it cheaply."""

from __future__ import annotations

import textwrap

# A wrapped reason keeps at least this many columns; a lead wider than the width leaves
# it gives way: its continuations start further left.
_MIN_ROOM = 30
_FALLBACK_INDENT = 6


def wrapped(text: str, width: int | None, indent: int) -> list[str]:
    """`text` in lines of at most `width` columns, broken between words (a word longer
    than a line stays whole), each after the first indented by `indent`. The text's own
    leading spaces and the lead before `indent` stay as they are."""
    if width is None or len(text) <= width:
        return [text]
    if indent > width - _MIN_ROOM:
        indent = min(_FALLBACK_INDENT, indent)
    head, rest = text[:indent], text[indent:]
    if head.strip() and not head.endswith(" "):  # the lead runs into the words: break there
        split = head.rstrip().rfind(" ") + 1
        head, rest = text[:split], text[split:]
    return textwrap.wrap(
        rest,
        max(width, len(head) + _MIN_ROOM // 2),
        initial_indent=head,
        subsequent_indent=" " * indent,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [text]
