"""Load the desired state from a commit (or the work tree): every problem, or a `Desired`.

    recon.yaml ──▶ Project ──globs──▶ spec files ──parse + validate (cached by blob)──▶
        document summaries ──project checks + graph──▶ Desired (models built on demand)

All problems in all files are collected before anything fails, so `recon validate`
lists them together; any problem raises one SpecError holding them all.
"""

from __future__ import annotations

import marshal
import os
import threading
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from reconciler.desired import graph, sweeps
from reconciler.desired.cache import FileResult, ParseCache, SharedCache
from reconciler.desired.checks import (
    check_matrix,
    check_output_paths,
    check_project,
    check_step_layout,
    check_tokens,
)
from reconciler.desired.desired import (
    DeclaredInput,
    DeclaredOutput,
    Desired,
    DesiredAllocation,
    DesiredRun,
    EnvironmentKind,
    LazyMapping,
    LoadMemo,
    Location,
    RunShape,
    canonical_fields,
    effective_allocation,
    effective_environment,
    effective_resources,
    effective_run,
    hash_of_fields,
    run_workdir,
    spec_hash,
)
from reconciler.desired.documents import validate_project, validate_spec
from reconciler.desired.matrix import Member
from reconciler.desired.models import (
    KINDS,
    Allocation,
    Environment,
    Input,
    Project,
    Run,
    RunResources,
)
from reconciler.desired.source import (
    PROJECT_FILE,
    CommitSource,
    FileChange,
    SpecSource,
    WorktreeSource,
    matches_some,
    matching,
    read_blobs,
)
from reconciler.desired.summary import DocumentSummary, raw_document, summarize
from reconciler.desired.yamlsource import parse_documents
from reconciler.errors import NoProjectError, RepoError, SpecError, SpecIssue

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext


def open_source(
    root: Path, revision: str | None = None, worktree: bool = False, option: str = "--rev"
) -> SpecSource:
    """The commit `revision` (default HEAD) of the repo at `root`, or its work tree.

    `option` names where the revision came from, for the message when it is empty."""
    if revision is not None and not revision.strip():
        raise RepoError(
            f"{option} is empty (an unset CI variable?): name a commit, branch or tag"
            + (", or leave --rev out to read HEAD" if option == "--rev" else "")
        )
    check_project_folder(root)
    if worktree:
        if revision is not None:
            raise RepoError("--worktree reads the files on disk: give no revision with it")
        return WorktreeSource(root.resolve())
    return CommitSource(root, revision or "HEAD")


def check_project_folder(root: Path) -> None:
    """A RepoError unless `root` is a folder: what it is instead, and what to give."""
    if root.is_dir():
        return
    if root.exists():
        raise RepoError(
            f"{root} is a file: give the project folder (the one holding recon.yaml), "
            f"here `{root.parent.as_posix()}`, or nothing for the current folder"
        )
    raise RepoError(
        f"the folder {root} does not exist: give the project folder (the one holding "
        "recon.yaml), or nothing for the current folder"
    )


def load_desired(
    source: SpecSource,
    cache_dir: Path | None = None,
    shared: SharedCache | None = None,
    project: Project | None = None,
) -> Desired:
    """`shared`: a parse cache to use across loads in this process (``SharedCache``).
    `project`: recon.yaml's settings, when read from `source` already."""
    project = project or load_project(source)
    if isinstance(source, WorktreeSource):
        source = WorktreeSource(source.root, skip_dirs=(project.state_dir, project.runs_dir))
    all_paths = source.paths()
    cache = (shared or SharedCache()).open(
        cache_dir if cache_dir is not None else source.root / project.state_dir, project
    )
    code = CodeFiles(source, all_paths)
    try:
        summaries, runs, expansion, scripts, blobs = _checked(source, project, cache, code)
    finally:
        cache.save()  # parse results are kept whether or not the specs are valid
    upstreams = expansion.upstreams
    allocations = {s.name: s for s in summaries if s.kind == "Allocation"}
    made = _MadeOnce(code=code)
    warnings = () if summaries else (_nothing_declared(source, project, all_paths),)
    loaded = None
    if isinstance(source, CommitSource):
        loaded = Loaded(project, summaries, runs, expansion, scripts, blobs, made)
    return Desired(
        project,
        source.root,
        source.commit,
        LazyMapping(
            runs,
            lambda name: _desired_run(runs[name], project, scripts, expansion, made, blobs),
            # Known without the model, except for a script run (its script joins the hash),
            # a run declaring environment files (their blob ids do) and a sweep's member
            # (its hash is its own spec's, made when it is built).
            lambda name: None if name in expansion.members else runs[name].spec_hash,
            lambda name: code.of(runs[name]),
        ),
        LazyMapping(
            allocations,
            lambda name: _desired_allocation(allocations[name], project),
            lambda name: allocations[name].spec_hash,
        ),
        upstreams,
        warnings,
        expansion.sweeps,
        loaded,
        _renamed(summaries, expansion),
    )


