"""YAML text to plain data, remembering the line of every key and item.

ruamel.yaml's C-backed composer builds nodes with their marks; we turn nodes into plain
Python values ourselves so that each value's path (`("resources", "components", 1,
"time")`) maps to its line, which is how pydantic's error locations find their way back
to the file. Measured on 10,000 documents: composing through the C parser is about four
times faster than ruamel's round-trip loader, which the spec files do not need.

YAML 1.2 rules apply: `yes` is a string, `12:00:00` is a string (not sexagesimal).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass, field
from typing import Any

from ruamel.yaml.cyaml import CSafeLoader
from ruamel.yaml.error import MarkedYAMLError, YAMLError
from ruamel.yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reconciler.errors import SpecIssue

Path = tuple[str | int, ...]

# No spec anyone writes comes near these; they bound recursion and alias expansion
# ("billion laughs": a few lines of anchors that expand to millions of values).
_MAX_DEPTH = 64
_MAX_VALUES = 200_000


class _YamlProblem(Exception):
    def __init__(self, line: int | None, path: Path, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.path = path
        self.message = message


class _Loader(CSafeLoader):
    """ruamel's C-backed safe loader with a fast path for the commonest scalar.

    Tag resolution runs in Python for every node; most scalars in a spec are plain text
    whose first character no implicit resolver looks at (`python train.py`, `cpu`), so
    those skip the regex scan and get the shared string tag.
    """

    _plain_first = frozenset(
        key for key in CSafeLoader.yaml_implicit_resolvers if key not in ("", None)
    )

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if (
            kind is ScalarNode
            and implicit[0]
            and value
            and value[0] not in self._plain_first
            and None not in self.yaml_implicit_resolvers
        ):
            return self.DEFAULT_SCALAR_TAG
        return super().resolve(kind, value, implicit)


@dataclass(frozen=True)
class SourceDocument:
    """One YAML document of one file: its data and where each part of it stands."""

    file: str
    index: int
    line: int
    data: Any
    lines: dict[Path, int] = field(default_factory=dict)

    def line_of(self, path: Path) -> int:
        """The line of the deepest part of `path` that exists in the document."""
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return self.line


def parse_documents(text: str, file: str) -> tuple[list[SourceDocument], list[SpecIssue]]:
    """Every document in `text`, or the issue that stopped the parse.

    Documents before a syntax error are kept, so their own problems are reported too.
    """
    documents: list[SourceDocument] = []
    problems: list[SpecIssue] = []
    loader = _Loader(text)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ruamel warns about YAML 1.1 idioms
            while loader.check_node():
                node = loader.get_node()
                builder = _Builder(loader)
                try:
                    data = builder.value(node, (), 0)
                except _YamlProblem as problem:
                    builder.problems.append(problem)
                if builder.problems:
                    # The document is composed whole already: report its problems and go
                    # on with the next one, as a problem in the values would.
                    problems.extend(_issue(file, problem) for problem in builder.problems)
                    continue
                documents.append(
                    SourceDocument(file, len(documents), _line(node), data, builder.lines)
                )
    except MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        line = mark.line + 1 if mark is not None else None
        message = " ".join(str(part) for part in (error.context, error.problem) if part)
        # The mark may sit on the line after the last one (an unclosed quote at the end).
        lines = text.splitlines()
        source_line = lines[line - 1] if line and line <= len(lines) else ""
        return documents, [*problems, SpecIssue(file, line, "", _explain(message, source_line))]
    except (YAMLError, ValueError, TypeError, OverflowError, RecursionError) as error:
        # The C parser and the scalar constructors raise plain errors on some inputs
        # (bad timestamps, bad encodings); to the user they are all unreadable YAML.
        return documents, [*problems, SpecIssue(file, None, "", f"invalid YAML: {error}")]
    finally:
        loader.dispose()
    return documents, problems


def _issue(file: str, problem: _YamlProblem) -> SpecIssue:
    return SpecIssue(
        file, problem.line, ".".join(str(part) for part in problem.path), problem.message
    )


def _explain(message: str, source_line: str) -> str:
    """The parser's words, with what a spec author does about the usual causes."""
    indentation = source_line[: len(source_line) - len(source_line.lstrip(" \t"))]
    if "\t" in indentation:
        return "invalid YAML: a tab in the indentation: indent with spaces only"
    if "found unexpected ':'" in message:
        return (
            f"invalid YAML: {message}: inside {{...}} or [...] quote a value that holds "
            'a colon, as in {gpus: "A100:1", time: "00:20:00"}, or write one field a line'
        )
    return f"invalid YAML: {message}"


def _line(node: Node) -> int:
    return int(node.start_mark.line) + 1


class _Builder:
    def __init__(self, loader: _Loader) -> None:
        self.loader = loader
        self.string_tag = loader.DEFAULT_SCALAR_TAG
        self.lines: dict[Path, int] = {}
        self.count = 0
        self.problems: list[_YamlProblem] = []

    def note(self, node: Node, path: Path, message: str) -> None:
        self.problems.append(_YamlProblem(_line(node), path, message))

    def value(self, node: Node, path: Path, depth: int) -> Any:
        if depth > _MAX_DEPTH:
            raise _YamlProblem(_line(node), path, f"nested deeper than {_MAX_DEPTH} levels")
        self.count += 1
        if self.count > _MAX_VALUES:
            raise _YamlProblem(_line(node), path, f"more than {_MAX_VALUES} values in one document")
        if isinstance(node, ScalarNode):
            if node.ctag is self.string_tag:  # resolved as plain text: nothing to construct
                return node.value
            return self.loader.construct_object(node)
        if isinstance(node, SequenceNode):
            items = []
            for index, item in enumerate(node.value):
                self.lines[(*path, index)] = _line(item)
                items.append(self.value(item, (*path, index), depth + 1))
            return items
        if isinstance(node, MappingNode):
            return self.mapping(node, path, depth)
        raise _YamlProblem(_line(node), path, f"unsupported YAML node {type(node).__name__}")

    def mapping(self, node: MappingNode, path: Path, depth: int) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for key_node, value_node in node.value:
            # A bad key is noted and skipped, so one document reports every bad key.
            if key_node.value == "<<" and key_node.tag == "tag:yaml.org,2002:merge":
                self.note(key_node, path, "merge keys (<<) are not supported: write the fields out")
                continue
            key = self.value(key_node, path, depth + 1)
            if not isinstance(key, str):
                self.note(key_node, path, f"key {key!r} must be a string")
                continue
            child = (*path, key)
            if key in result:
                first = self.lines[child]
                self.note(key_node, child, f"duplicate key {key!r} (first on line {first})")
                continue
            self.lines[child] = _line(key_node)
            result[key] = self.value(value_node, child, depth + 1)
        return result
