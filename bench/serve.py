"""What one look of `recon serve` costs beyond the look itself, at sweep scale.

    python bench/serve.py [--sizes 1000,2000,5000] [--repeat 3]

The server looks at the cluster once per interval (the same look as `recon status`,
measured by bench/plan.py) and then builds the page's view of it: each run's status,
the graph drawn as SVG (at most 200 nodes), the plan as text, and the JSON a browser
fetches when the view changed. This measures, on the `completed` scenario of
bench/plan.py with the local backend (every run succeeded, one ended job and one journal
record each): the look, the view built from it, the JSON's size, and one run's details
(its status, jobs, history, outputs' versions, log tail and manifest). CPU seconds of this
process, the median of --repeat, and the growth per doubling of runs. Nothing is
submitted. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

import plan as plan_bench  # noqa: E402  (bench/plan.py: the same repos)


def cpu_seconds(action: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.process_time()
        result = action()
        times.append(time.process_time() - started)
    return statistics.median(times), result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,2000,5000")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]

    from reconciler.engine.reconcile import Request, look_once
    from reconciler.web.snapshot import run_details, snapshot_of

    looks, views, details, sizes_kb = [], [], [], []
    with tempfile.TemporaryDirectory() as work:
        for size in sizes:
            root = Path(work) / f"n{size}"
            plan_bench.make_repo(root, size, "completed", "local")
            plan_bench.seed_completed(root, "local", root / "sacct.txt")
            request = Request(root, scheduler="local")
            look_once(request)  # the parse cache warm, as a running server's is
            look_cpu, look = cpu_seconds(partial(look_once, request), args.repeat)
            now = datetime.now(UTC)
            view_cpu, view = cpu_seconds(partial(snapshot_of, look, now, 200), args.repeat)
            body = json.dumps(view.summary()).encode()
            one_cpu, one = cpu_seconds(partial(run_details, view, "sweep-7"), args.repeat)
            assert one is not None and one["status"]["sync"] == "current", one
            looks.append(look_cpu)
            views.append(view_cpu)
            details.append(one_cpu)
            sizes_kb.append(len(body) / 1024)
            print(
                f"{size:>6} runs: look {look_cpu:6.3f} s, view {view_cpu:6.3f} s "
                f"({100 * view_cpu / look_cpu:4.1f}% of the look), page JSON "
                f"{len(body) / 1024:7.1f} KiB, one run's details {1000 * one_cpu:6.1f} ms",
                flush=True,
            )
    print(f"growth per doubling: look {plan_bench.growth(sizes, looks)}, "
          f"view {plan_bench.growth(sizes, views)}, JSON {plan_bench.growth(sizes, sizes_kb)}, "
          f"details {plan_bench.growth(sizes, details)}")  # fmt: skip


if __name__ == "__main__":
    main()
