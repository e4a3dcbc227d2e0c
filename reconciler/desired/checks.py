"""Checks beyond one document's model: template tokens, unique names, input references."""

from __future__ import annotations

import posixpath

from reconciler.desired import matrix, templates
from reconciler.desired.desired import run_workdir
from reconciler.desired.documents import ParsedDocument
from reconciler.desired.models import Run
from reconciler.desired.summary import DocumentSummary
from reconciler.errors import SpecIssue

# Every input has these too (docs/specs.md, sweeps); the message names the `path` form.
_MANY = (".paths", ".list")


def check_matrix(document: ParsedDocument) -> list[SpecIssue]:
    """A sweep's matrix: its axes and values, excludes and includes, and its members (no
    duplicate, at most matrix.MAX_MEMBERS), each problem at its line."""
    run = document.spec
    if not isinstance(run, Run) or run.matrix is None:
        return []
    found = matrix.problems(run.matrix)
    if not found:
        found = matrix.expand(run.name, run.matrix)[1]
    return [
        SpecIssue(
            document.file,
            document.line_of("matrix", *problem.path),
            ".".join(str(part) for part in ("matrix", *problem.path)),
            problem.message,
        )
        for problem in found
    ]


def check_tokens(document: ParsedDocument) -> list[SpecIssue]:
    """Every `{...}` token in a run's command must be one the run can fill in."""
    run = document.spec
    if not isinstance(run, Run) or run.command is None:
        return []
    axes = matrix.axes_of(run.matrix) if run.matrix is not None else ()
    known = templates.known_tokens(list(run.inputs), list(run.outputs), axes)
    return [
        SpecIssue(
            document.file,
            document.line_of("command"),
            "command",
            f"unknown template token {{{token}}}: known are "
            f"{', '.join('{' + k + '}' for k in sorted(known) if not k.endswith(_MANY))} "
            "(write {{ for a literal brace)",
        )
        for token in templates.unknown_tokens(run.command, known)
    ]


def check_step_layout(document: ParsedDocument) -> list[SpecIssue]:
    """``ntasks`` and ``ntasks_per_node`` lay out a step inside an allocation; a batch run
    has no step to lay out (its script runs once, on its first node)."""
    run = document.spec
    if not isinstance(run, Run) or run.allocation is not None:
        return []
    return [
        SpecIssue(
            document.file,
            document.line_of("resources", name),
            f"resources.{name}",
            "lays out the step of a run inside an allocation (set `allocation:`); a batch "
            "job's script runs once, on its first node: leave it out",
        )
        for name in ("ntasks", "ntasks_per_node")
        if getattr(run.resources, name) is not None
    ]


def check_project(documents: list[DocumentSummary]) -> list[SpecIssue]:
    """Names unique across the project; inputs name runs and outputs that exist; a run's
    allocation names an Allocation."""
    first: dict[str, DocumentSummary] = {}
    issues: list[SpecIssue] = []
    for document in documents:
        earlier = first.setdefault(document.name, document)
        if earlier is not document:
            issues.append(
                SpecIssue(
                    document.file,
                    document.name_line,
                    "name",
                    f"{document.name!r} is already used by the {earlier.kind} at "
                    f"{earlier.file}:{earlier.name_line} (names are unique per project)",
                )
            )
    for document in documents:
        issues.extend(_check_inputs(document, first))
        issues.extend(_check_coupling(document, first))
        issues.extend(_check_allocation(document, first))
    return issues


def check_output_paths(documents: list[DocumentSummary], runs_dir: str) -> list[SpecIssue]:
    """No two runs declare the same output file: each would overwrite the other's, and
    each would count the other's writes as its own."""
    claimed: dict[str, tuple[DocumentSummary, str, int]] = {}
    issues: list[SpecIssue] = []
    for document in documents:
        workdir = run_workdir(document.workdir, runs_dir, document.name)
        for name, (path, line) in zip(document.outputs, document.output_paths, strict=False):
            where = path if path.startswith("/") else f"{workdir}/{path}"
            if "/." in where or "//" in where or where.startswith("."):
                where = posixpath.normpath(where)  # only then: a sweep has thousands
            earlier, earlier_name, earlier_line = claimed.setdefault(where, (document, name, line))
            if earlier is not document:
                issues.append(
                    SpecIssue(
                        document.file,
                        line,
                        f"outputs.{name}",
                        f"{where} is also output {earlier_name} of run {earlier.name} "
                        f"({earlier.file}:{earlier_line}): two runs would overwrite each "
                        "other's file; give one of them another path",
                    )
                )
    return issues


def _check_allocation(
    document: DocumentSummary, by_name: dict[str, DocumentSummary]
) -> list[SpecIssue]:
    if document.allocation is None:
        return []
    target = by_name.get(document.allocation)
    if target is not None and target.kind == "Allocation":
        return []
    what = f"the {target.kind} {target.name!r}" if target is not None else "nothing"
    return [
        SpecIssue(
            document.file,
            document.allocation_line,
            "allocation",
            f"names {what}: `allocation:` must name an Allocation of this project",
        )
    ]


def _check_coupling(
    document: DocumentSummary, by_name: dict[str, DocumentSummary]
) -> list[SpecIssue]:
    issues = []
    for partner in document.coupled_with:
        target = by_name.get(partner)
        if target is None or target.kind != "Run" or partner == document.name:
            problem = (
                "a run cannot be coupled with itself"
                if partner == document.name
                else f"names no run {partner!r} in this project"
            )
            issues.append(SpecIssue(document.file, document.coupled_line, "coupled_with", problem))
    return issues


def _check_inputs(
    document: DocumentSummary, by_name: dict[str, DocumentSummary]
) -> list[SpecIssue]:
    issues = []
    for ref in document.inputs:
        if ref.run is None:
            continue
        run = ref.run.partition("[")[0]  # a sweep's member: train[seed=0]
        upstream = by_name.get(run)
        problem = None
        if upstream is None or upstream.kind != "Run":
            problem = f"'{ref.run}.{ref.output}' names no run {run!r} in this project"
        elif ref.output not in upstream.outputs:
            declared = ", ".join(sorted(upstream.outputs)) or "none"
            problem = f"run {run!r} declares no output {ref.output!r} (its outputs: {declared})"
        if problem is not None:
            issues.append(SpecIssue(document.file, ref.line, f"inputs.{ref.name}", problem))
    return issues