def _renamed(summaries: list[DocumentSummary], expansion: sweeps.Expansion) -> dict[str, str]:
    """Each run or sweep (by its own name, not its members') -> the name it says it had."""
    members = expansion.members
    return {
        members[s.name].sweep if s.name in members else s.name: s.renamed_from
        for s in summaries
        if s.renamed_from is not None
    }


def _checked(
    source: SpecSource, project: Project, cache: ParseCache, code: CodeFiles
) -> tuple[
    list[DocumentSummary],
    dict[str, DocumentSummary],
    sweeps.Expansion,
    dict[str, str],
    dict[str, str],
]:
    """Every document (sweeps expanded), the runs among them, the expansion, the
    scripts' texts and the blob id of every file an `environment:` declares; or a
    SpecError with every problem. A commit that passed the
    project-wide checks before skips them: they depend on its files alone (the work tree
    has no commit to name)."""
    summaries, issues, invalid = _load_files(source, project, cache)
    issues.extend(_unmatched_patterns(source, project, code.all_paths))
    scripts, script_issues = _read_scripts(source, summaries, code.all_paths)
    issues.extend(script_issues)
    blobs, file_issues = _environment_blobs(source, project, summaries, code.all_paths)
    issues.extend(file_issues)
    key = None if source.commit is None else f"{source.commit} {source.root}"
    known = key is not None and not issues and cache.passed_checks(key)
    if not known:
        issues.extend(code.issues(summaries))
        issues.extend(check_project(summaries, invalid))
    if not issues:
        expansion = sweeps.expand(summaries, project.runs_dir)
        issues.extend(dict.fromkeys(expansion.issues))  # members of one sweep say it once
    else:
        expansion = sweeps.Expansion(summaries, upstreams=_plain_upstreams(summaries))
    summaries = expansion.summaries
    runs = {s.name: s for s in summaries if s.kind == "Run"}
    if not known:
        issues.extend(check_output_paths(summaries, project.runs_dir))
        if graph.has_cycle(expansion.upstreams):
            locations = {name: Location(s.file, s.line) for name, s in runs.items()}
            issues.extend(graph.cycles(graph.build(expansion.upstreams), locations))
    if issues:
        raise SpecError(issues)
    if key is not None:
        cache.note_passed_checks(key)
    return summaries, runs, expansion, scripts, blobs


def _environment_blobs(
    source: SpecSource, project: Project, summaries: list[DocumentSummary], all_paths: list[str]
) -> tuple[dict[str, str], list[SpecIssue]]:
    """The blob id of every file an `environment:` declares (recon.yaml's defaults were
    checked with recon.yaml): a declared file that is not in the commit is an issue."""
    default = project.defaults.environment
    wanted = {path: None for path in default.files} if default is not None else {}
    issues: list[SpecIssue] = []
    paths: set[str] = set()  # gathered at the first file: most projects declare none
    for summary in summaries:
        for path in summary.environment_files:
            paths = paths or set(all_paths)
            if path in paths:
                wanted[path] = None
            else:
                message = _not_in_commit(source, path)
                issues.append(
                    SpecIssue(summary.file, summary.environment_line, "environment.files", message)
                )
    return {path: source.blob_id(path) for path in wanted}, issues


def _not_in_commit(source: SpecSource, path: str) -> str:
    where = "in the work tree" if source.commit is None else "at this commit (is it committed?)"
    return (
        f"{path!r} is not a file of the repo {where}: environment files are named from the "
        "repo root, and their content joins the identity of the runs that declare them"
    )


