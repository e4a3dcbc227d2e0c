"""Checks beyond one document's model: template tokens, unique names, input references."""

from __future__ import annotations

import posixpath
from collections.abc import Collection

from reconciler.desired import matrix, templates
from reconciler.desired.desired import run_workdir
from reconciler.desired.documents import ParsedDocument
from reconciler.desired.fields import env_suffix
from reconciler.desired.models import Run
from reconciler.desired.summary import DocumentSummary
from reconciler.errors import SpecIssue
from reconciler.words import listed

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
    known = templates.known_tokens(
        list(run.inputs), list(run.outputs), axes, checkpoint=run.checkpoint is not None
    )
    unknown = [
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
    return unknown or [
        SpecIssue(
            document.file,
            document.line_of("command"),
            "command",
            f"{{{token}}} is inside quotes: recon fills it in shell-quoted already, so the "
            "quotes would become part of a path with a space or a bracket; write it bare "
            f'(--out {{{token}}}, not --out "{{{token}}}"){_or_variable(token)}',
        )
        for token in dict.fromkeys(templates.quoted_tokens(run.command))
    ]


def _or_variable(token: str) -> str:
    """`, or "$RECON_OUTPUT_MODEL" inside quotes`: the variable the job finds the token's
    value in, where there is one."""
    part, _, rest = token.partition(".")
    name, _, what = rest.rpartition(".")
    variable = {"run.name": "RECON_RUN", "run.dir": "RECON_RUN_DIR"}.get(token)
    if part in ("inputs", "outputs") and what == "path":
        variable = f"RECON_{part[:-1].upper()}_{env_suffix(name)}"
    elif part == "matrix":
        variable = f"RECON_MATRIX_{env_suffix(rest)}"
    return f', or "${variable}" inside quotes' if variable else ""


def check_step_layout(document: ParsedDocument) -> list[SpecIssue]:
    """``ntasks``, ``ntasks_per_node`` and ``gpus_per_task`` lay out a step inside an
    allocation; a batch run has no step to lay out (its script runs once, on its first
    node: one task, whose GPUs are ``gpus``)."""
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
        for name in ("ntasks", "ntasks_per_node", "gpus_per_task")
        if getattr(run.resources, name) is not None
    ]


def check_project(
    documents: list[DocumentSummary], invalid: Collection[str] = ()
) -> list[SpecIssue]:
    """Names unique across the project; inputs name runs and outputs that exist; a run's
    allocation names an Allocation. A reference to a document in `invalid` (one with
    problems of its own, reported already) is not a problem of its own."""
    named: dict[str, list[DocumentSummary]] = {}
    for document in documents:
        named.setdefault(document.name, []).append(document)
    first = {name: same[0] for name, same in named.items()}
    issues = [_twice(same) for same in named.values() if len(same) > 1]
    renamed = _renamed(documents)
    issues.extend(_check_renames(documents, first, renamed))
    for document in documents:
        issues.extend(_check_inputs(document, first, invalid, renamed))
        issues.extend(_check_coupling(document, first, invalid))
        issues.extend(_check_allocation(document, first, invalid, renamed))
    return issues


