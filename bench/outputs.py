"""Output versioning speed at sweep scale: 10,000 runs, each with one small output file.

    python bench/outputs.py [--runs 10000] [--how fingerprint] [--keep DIR]

Times ``observe_outputs`` over all the runs (what one planning pass does), then
``version_of`` on one directory output holding as many files. Target: the fingerprint of
10,000 small outputs well under a second. The files are in a fresh temporary directory,
so the figure is for a warm page cache on a local disk; a network filesystem adds its
latency per ``stat``. Prints the figures; it is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from pathlib import Path

from reconciler.desired.desired import Desired, DesiredRun, Location, effective_run, spec_hash
from reconciler.desired.models import HashKind, Project, Run
from reconciler.state.outputs import observe_outputs, version_of


def make_desired(root: Path, runs: int, how: HashKind) -> Desired:
    project = Project(project="sweep")
    entries: dict[str, DesiredRun] = {}
    for i in range(runs):
        spec = Run.model_validate(
            {
                "kind": "Run",
                "name": f"sweep-{i}",
                "command": "true",
                "outputs": {"model": {"path": "model.json", "hash": how}},
            }
        )
        effective = effective_run(spec, project)
        entries[spec.name] = DesiredRun(
            effective, location=Location("s.yaml", i), spec_hash=spec_hash(effective)
        )
        directory = root / "runs" / spec.name
        directory.mkdir(parents=True)
        (directory / "model.json").write_text(f'{{"seed": {i}, "loss": 0.{i}}}\n')
    return Desired(project, root, None, entries, {}, {})


def make_tree(root: Path, files: int) -> Path:
    tree = root / "tree"
    for i in range(files):
        directory = tree / f"shard-{i // 100:03d}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"part-{i:05d}.json").write_text(f'{{"i": {i}}}\n')
    return tree


def best_of(repeat: int, action: object) -> float:
    assert callable(action)
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        action()
        timings.append(time.perf_counter() - started)
    return min(timings)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10_000)
    parser.add_argument("--how", choices=("fingerprint", "content"), default="fingerprint")
    parser.add_argument("--keep", type=Path, help="build the files here and keep them")
    args = parser.parse_args()
    root = args.keep or Path(tempfile.mkdtemp(prefix="recon-bench-outputs."))
    try:
        desired = make_desired(root, args.runs, args.how)
        names = list(desired.runs)
        seconds = best_of(3, lambda: observe_outputs(desired, names))
        versions = observe_outputs(desired, names)
        assert all(v is not None for v in versions.values())
        print(f"observe_outputs, {args.runs} {args.how} outputs of one small file: {seconds:.3f} s")
        tree = make_tree(root, args.runs)
        seconds = best_of(3, lambda: version_of(tree, args.how))
        print(f"version_of, one directory of {args.runs} small files ({args.how}): {seconds:.3f} s")
    finally:
        if args.keep is None:
            shutil.rmtree(root)


if __name__ == "__main__":
    main()