class CodeFiles:
    """Each run's code at the commit: the committed files its command names, and those
    its `code:` globs match, with their git blob ids, from the listing the load made
    already (no file is read; a committed symbolic link counts by the file it leads to).
    Runs with globs are worked out once per distinct words and globs."""

    def __init__(self, source: SpecSource, all_paths: list[str]) -> None:
        self.source = source
        self.all_paths = all_paths
        # path -> blob id of every committed file that is no link, when the source lists
        # them (a commit): the common case, a dict lookup per word
        self._plain: Mapping[str, str] | None = None
        self._paths: set[str] | None = None
        self._made: dict[tuple[tuple[str, ...], tuple[str, ...]], dict[str, str]] = {}
        self._globbed: dict[tuple[str, ...], list[str]] = {}

    @property
    def source_has_links(self) -> bool:
        return isinstance(self.source, CommitSource) and self.source.has_links

    @property
    def paths(self) -> set[str]:
        if self._paths is None:
            self._paths = set(self.all_paths)
        return self._paths

    def of(self, summary: DocumentSummary) -> dict[str, str]:
        """The run's code files -> blob id, in the order the command names them, then
        those of its globs."""
        words, globs = summary.code_words, summary.code_globs
        if not globs:  # a lookup per word: cheaper than remembering 10,000 answers
            return self._find(words, globs)
        key = (words, globs)
        found = self._made.get(key)
        if found is None:
            found = self._made[key] = self._find(words, globs)
        return found

    def _find(self, words: tuple[str, ...], globs: tuple[str, ...]) -> dict[str, str]:
        found: dict[str, str] = {}
        if isinstance(self.source, CommitSource):
            if self._plain is None:
                self._plain = self.source.plain_files()
            plain = self._plain
            for word in words:  # a plain loop: 10,000 runs each ask once
                blob = plain.get(word)
                if blob is not None:
                    found[word] = blob
            if not globs and not self.source.has_links:
                return found
        paths = self.paths
        for path in (*words, *self._globbed_by(globs)):
            if path not in found and path in paths:
                found[path] = self.source.blob_id(self.source.target(path) or path)
        return found

    def _globbed_by(self, globs: tuple[str, ...]) -> list[str]:
        if not globs:
            return []
        if globs not in self._globbed:
            self._globbed[globs] = matching(self.all_paths, globs)
        return self._globbed[globs]

    def issues(self, summaries: list[DocumentSummary]) -> list[SpecIssue]:
        """A `code:` glob that matches no file: a typo would silently track nothing."""
        issues = []
        told: set[tuple[str, str]] = set()
        where = "in the work tree" if self.source.commit is None else "at this commit"
        for summary in summaries:
            for glob in summary.code_globs:
                if (summary.file, glob) in told or self._globbed_by((glob,)):
                    continue
                told.add((summary.file, glob))
                message = (
                    f"{glob!r} matches no file {where}: write globs relative to the project "
                    "folder (the one holding recon.yaml), and commit the files they name"
                )
                issues.append(SpecIssue(summary.file, summary.code_line, "code", message))
        return issues


@dataclass
class _MadeOnce:
    """What the runs of one load share, made for the first run that needs it."""

    code: CodeFiles
    # sweep -> its members' common part: the effective spec and its canonical fields
    bases: dict[str, tuple[Run, dict[str, Any]]] = field(default_factory=dict)
    # a run's `resources:` as written (marshalled) -> its effective resources
    resources: dict[bytes, RunResources] = field(default_factory=dict)
    # a run's `environment:` as written (marshalled) -> its effective kind
    environments: dict[bytes, EnvironmentKind] = field(default_factory=dict)

    def environment_of(self, summary: DocumentSummary, project: Project) -> EnvironmentKind:
        """A run's environment kind from its document, without its model: most runs
        write none (told without unpacking the document), the rest a few alike."""
        written = summary.data.get("environment")
        if written is None:
            return EnvironmentKind.of(project.defaults.environment)
        key = marshal.dumps(written)
        if key not in self.environments:
            own = Environment.model_validate(written)  # validated with its document already
            self.environments[key] = EnvironmentKind.of(effective_environment(own, project))
        return self.environments[key]

    def resources_of(self, summary: DocumentSummary, project: Project) -> RunResources:
        """A run's effective resources from its document, without its model: the runs of
        a sweep, or of 10,000 files written alike, ask for a few distinct resources."""
        written = raw_document(summary.data).get("resources")
        key = marshal.dumps(written)
        if key not in self.resources:
            # Validated with its document already (now or when cached): cannot fail. An
            # absent block is the model's default.
            asked = RunResources() if written is None else RunResources.model_validate(written)
            self.resources[key] = effective_resources(asked, project)
        return self.resources[key]


def _plain_upstreams(summaries: list[DocumentSummary]) -> dict[str, tuple[str, ...]]:
    return {s.name: tuple(s.upstreams) for s in summaries if s.kind == "Run"}


