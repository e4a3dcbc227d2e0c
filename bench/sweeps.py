"""A sweep of 10,000 members, end to end above the scheduler: validate, plan, apply, observe.

    python bench/sweeps.py [--members 1250,2500,5000,10000] [--max-array-size 1001]

For each size, one spec file declaring a sweep of that many members (`lr` x `seed`):
- validate: `recon validate` in a fresh process, cold (no parse cache) and warm (again),
  in CPU seconds of the whole process; targets as the loader's for 10,000 documents:
  4 s cold, 0.5 s warm;
- plan: load + plan with nothing on the cluster (every member to submit), in process;
- apply: the plan carried out against a scheduler that counts sbatch calls (each member's
  task script and the arrays' maps are really written); target: at most
  ceil(members / MaxArraySize) sbatch calls;
- observe: the real Slurm adapter's `observe` on sacct text of every task done (a task row
  with its batch and extern steps), the arrays split per member from their maps, then a
  plan against that (every member current): one observation pass, however many tasks.
Prints CPU seconds (steadier than wall time on a shared machine) and growth per doubling.
A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))

from reconciler.desired.desired import Desired  # noqa: E402
from reconciler.desired.loader import load_desired, open_source  # noqa: E402
from reconciler.engine.apply.applier import Applier  # noqa: E402
from reconciler.engine.observe import endings  # noqa: E402
from reconciler.engine.observe.arrays import read_maps  # noqa: E402
from reconciler.engine.observe.files import file_state  # noqa: E402
from reconciler.engine.plan import plan as make_plan  # noqa: E402
from reconciler.engine.plan.identity import split_by_owner  # noqa: E402
from reconciler.scheduler.base import Observation, SubmitRequest  # noqa: E402
from reconciler.scheduler.slurm.adapter import SlurmScheduler  # noqa: E402
from reconciler.scheduler.testing import ScriptedScheduler, job_ids  # noqa: E402
from reconciler.state.journal import Journal  # noqa: E402
from reconciler.state.paths import deployment  # noqa: E402

SPEC = """\
kind: Run
name: train
matrix:
  lr: {lrs}
  seed: {seeds}
max_parallel: 64
resources:
  cpus: 1
  memory: 1GiB
  time: "01:00:00"
command: python train.py --lr {{matrix.lr}} --seed {{matrix.seed}} --out {{outputs.model.path}}
outputs:
  model: model.pt
