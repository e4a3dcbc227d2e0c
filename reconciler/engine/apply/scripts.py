"""A run's batch script as this deployment submits it, built in one place.

The manifest's ``script_sha256`` says which bytes a job ran; it is right only while the
script settle renders after the fact is the one apply submitted. Both build it here, from
the same render context, and rendering is pure: the same context gives the same bytes.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from reconciler.desired.desired import Desired, DesiredRun
from reconciler.engine.plan.identity import tag_for
from reconciler.scheduler.render import RenderContext, render_batch_script
from reconciler.state.paths import input_lists, input_paths, run_dir


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


def script_sha256(desired: Desired, run: DesiredRun, code_dir: Path) -> str:
    """The sha256 of the batch script a job of the run's current spec ran."""
    script = render_batch_script(run, render_context(desired, run, code_dir))
    return hashlib.sha256(script.encode()).hexdigest()