def _unmatched_patterns(
    source: SpecSource, project: Project, all_paths: list[str]
) -> list[SpecIssue]:
    """A `specs:` pattern written in recon.yaml that matches no file: a typo there would
    drop every run it held, and with them (prune) their jobs. The default patterns are
    not checked: a new project has no specs yet (and few write both .yaml and .yml)."""
    if "specs" not in project.model_fields_set:
        return []
    files = [path for path in all_paths if path != PROJECT_FILE]
    unmatched = [
        (index, pattern)
        for index, pattern in enumerate(project.specs)
        if not matches_some(files, pattern)
    ]
    if not unmatched:
        return []
    where = "in the work tree" if source.commit is None else f"at commit {source.commit[:12]}"
    lines = _project_lines(source)
    return [
        SpecIssue(
            PROJECT_FILE,
            lines.get(("specs", index), lines.get(("specs",))),
            "specs",
            f"the pattern {pattern!r} matches no {_but(pattern)}{where}: fix it, remove "
            "it, or commit "
            "the spec files it should match (a pattern that matches nothing drops the runs "
            "it held, and apply would cancel their jobs)",
        )
        for index, pattern in unmatched
    ]


def _but(pattern: str) -> str:
    if matches_some([PROJECT_FILE], pattern):
        return f"file but {PROJECT_FILE} (never read as a spec) "
    return "file "


def _project_lines(source: SpecSource) -> dict[tuple[str | int, ...], int]:
    """The line of each key and item of recon.yaml (read and checked once already)."""
    text = _decode(source.read(PROJECT_FILE), PROJECT_FILE)
    documents, _ = parse_documents(text, PROJECT_FILE) if isinstance(text, str) else ([], [])
    return documents[0].lines if documents else {}


def _nothing_declared(source: SpecSource, project: Project, all_paths: list[str]) -> str:
    files = [path for path in matching(all_paths, project.specs) if path != PROJECT_FILE]
    patterns = ", ".join(project.specs)
    if not files:
        where = "in the work tree" if source.commit is None else f"at commit {source.commit[:12]}"
        return (
            f"no runs: the specs patterns of recon.yaml ({patterns}) match no file {where}; "
            "fix the patterns, or commit the spec files (or use --worktree)"
        )
    if len(files) == 1:
        return f"no runs: {files[0]} matches the specs patterns ({patterns}) but declares nothing"
    return (
        f"no runs: {len(files)} files match the specs patterns ({patterns}) but declare no run "
        "or allocation"
    )


def load_project(source: SpecSource) -> Project:
    if PROJECT_FILE not in source.paths():
        raise NoProjectError([SpecIssue(PROJECT_FILE, None, "", _no_project_file(source))])
    text = _decode(source.read(PROJECT_FILE), PROJECT_FILE)
    if isinstance(text, SpecIssue):
        raise SpecError([text])
    documents, issues = parse_documents(text, PROJECT_FILE)
    if issues:
        raise SpecError(issues)
    if len(documents) != 1:
        raise SpecError([SpecIssue(PROJECT_FILE, None, "", "must hold exactly one YAML document")])
    project, issues = validate_project(documents[0])
    if project is None:
        raise SpecError(issues)
    default = project.defaults.environment
    if default is not None and default.files:
        paths = set(source.paths())
        line = documents[0].line_of(("defaults", "environment", "files"))
        missing = [
            SpecIssue(PROJECT_FILE, line, "defaults.environment.files", _not_in_commit(source, p))
            for p in default.files
            if p not in paths
        ]
        if missing:
            raise SpecError(missing)
    return project


def _no_project_file(source: SpecSource) -> str:
    """Why recon.yaml is missing, as far as the disk tells, and what to do."""
    where = "the work tree" if source.commit is None else f"commit {source.commit[:12]}"
    if source.commit is not None and (source.root / PROJECT_FILE).is_file():
        return (
            f"not committed: {where} does not hold it; commit it "
            f"(`git add {PROJECT_FILE} && git commit`), or use --worktree to read the files "
            "on disk"
        )
    for folder in source.root.parents:
        if (folder / PROJECT_FILE).is_file():
            return (
                f"not found in {source.root}, which is inside the project {folder}: run recon "
                "from the project folder, or give it as the first argument"
            )
    return (
        f"not found in {source.root} at {where}: run recon from the project folder, the one "
        "holding recon.yaml (at least `project: NAME`), or give it as the first argument"
    )


