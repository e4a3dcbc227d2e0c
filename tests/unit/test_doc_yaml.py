"""Every YAML block in README.md and docs/*.md is valid, or fails with the error shown.

A block the docs show on purpose as a mistake is preceded by the line

    <!-- doc-test: invalid -->

and the next fenced block after it shows the error: each problem recon finds in the
block must appear there, word for word. Any other block must pass recon's checks.

A block is checked the way recon checks one document of a spec file: YAML syntax, then
the model (fields, values, resource forms), then template tokens. A block that is a
`recon.yaml` (it has `project:`) is checked as one. A block that shows a few fields of a
run (`resources:`, `inputs:` ...) is checked inside a minimal run, so its fields and
values get the same checks as in a real spec. References to other runs need the whole
project and are checked by tests of the example project, not here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from reconciler.desired.checks import check_matrix, check_tokens
from reconciler.desired.documents import validate_project, validate_spec
from reconciler.desired.yamlsource import SourceDocument, parse_documents
from reconciler.errors import SpecIssue
from tests.docs import DOCS, Fence, fences

INVALID_MARKER = "<!-- doc-test: invalid -->"
# A block that is not recon's (a Prometheus alert rule): checked where its subject is,
# tests/local/test_watch_metrics.py.
FOREIGN_MARKERS = {"<!-- doc-test: prometheus -->"}
# The fields a run needs, for blocks that show only some of a run's fields.
MINIMAL_RUN = {"kind": "Run", "name": "doc-example", "command": "true"}
PATH_TOKEN = re.compile(r"(?<!\{)\{(inputs|outputs)\.([\w-]+)\.path\}")


@dataclass(frozen=True)
class Block:
    file: str
    line: int  # of the opening fence
    lang: str
    body: str
    invalid: bool
    shown_error: str | None  # the next block's text, for a block marked invalid
    marker: str = ""  # the line before the fence

    @property
    def foreign(self) -> bool:
        return self.marker in FOREIGN_MARKERS

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"


def blocks(path: Path) -> list[Block]:
    found = fences(path)
    return [
        Block(
            fence.file,
            fence.line,
            fence.lang,
            fence.body,
            fence.preceded_by == INVALID_MARKER,
            _next_body(found, index) if fence.preceded_by == INVALID_MARKER else None,
            fence.preceded_by,
        )
        for index, fence in enumerate(found)
    ]


def _next_body(found: list[Fence], index: int) -> str | None:
    return found[index + 1].body if index + 1 < len(found) else None


YAML_BLOCKS = [
    block for path in DOCS for block in blocks(path) if block.lang == "yaml" and not block.foreign
]


def problems(block: Block) -> list[SpecIssue]:
    """What recon says about the block, as it would about a spec file holding it."""
    documents, issues = parse_documents(block.body, block.where)
    for document in documents:
        issues.extend(_document_problems(document))
    return issues


def _document_problems(document: SourceDocument) -> list[SpecIssue]:
    data = document.data
    if isinstance(data, dict) and "project" in data:
        return validate_project(document)[1]
    if isinstance(data, dict) and "kind" not in data:
        run = {**MINIMAL_RUN, **_declared_by_tokens(data), **data}
        document = SourceDocument(document.file, document.index, document.line, run, document.lines)
    parsed, issues = validate_spec(document)
    return issues if parsed is None else check_matrix(parsed) or check_tokens(parsed)


def _declared_by_tokens(fragment: dict[str, object]) -> dict[str, object]:
    """The inputs and outputs a command fragment's tokens name, declared so that the
    tokens are checked (a misspelt `{output.x.path}` still fails)."""
    command = fragment.get("command")
    declared: dict[str, dict[str, object]] = {"inputs": {}, "outputs": {}}
    for kind, name in PATH_TOKEN.findall(command if isinstance(command, str) else ""):
        declared[kind][name] = {"path": f"/doc-example/{name}" if kind == "inputs" else name}
    return {kind: names for kind, names in declared.items() if names}


def test_the_docs_hold_yaml_blocks() -> None:
    # The extraction itself must not silently find nothing (a changed fence style).
    assert len(YAML_BLOCKS) >= 15
    assert any(block.file == "README.md" for block in YAML_BLOCKS)


def complaints(block: Block) -> list[str]:
    """What is wrong with the block as the docs show it; empty when it is right."""
    found = problems(block)
    if not block.invalid:
        return [str(issue) for issue in found]
    if not found:
        return [f"{block.where} is marked invalid but recon accepts it"]
    shown_error = block.shown_error or ""
    return [
        f"{block.where}: the block after it does not show {shown!r}"
        for shown in (f"{i.field}: {i.message}" if i.field else i.message for i in found)
        if shown not in shown_error
    ]


@pytest.mark.parametrize("block", YAML_BLOCKS, ids=lambda block: block.where)
def test_yaml_block(block: Block) -> None:
    assert complaints(block) == []


def test_the_check_fails_a_wrong_block() -> None:
    def block(body: str, invalid: bool, shown: str | None = None) -> Block:
        return Block("x.md", 1, "yaml", body, invalid, shown)

    assert complaints(block("resources: {time: 2h}\n", invalid=False)) == []
    assert complaints(block("resources: {time: 2h}\n", invalid=True, shown="")) != []
    assert complaints(block("resources: {time: 00:20:00}\n", invalid=False)) != []
    assert complaints(block("resource: {time: 2h}\n", invalid=True, shown="other")) != []
    right = str(problems(block("resource: {time: 2h}\n", invalid=True))[0])
    assert complaints(block("resource: {time: 2h}\n", invalid=True, shown=right)) == []
    unknown_token = "command: echo {output.x.path}\n"
    assert complaints(block(unknown_token, invalid=False)) != []
