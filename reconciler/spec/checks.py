"""Checks that need every document at once: unique names, references, template tokens."""

from __future__ import annotations

from reconciler.errors import SpecIssue
from reconciler.spec import templates
from reconciler.spec.documents import ParsedDocument
from reconciler.spec.models import Run


def check_documents(documents: list[ParsedDocument]) -> list[SpecIssue]:
    first: dict[str, ParsedDocument] = {}
    issues: list[SpecIssue] = []
    for document in documents:
        name = document.spec.name
        if name in first:
            earlier = first[name]
            issues.append(
                SpecIssue(
                    document.file,
                    document.line_of("name"),
                    "name",
                    f"{name!r} is already used by the {earlier.spec.kind} at "
                    f"{earlier.file}:{earlier.line_of('name')} (names are unique per project)",
                )
            )
        else:
            first[name] = document
    for document in documents:
        if isinstance(document.spec, Run):
            issues.extend(_check_inputs(document, document.spec, first))
            issues.extend(_check_tokens(document, document.spec))
    return issues


def _check_inputs(
    document: ParsedDocument, run: Run, by_name: dict[str, ParsedDocument]
) -> list[SpecIssue]:
    issues = []
    for input_name, spec_input in run.inputs.items():
        if spec_input.upstream is None:
            continue
        upstream_name, output_name = spec_input.upstream
        upstream = by_name.get(upstream_name)
        problem = None
        if upstream is None or not isinstance(upstream.spec, Run):
            problem = f"{spec_input.from_!r} names no run {upstream_name!r} in this project"
        elif output_name not in upstream.spec.outputs:
            declared = ", ".join(sorted(upstream.spec.outputs)) or "none"
            problem = (
                f"run {upstream_name!r} declares no output {output_name!r} "
                f"(its outputs: {declared})"
            )
        if problem is not None:
            line = document.line_of("inputs", input_name)
            issues.append(SpecIssue(document.file, line, f"inputs.{input_name}", problem))
    return issues


def _check_tokens(document: ParsedDocument, run: Run) -> list[SpecIssue]:
    if run.command is None:
        return []
    known = templates.known_tokens(list(run.inputs), list(run.outputs))
    return [
        SpecIssue(
            document.file,
            document.line_of("command"),
            "command",
            f"unknown template token {{{token}}}: known are "
            f"{', '.join('{' + k + '}' for k in sorted(known))} (write {{{{ for a literal brace)",
        )
        for token in templates.unknown_tokens(run.command, known)
    ]