def _load_files(
    source: SpecSource, project: Project, cache: ParseCache
) -> tuple[list[DocumentSummary], list[SpecIssue], frozenset[str]]:
    """Every spec file's documents and problems, and the names of its invalid documents,
    parsing only files the cache lacks."""
    paths = [path for path in matching(source.paths(), project.specs) if path != PROJECT_FILE]
    blobs = {path: source.blob_id(path) for path in paths}
    results = {path: cache.get(path, blobs[path]) for path in paths}
    missing = [path for path, result in results.items() if result is None]
    for path, (fresh, plain) in _parse_files(source.read_many(missing), project).items():
        if plain is None:
            cache.put(path, blobs[path], fresh)
        else:
            cache.put_plain(path, blobs[path], plain)
        results[path] = fresh
    cache.keep_only(blobs)
    summaries: list[DocumentSummary] = []
    issues: list[SpecIssue] = []
    invalid: set[str] = set()
    for result in results.values():
        assert result is not None  # every miss was parsed just above
        summaries.extend(result.documents)
        issues.extend(result.issues)
        invalid.update(result.invalid)
    return summaries, issues, frozenset(invalid)


# Below this many files a worker pool costs more to start than it saves.
_PARALLEL_FROM = 500


Parsed = dict[str, tuple[FileResult, tuple[Any, ...] | None]]


def _parse_files(contents: dict[str, bytes], project: Project) -> Parsed:
    """Parse and validate files, on every core when there are many (a cold sweep).

    Results from worker processes come with their plain form, which the cache stores as
    it is (converting them back would cost as much as sending them)."""
    workers = min(os.cpu_count() or 1, 8)
    if len(contents) < _PARALLEL_FROM or workers < 2:
        return {path: (_parse_file(path, data, project), None) for path, data in contents.items()}
    # Imported only for a pool: a warm load (most of them) never starts one.
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    items = list(contents.items())
    chunks = [items[start::workers] for start in range(workers)]
    try:
        context = _pool_context()
        with ProcessPoolExecutor(max_workers=workers, mp_context=context) as pool:
            parts = list(pool.map(_parse_chunk, chunks, [project] * workers))
    except (OSError, ValueError, BrokenProcessPool):
        return {path: (_parse_file(path, data, project), None) for path, data in items}
    return {path: (FileResult.from_plain(plain), plain) for part in parts for path, plain in part}


def _pool_context() -> BaseContext:
    """Fork, the quickest start, unless another thread runs (a live plan observes the
    cluster while it loads): a fork copies the locks that thread holds and the files it
    has open (a local job's alive lock), so workers then come from a fork server, a
    clean process of one thread with this module loaded."""
    import multiprocessing

    if threading.active_count() == 1:
        return multiprocessing.get_context("fork")
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([__name__])
    return context


def _parse_chunk(
    items: list[tuple[str, bytes]], project: Project
) -> list[tuple[str, tuple[Any, ...]]]:
    # Plain tuples cross the process boundary far faster than models.
    return [(path, _parse_file(path, content, project).to_plain()) for path, content in items]


def _parse_file(path: str, content: bytes, project: Project) -> FileResult:
    text = _decode(content, path)
    if isinstance(text, SpecIssue):
        return FileResult((), (text,))
    raw_documents, issues = parse_documents(text, path)
    summaries: list[DocumentSummary] = []
    invalid: list[str] = []
    for raw in raw_documents:
        document, document_issues = validate_spec(raw)
        issues.extend(document_issues)
        if document is None:
            invalid.extend(_named(raw.data) if document_issues else ())
            continue
        own_issues = (check_matrix(document) or check_tokens(document)) + check_step_layout(
            document
        )
        issues.extend(own_issues)
        if own_issues:
            invalid.append(document.spec.name)
        else:
            summaries.append(summarize(document, _hash_unless_script(document.spec, project)))
    return FileResult(tuple(summaries), tuple(issues), tuple(invalid))


def _named(data: object) -> tuple[str, ...]:
    """The name an invalid document gives itself, if it gives one."""
    name = data.get("name") if isinstance(data, dict) else None
    return (name,) if isinstance(name, str) else ()


def _hash_unless_script(spec: Run | Allocation, project: Project) -> str | None:
    if isinstance(spec, Run):
        # A script file's content and declared environment files' blob ids join the hash;
        # they are read once all files are known.
        effective = effective_run(spec, project)
        if spec.script is not None or (effective.environment and effective.environment.files):
            return None
        return spec_hash(effective)
    return spec_hash(effective_allocation(spec, project))


