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
    plural,
    warn,
)


def version() -> None:
    """Print recon's version."""
    print(__version__)


def validate(
    repo: RepoArgument = Path("."),
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
) -> None:
    """Check every spec (YAML, fields, resources, names, references, cycles); list ALL problems."""
    from reconciler.spec.loader import load_desired, open_source  # when run: quick --help

    source = open_source(repo, rev, worktree)
    desired = warn(load_desired(source))
    note_uncommitted(desired, rev, "validate")
    where = desired.commit[:12] if desired.commit else "the work tree"
    console.print(
        f"OK: project {desired.project.project}, {plural(len(desired.runs), 'run')}, "
        f"{plural(len(desired.allocations), 'allocation')} at {where}."
    )


def schema(
    out: Annotated[Path, typer.Option("--out", help="Directory to write into.")] = Path("schemas"),
) -> None:
    """Write the JSON Schemas of recon.yaml, Run and Allocation (for editors and CI)."""
    from reconciler.spec import schema as spec_schema

    for path in spec_schema.write(output_folder(out)):
        console.print(f"wrote {path}")
