"""`recon validate` (and `validate-files`, for pre-commit), `recon schema`, `recon version`:
the specs, without a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reconciler import __version__
from reconciler.commands.common import (
    EXIT_ERROR,
    RepoArgument,
    RevisionOption,
    WorktreeOption,
    console,
    err_console,
    note_uncommitted,
    output_folder,
    warn,
)
from reconciler.words import plural


def version() -> None:
    """Print recon's version (the same as `recon --version`)."""
    print(__version__)


def validate(
    repo: RepoArgument = Path("."),
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
) -> None:
    """Check every spec; list all problems, with file:line.

    YAML, fields, resources, names, template tokens, references and cycles, at a commit
    (HEAD unless --rev) or in the work tree (--worktree). Needs no cluster. PROJECT is
    the folder holding recon.yaml (default: the current folder).

    \b
    Examples:
      recon validate                     the project in this folder, at HEAD
      recon validate ../cartpole --worktree   uncommitted edits included
    """
    from reconciler.desired.loader import load_desired, open_source  # when run: quick --help

    source = open_source(repo, rev, worktree)
    desired = warn(load_desired(source))
    note_uncommitted(desired, rev, "validate")
    where = desired.commit[:12] if desired.commit else "the work tree"
    console.print(
        f"OK: project {desired.project.project}, {plural(len(desired.runs), 'run')}, "
        f"{plural(len(desired.allocations), 'allocation')} at {where}."
    )


def validate_files(
    files: Annotated[
        list[Path] | None,
        typer.Argument(metavar="FILE...", show_default=False, help="Files a commit touches."),
    ] = None,
) -> None:
    """Validate each project the named files belong to, in the work tree (for pre-commit).

    A file belongs to the nearest folder above it that holds a recon.yaml; files in no
    project are left alone. Every problem is listed as FILE:LINE from the current folder
    (where pre-commit runs: the repository's top), so editors and pre-commit link them.

    \b
    Examples:
      recon validate-files specs/train.yaml recon.yaml
      git diff --cached --name-only | xargs recon validate-files
    """
    from reconciler.desired.loader import load_desired
    from reconciler.desired.source import WorktreeSource
    from reconciler.errors import SpecError

    problems: list[str] = []
    for project in _projects_of(files or []):
        shown = "" if project == Path(".") else f"{project.as_posix()}/"
        try:
            desired = warn(load_desired(WorktreeSource(project.resolve())))
        except SpecError as error:
            problems += [f"{shown}{issue}" for issue in error.issues]
            continue
        console.print(
            f"OK: {shown or './'} (project {desired.project.project}, "
            f"{plural(len(desired.runs), 'run')})"
        )
    if problems:
        err_console.print(f"error: {plural(len(problems), 'problem')} in the specs", soft_wrap=True)
        for problem in problems:
            # Plain text: a message may quote the user's YAML, never rich markup.
            err_console.out(problem, highlight=False)
        raise typer.Exit(EXIT_ERROR)


def _projects_of(files: list[Path]) -> list[Path]:
    """The project folders (holding recon.yaml) the files are in, nearest first, each once;
    relative to the current folder when they are below it."""
    here = Path.cwd()
    found: dict[Path, None] = {}
    for file in files:
        absolute = (here / file).resolve()
        for folder in absolute.parents:
            if (folder / "recon.yaml").is_file():
                found[folder] = None
                break
            if folder == here or folder == folder.parent:
                break
    return [folder.relative_to(here) if folder.is_relative_to(here) else folder for folder in found]


def schema(
    out: Annotated[Path, typer.Option("--out", metavar="DIR", help="Folder to write into.")] = Path(
        "schemas"
    ),
) -> None:
    """Write the JSON Schemas of recon.yaml and the specs, for editors and CI.

    \b
    Examples:
      recon schema                       into ./schemas
      recon schema --out /tmp/schemas
    """
    from reconciler.desired import schema as spec_schema

    for path in spec_schema.write(output_folder(out)):
        console.print(f"wrote {path}")