def _decode(content: bytes, path: str) -> str | SpecIssue:
    try:
        return content.decode("utf-8")
    except UnicodeDecodeError as error:
        return SpecIssue(path, None, "", f"not UTF-8 text (byte {error.start})")


def _read_scripts(
    source: SpecSource, summaries: list[DocumentSummary], all_paths: list[str]
) -> tuple[dict[str, str], list[SpecIssue]]:
    """The content of every `script:` file, read from the same commit as the specs."""
    scripts: dict[str, str] = {}
    issues: list[SpecIssue] = []
    paths: set[str] = set()  # every path, gathered at the first script: most projects have none
    for summary in summaries:
        if summary.script is None:
            continue
        paths = paths or set(all_paths)

        def issue(message: str, summary: DocumentSummary = summary) -> SpecIssue:
            return SpecIssue(summary.file, summary.script_line, "script", message)

        normalized = Path(summary.script).as_posix()
        if summary.script.startswith("/") or ".." in Path(summary.script).parts:
            issues.append(issue("must be a path inside the repo"))
        elif normalized not in paths:
            committed = "" if source.commit is None else " at this commit (is it committed?)"
            issues.append(issue(f"{summary.script!r} is not in the repo{committed}"))
        elif (target := source.target(normalized)) is None:
            issues.append(
                issue(
                    f"{summary.script!r} is a symbolic link that leads outside the project "
                    "or to nothing at this commit, so its content has no version: point "
                    "script: at a file in the repo (a link to one is fine)"
                )
            )
        else:
            text = _decode(source.read(target), normalized)
            if isinstance(text, SpecIssue):
                issues.append(issue(text.message))
            else:
                scripts[summary.name] = text
    return scripts, issues


def _model(summary: DocumentSummary) -> Run | Allocation:
    # Validated once already (now or when cached), so this cannot fail.
    return KINDS[summary.kind].model_validate(raw_document(summary.data))


def _desired_run(
    summary: DocumentSummary,
    project: Project,
    scripts: dict[str, str],
    expansion: sweeps.Expansion,
    made: _MadeOnce,
    blobs: dict[str, str],
) -> DesiredRun:
    """A run whose model is built when first asked for: its shape comes from the summary,
    and so does its hash, unless a script's content or environment files join it."""
    member = expansion.members.get(summary.name)
    if member is not None:
        return _desired_member(summary, member, project, scripts, expansion, made, blobs)
    singles = expansion.singles.get(summary.name, {})

    def build() -> Run:
        spec = _model(summary)
        assert isinstance(spec, Run)
        if singles:  # an input that reads one member names it
            spec = spec.model_copy(update={"inputs": _inputs(spec, singles)})
        return effective_run(spec, project)

    script = scripts.get(summary.name)
    run = DesiredRun(
        build,
        location=Location(summary.file, summary.line),
        spec_hash=summary.spec_hash or (lambda: spec_hash(run.spec, script, blobs)),
        script_text=script,
        gathers=expansion.gathers.get(summary.name, {}),
        shape=_shape(summary, project, singles, made),
        resources=lambda: made.resources_of(summary, project),
        environment_blobs=blobs,
        code=made.code.of(summary),
    )
    return run


def _desired_member(
    summary: DocumentSummary,
    member: Member,
    project: Project,
    scripts: dict[str, str],
    expansion: sweeps.Expansion,
    made: _MadeOnce,
    blobs: dict[str, str],
) -> DesiredRun:
    """A member: its sweep's effective spec (built and put in canonical form once per
    sweep) under its own name and directory, inputs that read one member naming it. Its
    hash comes from the sweep's canonical form without building the member's model."""
    singles = expansion.singles.get(summary.name, {})
    script = scripts.get(member.sweep)

    bases = made.bases

    def base_of() -> tuple[Run, dict[str, Any]]:
        if member.sweep not in bases:
            sweep = _model(summary)
            assert isinstance(sweep, Run)
            base = effective_run(sweep.model_copy(update={"matrix": None}), project)
            bases[member.sweep] = (base, canonical_fields(base, blobs))
        return bases[member.sweep]

    def build() -> Run:
        base, _fields = base_of()
        update: dict[str, Any] = {"name": member.name, "workdir": summary.workdir}
        if singles:
            update["inputs"] = _inputs(base, singles)
        return base.model_copy(update=update)

    def digest() -> str:
        _base, fields = base_of()
        fields = {**fields, "name": member.name, "workdir": summary.workdir}
        if singles:
            fields["inputs"] = canonical_fields(run.spec, blobs)["inputs"]
        return hash_of_fields(fields, script)

    run = DesiredRun(
        build,
        location=Location(summary.file, summary.line),
        spec_hash=digest,
        script_text=script,
        member=member,
        gathers=expansion.gathers.get(summary.name, {}),
        shape=_shape(summary, project, singles, made),
        resources=lambda: made.resources_of(summary, project),  # its document is its sweep's
        environment_blobs=blobs,
        code=made.code.of(summary),
    )
    return run