def _twice(same: list[DocumentSummary]) -> SpecIssue:
    """One problem for a name declared more than once, naming every place, at the first."""
    first, *others = same
    places = [f"{d.kind} at {d.file}:{d.name_line}" for d in others]
    return SpecIssue(
        first.file,
        first.name_line,
        "name",
        f"{first.name!r} names this {first.kind} and the {listed(places)}: names are unique "
        f"per project; rename {'one' if len(places) == 1 else 'all but one'}",
    )


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
            # Two documents of one name share a folder: their name is the problem, said once.
            if earlier is not document and earlier.name != document.name:
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
    document: DocumentSummary,
    by_name: dict[str, DocumentSummary],
    invalid: Collection[str],
    renamed: dict[str, list[DocumentSummary]],
) -> list[SpecIssue]:
    if document.allocation is None:
        return []
    target = by_name.get(document.allocation)
    if target is None and document.allocation in invalid:
        return []
    if target is not None and target.kind == "Allocation":
        return []
    if target is None and document.allocation in renamed:
        new_name = renamed[document.allocation][0].name
        message = (
            f"names {document.allocation!r}, renamed to {new_name!r} (renamed_from): "
            f"say allocation: {new_name}"
        )
        return [SpecIssue(document.file, document.allocation_line, "allocation", message)]
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
    document: DocumentSummary, by_name: dict[str, DocumentSummary], invalid: Collection[str]
) -> list[SpecIssue]:
    issues = []
    for partner in document.coupled_with:
        target = by_name.get(partner)
        if target is None and partner in invalid:
            continue
        if target is None or target.kind != "Run" or partner == document.name:
            problem = (
                "a run cannot be coupled with itself"
                if partner == document.name
                else f"names no run {partner!r} in this project"
            )
            issues.append(SpecIssue(document.file, document.coupled_line, "coupled_with", problem))
    return issues


def _renamed(documents: list[DocumentSummary]) -> dict[str, list[DocumentSummary]]:
    """A former name -> the runs that say they had it (`renamed_from`)."""
    renamed: dict[str, list[DocumentSummary]] = {}
    for document in documents:
        if document.renamed_from is not None:
            renamed.setdefault(document.renamed_from, []).append(document)
    return renamed


def _check_renames(
    documents: list[DocumentSummary],
    by_name: dict[str, DocumentSummary],
    renamed: dict[str, list[DocumentSummary]],
) -> list[SpecIssue]:
    """A former name is no run or allocation of the commit, and one run's alone: a move
    carries one run's records to one other name."""
    issues = []
    for old, claims in renamed.items():
        for document in claims:
            still = by_name.get(old)
            if still is document:
                problem = "names the run itself: say the name it had before, or remove the field"
            elif still is not None:
                problem = (
                    f"names the {still.kind} {old!r} ({still.file}:{still.name_line}), which "
                    f"is still in the project: a renamed run's old name is gone; rename or "
                    f"remove that {still.kind}, or remove renamed_from"
                )
            elif len(claims) > 1:
                others = [
                    f"{d.name} ({d.file}:{d.renamed_line})" for d in claims if d is not document
                ]
                problem = (
                    f"{old!r} is claimed by {listed(others)} too: one run carries an old "
                    "run's records; remove renamed_from from all but one"
                )
            else:
                continue
            issues.append(SpecIssue(document.file, document.renamed_line, "renamed_from", problem))
    return issues


def _check_inputs(
    document: DocumentSummary,
    by_name: dict[str, DocumentSummary],
    invalid: Collection[str],
    renamed: dict[str, list[DocumentSummary]],
) -> list[SpecIssue]:
    issues = []
    for ref in document.inputs:
        if ref.run is None:
            continue
        run = ref.run.partition("[")[0]  # a sweep's member: train[seed=0]
        if run in invalid and run not in by_name:
            continue  # its own problems say what is wrong with it
        upstream = by_name.get(run)
        problem = None
        if upstream is None and run in renamed:
            new_name = renamed[run][0].name
            problem = (
                f"'{ref.run}.{ref.output}' names {run!r}, renamed to {new_name!r} "
                f"(renamed_from): name '{ref.run.replace(run, new_name, 1)}.{ref.output}'"
            )
        elif upstream is None or upstream.kind != "Run":
            problem = f"'{ref.run}.{ref.output}' names no run {run!r} in this project"
        elif ref.output not in upstream.outputs:
            declared = ", ".join(sorted(upstream.outputs)) or "none"
            problem = f"run {run!r} declares no output {ref.output!r} (its outputs: {declared})"
        if problem is not None:
            issues.append(SpecIssue(document.file, ref.line, f"inputs.{ref.name}", problem))
    return issues
