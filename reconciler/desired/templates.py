"""Command templates: `{inputs.X.path}`, `{outputs.Y.path}`, `{run.name}`, `{run.dir}`,
for a run with a checkpoint `{checkpoint.path}`, and in a sweep `{matrix.AXIS}`; an
input that gathers a sweep's members has `{inputs.X.paths}` and `{inputs.X.list}`.

A token is a brace pair around a dotted name (`{a.b}`); anything else in braces is left
to the shell (`${HOME}`, `{a,b}`, awk's `{print $1}`). `{{` and `}}` stand for literal
braces. An unknown token is an error at validation, never a silent empty string.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from operator import methodcaller
from typing import Literal, Protocol, get_args

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


# The one list of tokens: what each names (the run, each input, each output, each matrix
# axis of a sweep's member) and its fields. Validation (`known_tokens`) and the renderer
# (`fill_in`, with values from ``scheduler/render``) both read it. ``paths`` and ``list``
# of an input are for one that gathers a sweep's members (shell-quoted paths; a file
# listing them, one per line); a single input has them too.
RunField = Literal["name", "dir"]
InputField = Literal["path", "paths", "list"]
OutputField = Literal["path"]
CheckpointField = Literal["path"]


class TokenValues(Protocol):
    """What one run's tokens stand for: the renderer's side of the list."""

    def run(self, field: RunField) -> str: ...
    def input(self, name: str, field: InputField) -> str: ...
    def output(self, name: str, field: OutputField) -> str: ...
    def matrix(self, axis: str) -> str: ...
    def checkpoint(self, field: CheckpointField) -> str: ...


def known_tokens(
    inputs: list[str], outputs: list[str], axes: Iterable[str] = (), *, checkpoint: bool = False
) -> set[str]:
    return {expression for expression, _ in _tokens(inputs, outputs, axes, checkpoint)}


def fill_in(
    values: TokenValues,
    inputs: Iterable[str],
    outputs: Iterable[str],
    axes: Iterable[str],
    *,
    checkpoint: bool = False,
) -> dict[str, str]:
    """The value of every token a run with these inputs, outputs and axes (and a
    checkpoint) may hold."""
    return {
        expression: ask(values) for expression, ask in _tokens(inputs, outputs, axes, checkpoint)
    }


def _tokens(
    inputs: Iterable[str], outputs: Iterable[str], axes: Iterable[str], checkpoint: bool
) -> Iterator[tuple[str, Callable[[TokenValues], str]]]:
    for run_field in get_args(RunField):
        yield f"run.{run_field}", methodcaller("run", run_field)
    if checkpoint:
        for checkpoint_field in get_args(CheckpointField):
            yield f"checkpoint.{checkpoint_field}", methodcaller("checkpoint", checkpoint_field)
    for name in inputs:
        for input_field in get_args(InputField):
            yield f"inputs.{name}.{input_field}", methodcaller("input", name, input_field)
    for name in outputs:
        for output_field in get_args(OutputField):
            yield f"outputs.{name}.{output_field}", methodcaller("output", name, output_field)
    for axis in axes:
        yield f"matrix.{axis}", methodcaller("matrix", axis)


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