def _shape(
    summary: DocumentSummary, project: Project, singles: dict[str, str], made: _MadeOnce
) -> RunShape:
    """The run's shape from its summary, as its model would give it (`_inputs` included)."""
    external = dict(summary.external_inputs)
    inputs = {
        ref.name: DeclaredInput(None, external[ref.name])
        if ref.run is None
        else DeclaredInput(f"{singles.get(ref.name, ref.run)}.{ref.output}", None)
        for ref in summary.inputs
    }
    outputs = {
        name: DeclaredOutput(path, marker, how)
        for name, path, marker, how in summary.outputs_declared
    }
    return RunShape(
        summary.name,
        run_workdir(summary.workdir, project.runs_dir, summary.name),
        summary.allocation,
        summary.coupled_with,
        outputs,
        inputs,
        made.environment_of(summary, project),
        summary.data.get("suspend") is True,
    )


def _inputs(spec: Run, singles: dict[str, str]) -> dict[str, Input]:
    return {
        name: spec_input.model_copy(update={"from_": f"{singles[name]}.{spec_input.upstream[1]}"})
        if name in singles and spec_input.upstream is not None
        else spec_input
        for name, spec_input in spec.inputs.items()
    }


def _desired_allocation(summary: DocumentSummary, project: Project) -> DesiredAllocation:
    spec = _model(summary)
    assert isinstance(spec, Allocation)
    allocation = effective_allocation(spec, project)
    return DesiredAllocation(
        allocation, Location(summary.file, summary.line), summary.spec_hash or spec_hash(allocation)
    )


@dataclass
class Loaded(LoadMemo):
    """What one load of a commit was made from, kept with its ``Desired`` so that a later
    commit that changes a few runs' specs is loaded from it (``reload``) instead of
    from every file again. ``expansion`` is the load's: its members, singles and gathers
    hold for a reload, which changes none of them."""

    project: Project
    documents: list[DocumentSummary]  # every document, each sweep as its members
    runs: dict[str, DocumentSummary]
    expansion: sweeps.Expansion
    scripts: dict[str, str]
    blobs: dict[str, str]  # environment files -> blob id
    made: _MadeOnce
    # file -> the names of its documents, in order (made on first use)
    _by_file: dict[str, list[str]] | None = None
    # what runs read beside their specs, made on first use: the words of their commands
    # (those naming a file are code), scripts and environment files; and their globs
    _read: set[str] | None = None
    _globs: set[tuple[str, ...]] = field(default_factory=set)

    def by_file(self) -> dict[str, list[str]]:
        if self._by_file is None:
            found: dict[str, list[str]] = {}
            for document in self.documents:
                found.setdefault(document.file, []).append(document.name)
            self._by_file = found
        return self._by_file

    def read_by_runs(self, paths: Collection[str]) -> bool:
        """Whether any run reads one of ``paths`` beside its spec: as its code (a word of
        its command, or a file its `code:` globs match, or a link to one), its script or
        an environment file."""
        if self._read is None:
            words: set[str] = set(self.blobs)
            globs: set[tuple[str, ...]] = set()
            for summary in self.runs.values():
                words.update(summary.code_words)
                if summary.code_globs:
                    globs.add(summary.code_globs)
                if summary.script is not None:
                    words.add(Path(summary.script).as_posix())
            self._read = words
            self._globs = globs
        if self.made.code.source_has_links:
            return True  # a word may name a link to one of them: not told apart here
        return any(path in self._read for path in paths) or any(
            matching(list(paths), patterns) for patterns in self._globs
        )


@dataclass(frozen=True)
class Reloaded:
    desired: Desired
    changed: frozenset[str]  # the runs whose document differs, in any way


