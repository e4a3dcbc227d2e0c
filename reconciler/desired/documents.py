"""One YAML document to one validated model, with pydantic's errors mapped to lines."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from types import UnionType
from typing import Annotated, Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from reconciler.desired.models import KINDS, Allocation, Project, Run
from reconciler.desired.yamlsource import Path, SourceDocument
from reconciler.errors import SpecIssue


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
        # pydantic marks an error in a mapping's key with "[key]"; a field a user named
        # "[key]" is one too, and is all the path there is
        path = tuple(part for part in detail["loc"] if part != "[key]") or tuple(detail["loc"])
        field = ".".join(str(part) for part in path)
        line = document.line_of(path)
        model = error.title if error.title in MODELS else None
        issues.append(SpecIssue(document.file, line, field, _message(detail, model, path)))
    return issues


# The models a document is validated as, by the title pydantic gives their errors.
MODELS: dict[str, type[BaseModel]] = {"Run": Run, "Allocation": Allocation, "Project": Project}
# What a value of each model looks like, for "expected ..., got ..." messages.
_FORMS = {
    "Output": "a path (model/policy.json) or a mapping ({path: ..., hash: content})",
    "Input": "another run's output (prepare.dataset) or a mapping ({path: /data/x})",
}


def _message(detail: ErrorDetails, model: str | None, path: tuple[str | int, ...]) -> str:
    """pydantic's wording, in the spec's words, with the form that is expected."""
    kind = detail["type"]
    value = detail.get("input")
    context = detail.get("ctx") or {}
    if kind == "extra_forbidden":
        return _unknown_field(str(path[-1]), MODELS[model] if model else None, path[:-1])
    if kind == "missing":
        return "required field is missing"
    if kind == "string_type":
        if isinstance(value, bool | int | float):
            return f'expected text, got {_shown(value)}: quote it, as in "{value}"'
        return f"expected text, got {_shown(value)}"
    if kind in ("dict_type", "model_type"):
        form = _FORMS.get(str(context.get("class_name")), "a mapping (one `key: value` a line)")
        return f"expected {form}, got {_shown(value)}"
    if kind in ("tuple_type", "list_type"):
        return f"expected a list ([a, b], or one `- item` a line), got {_shown(value)}"
    if kind in ("int_parsing", "int_type", "int_from_float"):
        return f"expected a whole number, got {_shown(value)}"
    if kind == "literal_error":
        return f"must be {context.get('expected')}, got {_shown(value)}"
    message = detail["msg"].removeprefix("Value error, ")
    return message.replace("Input should be", "must be", 1)


def _shown(value: object) -> str:
    if value is None:
        return "nothing (an empty value)"
    if isinstance(value, bool):
        return f"{str(value).lower()} (yes/no)"
    if isinstance(value, int | float):
        return f"the number {value}"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list | tuple):
        return "a list"
    return repr(value)


def _unknown_field(name: str, model: type[BaseModel] | None, parent: tuple[str | int, ...]) -> str:
    known = _fields_at(model, parent) if model is not None else []
    if not known:
        return "unknown field"
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        return f"unknown field: did you mean {close[0]}?"
    return f"unknown field: known here are {', '.join(sorted(known))}"


def _fields_at(model: type[BaseModel], path: tuple[str | int, ...]) -> list[str]:
    """The field names the model allows at `path`, by walking its annotations: a list
    index or a mapping key steps into the element type."""
    current: Any = model
    for part in path:
        current = _step(current, part)
        if current is None:
            return []
    if not (isinstance(current, type) and issubclass(current, BaseModel)):
        return []
    return [field.alias or name for name, field in current.model_fields.items()]


def _step(annotation: Any, part: str | int) -> Any:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        field = annotation.model_fields.get(str(part))
        if field is None:
            field = next((f for f in annotation.model_fields.values() if f.alias == part), None)
        return None if field is None else _unwrap(field.annotation)
    # A mapping's key or a list's index: its values' type.
    arguments = get_args(annotation)
    return _unwrap(arguments[-1]) if arguments else None


def _unwrap(annotation: Any) -> Any:
    """The model inside `X | None`, `Annotated[X, ...]`; containers are kept."""
    while get_origin(annotation) is Annotated:
        annotation = get_args(annotation)[0]
    if get_origin(annotation) in (Union, UnionType):
        choices = [arg for arg in get_args(annotation) if arg is not type(None)]
        models = [arg for arg in choices if isinstance(arg, type) and issubclass(arg, BaseModel)]
        return _unwrap(models[0] if models else choices[0])
    if get_origin(annotation) is tuple and get_args(annotation)[-1:] == (Ellipsis,):
        return tuple[_unwrap(get_args(annotation)[0])]  # type: ignore[misc]
    return annotation
