"""One YAML document to one validated model, with pydantic's errors mapped to lines."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from reconciler.errors import SpecIssue
from reconciler.spec.models import KINDS, Allocation, Project, Run
from reconciler.spec.yamlsource import Path, SourceDocument


@dataclass(frozen=True)
class ParsedDocument:
    """A document that passed its own checks, with the lines cross-checks need."""

    spec: Run | Allocation
    file: str
    line: int
    lines: dict[Path, int]
    data: dict[str, Any]  # the document as written

    def line_of(self, *path: str | int) -> int:
        for end in range(len(path), 0, -1):
            line = self.lines.get(path[:end])
            if line is not None:
                return line
        return self.line


def validate_spec(document: SourceDocument) -> tuple[ParsedDocument | None, list[SpecIssue]]:
    data = document.data
    if data is None:
        return None, []  # an empty document (a trailing `---`) declares nothing
    if not isinstance(data, dict):
        return None, [
            SpecIssue(document.file, document.line, "", "a spec document must be a mapping")
        ]
    kind = data.get("kind")
    model = KINDS.get(kind) if isinstance(kind, str) else None
    if model is None:
        where = document.line_of(("kind",))
        said = "missing" if kind is None else f"{kind!r} is not a kind recon knows"
        return None, [
            SpecIssue(document.file, where, "kind", f"{said}: use one of {', '.join(KINDS)}")
        ]
    try:
        spec = model.model_validate(data)
    except ValidationError as error:
        return None, issues_from(error, document)
    return ParsedDocument(spec, document.file, document.line, document.lines, data), []


def validate_project(document: SourceDocument) -> tuple[Project | None, list[SpecIssue]]:
    if not isinstance(document.data, dict):
        return None, [SpecIssue(document.file, document.line, "", "recon.yaml must be a mapping")]
    try:
        return Project.model_validate(document.data), []
    except ValidationError as error:
        return None, issues_from(error, document)


def issues_from(error: ValidationError, document: SourceDocument) -> list[SpecIssue]:
    issues = []
    for detail in error.errors():
        path = tuple(part for part in detail["loc"] if part != "[key]")
        field = ".".join(str(part) for part in path)
        line = document.line_of(path)
        issues.append(SpecIssue(document.file, line, field, _message(detail)))
    return issues


def _message(detail: ErrorDetails) -> str:
    kind = detail["type"]
    if kind == "extra_forbidden":
        return "unknown field (check its spelling against the schema in schemas/)"
    if kind == "missing":
        return "required field is missing"
    message = detail["msg"]
    return message.removeprefix("Value error, ")
