"""Where a run's directory and its inputs are on the cluster filesystem.

Both the apply step (to render a job's script) and the state layer (to look at outputs on
disk and write provenance beside them) need these paths, so they live here, below both:
the state layer must not import the engine.
"""

from __future__ import annotations

import os
from pathlib import Path

from reconciler.desired.desired import DeclaredInput, Desired, DesiredRun
from reconciler.scheduler.runfolder import input_list_file
from reconciler.scheduler.tag import Tag, TagKind, deployment_id

JOURNAL_FILE = "journal.sqlite"


def state_dir(desired: Desired) -> Path:
    """The project's state directory: journal, lock, snapshots, local jobs."""
    return desired.root / desired.project.state_dir


def journal_path(desired: Desired) -> Path:
    return state_dir(desired) / JOURNAL_FILE


def deployment(desired: Desired) -> str:
    """This place's deployment id of the project (``tag.deployment_id``)."""
    return deployment_id(state_dir(desired))


def tag_for(desired: Desired, kind: TagKind, name: str, spec_hash: str) -> Tag:
    """The tag a job of this deployment's run or allocation carries. Here, not in the
    planner: the deployment id is the state directory's resolved path, read from disk."""
    return Tag(
        project=desired.project.project,
        deployment=deployment(desired),
        kind=kind,
        name=name,
        spec_hash=spec_hash,
    )


def run_dir(desired: Desired, run: DesiredRun) -> Path:
    """The run's directory on the cluster filesystem: `workdir`, from the project root,
    absolute and with symlinks resolved, as the job's script and its provenance name it."""
    return Path(run_path(desired, run)).resolve()


def run_path(desired: Desired, run: DesiredRun) -> str:
    """The same directory, as a plain string and not resolved, for looking at thousands of
    runs' outputs: the kernel follows the same links when a path under it is opened, and
    resolving (a system call per path component) or a pathlib join costs more than the
    look itself."""
    return os.path.join(desired.root, run.workdir)


def external_path(desired: Desired, spec_input: DeclaredInput) -> Path | None:
    """An external `path:` input's location (a relative one from the project root); None
    for an input that is another run's output."""
    return desired.root / spec_input.path if spec_input.path is not None else None


def input_list(desired: Desired, run: DesiredRun, name: str) -> Path:
    """The file listing an input's paths, one per line (``{inputs.X.list}``): apply
    writes it before the job is submitted."""
    return input_list_file(run_dir(desired, run), name)


def input_lists(desired: Desired, run: DesiredRun) -> dict[str, tuple[Path, ...]]:
    """Every path each input reads: the outputs of every member it gathers, or its one path."""
    paths = input_paths(desired, run, lists=False)
    return {
        name: tuple(
            run_dir(desired, desired.runs[member]) / _output_path(desired, member, name, run)
            for member in run.gathers[name]
        )
        if name in run.gathers
        else (paths[name],)
        for name in run.inputs
    }


def _output_path(desired: Desired, member: str, input_name: str, run: DesiredRun) -> str:
    upstream = run.inputs[input_name].upstream
    assert upstream is not None  # a gathered input names a sweep's output
    return desired.runs[member].outputs[upstream[1]].path


def input_paths(desired: Desired, run: DesiredRun, lists: bool = True) -> dict[str, Path]:
    """Each input's absolute path: an upstream's output in its run directory, or the
    external path. An input that gathers a sweep's members is the file listing their
    paths (``input_list``)."""
    paths: dict[str, Path] = {}
    for name, spec_input in run.inputs.items():
        if name in run.gathers:
            if lists:
                paths[name] = input_list(desired, run, name)
        elif spec_input.upstream is not None:
            upstream_name, output = spec_input.upstream
            upstream = desired.runs[upstream_name]
            paths[name] = run_dir(desired, upstream) / upstream.outputs[output].path
        else:
            external = external_path(desired, spec_input)
            assert external is not None  # an input is either `from` or `path`
            paths[name] = external
    return paths