"""
TIMES = "2026-12-01T10:00:00|2026-12-01T10:01:00|2026-12-01T10:02:00"


def git(root: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_repo(root: Path, members: int) -> None:
    lrs = 50  # members must be a multiple of it
    seeds = members // lrs
    (root / "specs").mkdir(parents=True)
    (root / "recon.yaml").write_text("project: benchsweep\nscheduler: slurm\n")
    spec = SPEC.format(
        lrs=[round(0.0001 * (i + 1), 6) for i in range(lrs)], seeds=list(range(seeds))
    )
    (root / "specs" / "train.yaml").write_text(spec)
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "sweep")


def validate(root: Path) -> float:
    """CPU seconds of a whole `recon validate` process (interpreter start included): wall
    time on a machine shared with other work says more about the others."""
    env = {**os.environ, "PYTHONPATH": str(HERE)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(root)],
        env=env, capture_output=True, text=True, check=False,
    )  # fmt: skip
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise RuntimeError(done.stdout + done.stderr)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def cpu(step: Callable[[], Any]) -> tuple[float, Any]:
    start = time.process_time()
    result = step()
    return time.process_time() - start, result


def sacct_text(desired: Desired, requests: list[SubmitRequest], top: int) -> str:
    lines = []
    for number, request in enumerate(requests, start=1):
        assert request.array is not None
        array = top + number
        tag = request.tag.format()
        for index in request.array.indices:
            job = f"{array}_{index}"
            raw = f"{array * 10000 + index}"
            lines.append(
                f"{job}|{raw}|COMPLETED|0:0||{TIMES}|cpu1|cpu|{request.workdir}|"
                f"{request.tag.job_name}|{tag}"
            )
            lines.append(f"{job}.batch|{raw}.batch|COMPLETED|0:0||{TIMES}|cpu1|||batch|")
            lines.append(f"{job}.extern|{raw}.extern|COMPLETED|0:0||{TIMES}|cpu1|||extern|")
    return "\n".join(lines) + "\n"


def one_size(members: int, size: int, work: Path) -> dict[str, float]:
    root = work / f"sweep-{members}"
    make_repo(root, members)
    figures = {"validate cold": validate(root), "validate warm": validate(root)}
    empty = Observation(taken_at=datetime.now(UTC), jobs=(), complete=True)
    now = datetime.now(UTC)

    def plan_fresh() -> Any:
        desired = load_desired(open_source(root))
        return desired, make_plan(desired, empty, [], now, scheduler="slurm", max_array_size=size)

    figures["plan"], (desired, plan) = cpu(plan_fresh)
    # sbatch answered at once, each call recorded; MaxArraySize as given.
    scheduler = ScriptedScheduler(submit=job_ids(5001), max_array_size=size)
    journal = Journal(root / ".recon" / "journal.sqlite")
    applier = Applier(plan, desired, scheduler, journal, root, lambda: now)
    figures["apply"], result = cpu(applier.run)
    assert len(result.submitted) == members, result.skipped or result.refused
    figures["sbatch calls"] = len(scheduler.submitted)
    for name in desired.sweeps["train"].members:  # every member left its output
        Path(root, desired.runs[name].spec.workdir or "", "model.pt").write_text("m")

    text = sacct_text(desired, scheduler.submitted, 5000)

    def runner(
        argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        out = text if argv[0] == "sacct" else ""
        return subprocess.CompletedProcess(list(argv), 0, out, "")

    adapter = SlurmScheduler(runner, tz=UTC)
    records = journal.records(desired.project.project)

    def observe() -> Any:
        found = adapter.observe(now - timedelta(days=2))
        project, place = desired.project.project, deployment(desired)
        return split_by_owner(found, project, place, records, read_maps(found, project, place)).own

    figures["observe"], own = cpu(observe)
    assert own.complete and len(own.jobs) == members, (own.problems[:3], len(own.jobs))

    def plan_observed() -> Any:
        judged = endings.as_recorded(records, endings.judge(desired, own, records))
        files = file_state(desired, judged, own)
        return make_plan(
            desired, own, judged, now, scheduler="slurm", files=files, max_array_size=size
        )

    figures["plan observed"], again = cpu(plan_observed)
    assert not again.has_changes, again.summary
    journal.close()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--members", default="1250,2500,5000,10000")
    parser.add_argument("--max-array-size", type=int, default=1001)
    args = parser.parse_args()
    sizes = [int(size) for size in args.members.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as work:
        # What any `recon validate` costs (interpreter, imports, git): a 50-member sweep.
        small = Path(work) / "small"
        make_repo(small, 50)
        validate(small)
        baseline = min(validate(small) for _ in range(3))
        for members in sizes:
            rows.append(one_size(members, args.max_array_size, Path(work)))
    columns = list(rows[0])
    print(f"{'members':>8}  " + "  ".join(f"{c:>13}" for c in columns))
    for members, row in zip(sizes, rows, strict=True):
        cells = [
            f"{row[c]:>13.0f}" if c == "sbatch calls" else f"{row[c]:>12.2f}s" for c in columns
        ]
        print(f"{members:>8}  " + "  ".join(cells))
    if len(sizes) > 1:
        steps = math.log2(sizes[-1] / sizes[0])
        growth = [
            (row_last / row_first) ** (1 / steps) if row_first > 0 else float("nan")
            for row_first, row_last in ((rows[0][c], rows[-1][c]) for c in columns)
        ]
        print(f"{'x/double':>8}  " + "  ".join(f"{g:>13.2f}" for g in growth))
    last = rows[-1]
    bound = math.ceil(sizes[-1] / args.max_array_size)
    print(
        f"\n{sizes[-1]} members: validate {last['validate cold']:.2f} s CPU cold (target 4 s), "
        f"{last['validate warm']:.2f} s warm (target 0.5 s), of which {baseline:.2f} s any "
        f"validate costs (a 50-member sweep); {last['sbatch calls']:.0f} sbatch "
        f"calls (at most {bound}); one observation of {sizes[-1]} tasks in "
        f"{last['observe']:.2f} s CPU"
    )


if __name__ == "__main__":
    main()
