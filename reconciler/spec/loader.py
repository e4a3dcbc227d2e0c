"""Load the desired state from a commit (or the work tree): every problem, or a `Desired`.

    recon.yaml ──▶ Project ──globs──▶ spec files ──parse (cached by blob)──▶ documents
                                                       ──cross-checks + graph──▶ Desired

All problems in all files are collected before anything fails, so `recon validate`
lists them together; any problem raises one SpecError holding them all.
"""

from __future__ import annotations

from pathlib import Path

from reconciler import graph
from reconciler.errors import RepoError, SpecError, SpecIssue
from reconciler.spec.cache import FileResult, ParseCache
from reconciler.spec.checks import check_documents
from reconciler.spec.desired import (
    Desired,
    DesiredAllocation,
    DesiredRun,
    Location,
    effective_allocation,
    effective_run,
    spec_hash,
)
from reconciler.spec.documents import ParsedDocument, validate_project, validate_spec
from reconciler.spec.models import Project, Run
from reconciler.spec.source import PROJECT_FILE, CommitSource, SpecSource, WorktreeSource, matching
from reconciler.spec.yamlsource import parse_documents


def open_source(root: Path, revision: str | None = None, worktree: bool = False) -> SpecSource:
    """The commit `revision` (default HEAD) of the repo at `root`, or its work tree."""
    if worktree:
        if revision is not None:
            raise RepoError("--worktree reads the files on disk: give no revision with it")
        if not root.is_dir():
            raise RepoError(f"{root} is not a directory")
        return WorktreeSource(root)
    return CommitSource(root, revision or "HEAD")


def load_desired(source: SpecSource, cache_dir: Path | None = None) -> Desired:
    project = load_project(source)
    if isinstance(source, WorktreeSource):
        source = WorktreeSource(source.root, skip_dirs=(project.state_dir, project.runs_dir))
    cache = ParseCache(cache_dir if cache_dir is not None else source.root / project.state_dir)
    all_paths = source.paths()
    documents: list[ParsedDocument] = []
    issues: list[SpecIssue] = []
    live: set[tuple[str, str]] = set()
    for path in matching(all_paths, project.specs):
        if path == PROJECT_FILE:
            continue
        result = _parse_file(source, path, cache, live)
        documents.extend(result.documents)
        issues.extend(result.issues)
    cache.keep_only(live)
    cache.save()

    scripts, script_issues = _read_scripts(source, documents, set(all_paths))
    issues.extend(script_issues)
    issues.extend(check_documents(documents))
    issues.extend(_cycles(documents))
    if issues:
        raise SpecError(issues)
    return _desired(source, project, documents, scripts)


def load_project(source: SpecSource) -> Project:
    if PROJECT_FILE not in source.paths():
        where = "the work tree" if source.commit is None else f"commit {source.commit[:12]}"
        raise SpecError(
            [
                SpecIssue(
                    PROJECT_FILE,
                    None,
                    "",
                    f"not found at the root of {where}: every recon repo has one "
                    "(at least `project: NAME`)",
                )
            ]
        )
    text = _decode(source.read(PROJECT_FILE), PROJECT_FILE)
    if isinstance(text, SpecIssue):
        raise SpecError([text])
    documents, issues = parse_documents(text, PROJECT_FILE)
    if issues:
        raise SpecError(issues)
    if len(documents) != 1:
        raise SpecError(
            [SpecIssue(PROJECT_FILE, None, "", "must hold exactly one YAML document")]
        )
    project, issues = validate_project(documents[0])
    if project is None:
        raise SpecError(issues)
    return project


def _parse_file(
    source: SpecSource, path: str, cache: ParseCache, live: set[tuple[str, str]]
) -> FileResult:
    blob = source.blob_id(path)
    live.add((path, blob))
    cached = cache.get(path, blob)
    if cached is not None:
        return cached
    text = _decode(source.read(path), path)
    if isinstance(text, SpecIssue):
        result = FileResult((), (text,))
    else:
        raw_documents, issues = parse_documents(text, path)
        parsed: list[ParsedDocument] = []
        for raw in raw_documents:
            document, document_issues = validate_spec(raw)
            issues.extend(document_issues)
            if document is not None:
                parsed.append(document)
        result = FileResult(tuple(parsed), tuple(issues))
    cache.put(path, blob, result)
    return result


def _decode(content: bytes, path: str) -> str | SpecIssue:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        return SpecIssue(path, None, "", f"not UTF-8 text (byte {error.start})")


def _read_scripts(
    source: SpecSource, documents: list[ParsedDocument], paths: set[str]
) -> tuple[dict[str, str], list[SpecIssue]]:
    """The content of every `script:` file, read from the same commit as the specs."""
    scripts: dict[str, str] = {}
    issues: list[SpecIssue] = []
    for document in documents:
        spec = document.spec
        if not isinstance(spec, Run) or spec.script is None:
            continue
        line = document.line_of("script")
        normalized = Path(spec.script).as_posix()
        if spec.script.startswith("/") or ".." in Path(spec.script).parts:
            issues.append(
                SpecIssue(document.file, line, "script", "must be a path inside the repo")
            )
        elif normalized not in paths:
            issues.append(
                SpecIssue(
                    document.file, line, "script", f"{spec.script!r} is not in the repo"
                    + ("" if source.commit is None else " at this commit (is it committed?)")
                )
            )
        else:
            text = _decode(source.read(normalized), normalized)
            if isinstance(text, SpecIssue):
                issues.append(SpecIssue(document.file, line, "script", text.message))
            else:
                scripts[spec.name] = text
    return scripts, issues


def _cycles(documents: list[ParsedDocument]) -> list[SpecIssue]:
    runs = {d.spec.name: d for d in documents if isinstance(d.spec, Run)}
    dag = graph.build({name: document.spec for name, document in runs.items()})  # type: ignore[misc]
    return graph.cycles(dag, {name: Location(d.file, d.line) for name, d in runs.items()})


def _desired(
    source: SpecSource,
    project: Project,
    documents: list[ParsedDocument],
    scripts: dict[str, str],
) -> Desired:
    runs: dict[str, DesiredRun] = {}
    allocations: dict[str, DesiredAllocation] = {}
    for document in documents:
        location = Location(document.file, document.line)
        if isinstance(document.spec, Run):
            run = effective_run(document.spec, project)
            script = scripts.get(run.name)
            runs[run.name] = DesiredRun(run, location, spec_hash(run, script), script)
        else:
            allocation = effective_allocation(document.spec, project)
            allocations[allocation.name] = DesiredAllocation(
                allocation, location, spec_hash(allocation)
            )
    return Desired(project, source.root, source.commit, runs, allocations)