def reload(previous: Desired, commit: str, changes: list[FileChange]) -> Reloaded | None:
    """The desired state at ``commit``, made from ``previous`` (loaded from an earlier
    commit) and the files that differ between them (``source.changed_files``), when the
    change is one this can tell apart: spec files changed in place whose runs keep
    their names, files, shapes (directory, inputs, outputs, allocation, coupling,
    environment kind), code globs and environment files, and no sweep or allocation
    among them. Anything else is None, and the caller loads in full: recon.yaml, a file
    added, removed or turned into a link, a file that is not a spec (a run's code or
    script), a spec file any run reads beside its spec, a spec with a problem (a full
    load reports it with the others). The graph, the sweeps, the allocations and every
    project-wide check (unique names, references, output paths, cycles) are then the
    previous load's, since nothing they read changed."""
    loaded = previous.loaded
    if not isinstance(loaded, Loaded) or previous.commit is None or not changes:
        return None
    project = loaded.project
    paths = {change.path for change in changes}
    for change in changes:
        regular = change.old_mode == change.new_mode and change.new_mode in _REGULAR
        if change.status != "M" or not regular or change.path == PROJECT_FILE:
            return None
        if not matching([change.path], project.specs):
            return None
    if loaded.read_by_runs(paths):
        return None
    contents = read_blobs(previous.root, [change.new_blob for change in changes])
    by_file = loaded.by_file()
    replaced: dict[str, DocumentSummary] = {}
    for change, content in zip(changes, contents, strict=True):
        result = _parse_file(change.path, content, project)
        if result.issues or result.invalid:
            return None
        names = [document.name for document in result.documents]
        if names != by_file.get(change.path, []):
            return None
        for document in result.documents:
            before = loaded.runs.get(document.name)
            if before is None:  # an allocation (or a sweep, as its members)
                return None
            if document != before:
                replaced[document.name] = document
    made = loaded.made
    runs = previous.runs
    for name, document in replaced.items():
        if not _same_shape(loaded, runs[name], document, paths):
            return None
    summaries = {**loaded.runs, **replaced}
    expansion, scripts, blobs = loaded.expansion, loaded.scripts, loaded.blobs

    def build(name: str) -> DesiredRun:
        if name in replaced:
            return _desired_run(replaced[name], project, scripts, expansion, made, blobs)
        return runs[name]

    known_hash = runs.known_hash if isinstance(runs, LazyMapping) else _no_hash
    code_of = made.code.of
    reloaded = Loaded(
        project, loaded.documents, summaries, expansion, scripts, blobs, made, by_file
    )
    if loaded._read is not None:  # the changed runs' words and globs were the same kind
        words = {word for document in replaced.values() for word in document.code_words}
        reloaded._read, reloaded._globs = loaded._read | words, loaded._globs
    desired = Desired(
        previous.project,
        previous.root,
        commit,
        LazyMapping(
            list(runs),
            build,
            lambda name: replaced[name].spec_hash if name in replaced else known_hash(name),
            lambda name: code_of(summaries[name]),
        ),
        previous.allocations,
        previous.upstreams,
        previous.warnings,
        previous.sweeps,
        reloaded,
        previous.renamed,
    )
    return Reloaded(desired, frozenset(replaced))


_REGULAR = frozenset({"100644", "100755"})  # git's modes of a file that is no link


def _no_hash(_name: str) -> str | None:
    return None


def _same_shape(
    loaded: Loaded, before: DesiredRun, document: DocumentSummary, changed: set[str]
) -> bool:
    """Whether a run's new document keeps everything but what is its own alone: the
    shape every pass reads (its directory, inputs, outputs, allocation, coupling and
    environment kind), no matrix and no script, the same code globs and environment
    files, and code that names no changed file."""
    old = loaded.runs[document.name]
    if document.kind != "Run" or document.name in loaded.expansion.members:
        return False
    if document.name in loaded.expansion.sweeps or document.data.get("matrix") is not None:
        return False
    if document.spec_hash is None or document.script is not None or old.script is not None:
        return False
    if document.renamed_from != old.renamed_from:  # what a pass moves: a full one
        return False
    if (document.code_globs, document.environment_files) != (old.code_globs, old.environment_files):
        return False
    if [(ref.name, ref.run, ref.output) for ref in document.inputs] != [
        (ref.name, ref.run, ref.output) for ref in old.inputs
    ]:
        return False
    singles = loaded.expansion.singles.get(document.name, {})
    if _shape(document, loaded.project, singles, loaded.made) != before.shape:
        return False
    return not changed & set(loaded.made.code.of(document))
