"""Where a run's directory and its inputs are on the cluster filesystem.

Both the apply step (to render a job's script) and the state layer (to look at outputs on
disk and write provenance beside them) need these paths, so they live here, below both:
the state layer must not import the engine.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.spec.desired import Desired, DesiredRun


def run_dir(desired: Desired, run: DesiredRun) -> Path:
    """The run's directory on the cluster filesystem: `workdir`, from the project root."""
    assert run.spec.workdir is not None  # effective specs always have one
    return (desired.root / run.spec.workdir).resolve()


def input_paths(desired: Desired, run: DesiredRun) -> dict[str, Path]:
    """Each input's absolute path: an upstream's output in its run directory, or the
    external path (relative ones from the project root)."""
    paths: dict[str, Path] = {}
    for name, spec_input in run.spec.inputs.items():
        if spec_input.upstream is not None:
            upstream_name, output = spec_input.upstream
            upstream = desired.runs[upstream_name]
            paths[name] = run_dir(desired, upstream) / upstream.spec.outputs[output].path
        else:
            assert spec_input.path is not None
            paths[name] = desired.root / spec_input.path
    return paths
