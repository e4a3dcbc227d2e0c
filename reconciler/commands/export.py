"""`recon export ro-crate`: the project's provenance as a Workflow Run RO-Crate."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from reconciler.commands.common import (
    RevisionOption,
    TargetsArgument,
    WorktreeOption,
    console,
    output_folder,
    split_arguments,
)

DEFAULT_OUT = Path("ro-crate")
app = typer.Typer(help="Export provenance in standard formats.", no_args_is_help=True)


@app.command("ro-crate")
def ro_crate(
    arguments: TargetsArgument = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    out: Annotated[
        Path | None,
        typer.Option(
            "--out",
            metavar="DIR",
            help="Folder to write the crate into (default: ro-crate, which git then ignores).",
        ),
    ] = None,
) -> None:
    """Write the provenance of the runs that succeeded as an RO-Crate.

    A Workflow Run RO-Crate: one CreateAction per run that has succeeded (or per named
    run), from the manifests beside its outputs. PROJECT is the folder holding
    recon.yaml (default: the current folder); RUN names a run to export (default: all).

    \b
    Examples:
      recon export ro-crate                   every run, into ./ro-crate
      recon export ro-crate . train --out /tmp/crate
    """
    # rocrate and the engine are imported when the command runs: `recon --help` stays quick.
    from reconciler.engine.plan.assemble import members_of
    from reconciler.engine.reconcile import Request, load
    from reconciler.errors import UnknownTarget
    from reconciler.export.rocrate import export_ro_crate
    from reconciler.state.paths import run_dir
    from reconciler.state.provenance import read_manifest

    repo, targets = split_arguments(arguments)
    desired = load(Request(repo, rev, worktree))
    targets = members_of(desired, targets)  # a sweep's name: each of its members
    unknown = [name for name in targets if name not in desired.runs]
    if unknown:
        raise UnknownTarget(f"no run named {', '.join(unknown)} in this project")
    names = targets or list(desired.runs)
    manifests = {}
    for name in names:
        manifest = read_manifest(run_dir(desired, desired.runs[name]))
        if manifest is not None:
            manifests[name] = manifest
    folder = output_folder(out or DEFAULT_OUT)
    if out is None:
        # Made by recon, not part of the project: the next plan must not note it as an
        # uncommitted change.
        ignore = folder / ".gitignore"
        if not ignore.exists():
            ignore.write_text("# written by recon export ro-crate: not part of the project\n*\n")
    written = export_ro_crate(manifests, desired.project.project, desired.commit, folder)
    skipped = len(names) - len(manifests)
    console.print(
        f"Wrote {written}/ro-crate-metadata.json: {len(manifests)} runs"
        + (f" ({skipped} without a manifest yet: never succeeded)" if skipped else "")
    )
