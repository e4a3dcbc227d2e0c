"""Command templates: `{inputs.X.path}`, `{outputs.Y.path}`, `{run.name}`, `{run.dir}`,
and in a sweep `{matrix.AXIS}`; an input that gathers a sweep's members has
`{inputs.X.paths}` and `{inputs.X.list}`.

A token is a brace pair around a dotted name (`{a.b}`); anything else in braces is left
to the shell (`${HOME}`, `{a,b}`, awk's `{print $1}`). `{{` and `}}` stand for literal
braces. An unknown token is an error at validation, never a silent empty string.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

_TOKEN = re.compile(r"\{\{|\}\}|(?<!\$)\{([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_-]+)+)\}")


@dataclass(frozen=True)
class Token:
    expression: str
    offset: int


def tokens(text: str) -> list[Token]:
    return [
        Token(match.group(1), match.start())
        for match in _TOKEN.finditer(text)
        if match.group(1) is not None
    ]


def known_tokens(inputs: list[str], outputs: list[str], axes: Iterable[str] = ()) -> set[str]:
    """``paths`` and ``list`` of an input are for one that gathers a sweep's members
    (shell-quoted paths; a file listing them, one per line); a single input has them too."""
    return {
        "run.name",
        "run.dir",
        *(f"inputs.{name}.{what}" for name in inputs for what in ("path", "paths", "list")),
        *(f"outputs.{name}.path" for name in outputs),
        *(f"matrix.{axis}" for axis in axes),
    }


def unknown_tokens(text: str, known: set[str]) -> list[str]:
    return [token.expression for token in tokens(text) if token.expression not in known]


def quoted_tokens(text: str) -> list[str]:
    """The tokens written inside shell quotes (`"{outputs.o.path}"`): recon fills in a
    value already shell-quoted, so quotes around it become part of the value. Quotes are
    read as the shell reads them (backslashes, comments); a command whose quotes do not
    pair up (a here-document's text, say) is not judged."""
    spans: list[tuple[int, int]] = []  # (opening quote, closing quote)
    quote, start, index, word_start = "", 0, 0, True
    while index < len(text):
        char = text[index]
        if quote == "'":
            if char == "'":
                spans.append((start, index))
                quote = ""
        elif char == "\\":
            index += 1  # the next character is taken literally
        elif quote == '"':
            if char == '"':
                spans.append((start, index))
                quote = ""
        elif char in "'\"":
            quote, start = char, index
        elif char == "#" and word_start:
            end = text.find("\n", index)  # a comment, to the end of its line
            index = len(text) if end < 0 else end
            continue
        word_start = char in " \t\n;&|()"
        index += 1
    if quote:
        return []
    return [
        token.expression
        for token in tokens(text)
        if any(begin < token.offset < end for begin, end in spans)
    ]


def render(text: str, values: Mapping[str, str]) -> str:
    """Fill in every token; `values` must hold each one (validation made sure of it)."""

    def substitute(match: re.Match[str]) -> str:
        if match.group(0) == "{{":
            return "{"
        if match.group(0) == "}}":
            return "}"
        return values[match.group(1)]

    return _TOKEN.sub(substitute, text)
