"""`recon validate`, `recon schema`, `recon version`: the specs, without a cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reconciler import __version__
from reconciler.commands.common import (
    RepoArgument,
    RevisionOption,
    WorktreeOption,
    console,
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
