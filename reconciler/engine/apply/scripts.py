"""A run's batch script as this deployment submits it, built in one place; what must exist
before it is submitted (``prepare``) and the environment it goes with (``environment_fields``).

The manifest's ``script_sha256`` says which bytes a job ran: apply journals the digest
of the script it sends with the intent, before sbatch (``script_sent``). A job an earlier
release submitted has none journalled: settle renders its script again here
(``script_sha256``), from the same render context, which is right only while this release
renders it as that one did.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from reconciler.desired.desired import Desired, DesiredRun
from reconciler.engine.apply.skips import skip_check_files
from reconciler.engine.plan.actions import SkipCheck
from reconciler.scheduler.jobenv import submission_environment
from reconciler.scheduler.render import (
    RenderContext,
    render_batch_script,
    required_directories,
    required_files,
    staged_outputs,
)
from reconciler.state.paths import input_lists, input_paths, run_dir, tag_for
from reconciler.state.records import ScriptSent


def render_context(desired: Desired, run: DesiredRun, code_dir: Path) -> RenderContext:
    """What the run's script is rendered from: its tag, where its code and its directory
    are, and where each input is."""
    return RenderContext(
        project=desired.project.project,
        code_dir=code_dir,
        run_dir=run_dir(desired, run),
        tag=tag_for(desired, "run", run.name, run.spec_hash),
        input_paths=input_paths(desired, run),
        input_lists=input_lists(desired, run),
        project_dir=desired.root.absolute(),
    )


def script_sent(script: str, *, sbatch: bool = True) -> ScriptSent:
    """What the journal keeps of ``script`` with its intent: its digest, and the options
    sbatch reads from its #SBATCH lines (those before its first command); ``sbatch``
    False: a step's, started by srun, which reads none."""
    options = []
    for line in script.splitlines()[1:]:
        if not line.startswith(_DIRECTIVE):
            break
        options.append(line.removeprefix(_DIRECTIVE))
    digest = hashlib.sha256(script.encode()).hexdigest()
    return ScriptSent(digest, tuple(options) if sbatch else None)


_DIRECTIVE = "#SBATCH "


def script_sha256(desired: Desired, run: DesiredRun, code_dir: Path) -> str:
    """The sha256 of the batch script a job of the run's current spec ran, rendered again:
    for a job whose intent did not journal it (an earlier release's)."""
    script = render_batch_script(run, render_context(desired, run, code_dir))
    return hashlib.sha256(script.encode()).hexdigest()


def prepare(run: DesiredRun, context: RenderContext, check: SkipCheck | None = None) -> None:
    """What must exist before sbatch: the run's directories, its inputs' list files, and
    the versions its job compares its inputs with (a run that may rerun); any left from an
    earlier submission are removed, so no other job of the run ever skips."""
    for directory in required_directories(run, context):
        directory.mkdir(parents=True, exist_ok=True)
    for path, text in required_files(run, context).items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    for path, content in skip_check_files(run, context, check).items():
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def linked_output(run: DesiredRun, context: RenderContext) -> str | None:
    """Why the run cannot be submitted when a staged output's published path is a
    symbolic link (``data -> /scratch/...``): publishing replaces that path by a rename,
    so the job would put a folder of its own where the link was, on this filesystem, and
    drop the link, not write through it. None otherwise."""
    for name, path in staged_outputs(run, context).items():
        published = path.rstrip("/")
        if os.path.islink(published):
            return (
                f"{run.location}: outputs.{name}: {published} is a symbolic link (to "
                f"{os.readlink(published)}), which publishing the staged output would "
                "replace rather than write through; declare the output `staged: false` to "
                "write it in place, through the link, or point the output at a path that "
                "is not a link"
            )
    return None


def environment_fields(run: DesiredRun) -> dict[str, Any]:
    """The request fields that give a job the environment its run declares (a clean base
    and what it passes by name, ``scheduler/jobenv``), or none when it inherits."""
    made = submission_environment(run.spec.environment, os.environ)
    if made is None:
        return {}
    environment, passed = made
    return {"environment": environment, "passed": passed}
