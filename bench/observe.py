"""What one observation costs on the real dev cluster's slurmdbd: 500 to 2,000 ended jobs.

    python bench/observe.py --live 500,1000,2000 [--shape jobs,array] [--repeat 3] [--others 0]

For each shape, under a project of its own and a window that starts when it does, the
benchmark submits jobs running ``true`` until the project holds N of them, waits until
every one has ended and is accounted, then times the Slurm adapter's ``observe``
(``squeue``, then sacct's ``--allocations`` call, then its second call) --repeat times in
each form of the second call:
- ``named``: ``--jobs=<the project's jobs>`` (what the adapter does up to NAMED_JOBS_MAX),
- ``whole``: the window in full, steps and all (what it does past that), and
- ``adapter``: whichever the adapter picks at that N.
Shapes: ``jobs``, N plain jobs (N ids to name: past 1,000 the adapter asks for the whole
window); ``array``, N array tasks in arrays of at most 1,000 (MaxArraySize is 1,001
here), so one id to name per 1,000 tasks. Each figure is a median, in wall seconds (most
of it is slurmdbd's, in another process), per command and in all, with growth per
doubling of N; the named and whole passes must observe the same jobs, rows and steps, or
the benchmark stops. --others M adds M jobs of the same user's that are not recon's to
each window first (the whole window lists them and their steps; naming skips them).
Everything it submits is cancelled at the end (it has ended by then).
It is a benchmark, not a test: it loads the cluster, so run it where nothing else does.

    python bench/observe.py --live 500,1000,2000 --shape array --json [--repeat 5]

``--json`` compares the two forms Slurm prints an observation in, on the release it
runs on (``sinfo --version``), instead of the forms of the second call: each command of
the adapter's pass (at its own NAMED_JOBS_MAX) is timed --repeat times as recon runs it
(``--parsable2``/``--noheader`` with its ``--format`` list, or squeue's ``--format``) and
again with those replaced by ``--json``, same window, filters and jobs. Per command and
per observation (the commands' sum): median wall seconds, bytes printed, and the time
to read them (recon's parser of that text; ``json.loads`` of the JSON, less than a
reader of its records would take); then growth per doubling of N of each form's time
and bytes. The JSON must name every job of the project's the text names, or the
benchmark stops.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from reconciler.scheduler.base import ArrayRequest, Observation, ObservedJob, SubmitRequest
from reconciler.scheduler.slurm import adapter
from reconciler.scheduler.slurm.adapter import SlurmScheduler
from reconciler.scheduler.slurm.parse import Parsed, parse_sacct, parse_squeue
from reconciler.scheduler.slurm.runner import run
from reconciler.scheduler.states import ENDED
from reconciler.scheduler.tag import Tag

ARRAY_MAX = 1000
WAIT = 900.0
SCRIPT = (
    "#!/bin/bash\n#SBATCH --partition=cpu\n#SBATCH --time=1\n#SBATCH --mem=10M\n"
    "#SBATCH --output=/dev/null\ntrue\n"
)
FORMS = {"named": 10**9, "whole": 0, "adapter": adapter.NAMED_JOBS_MAX}


class Timed:
    """The real runner, remembering each command's wall time and output size."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, float, int, bool]] = []  # name, seconds, lines, --jobs
        self.argvs: list[list[str]] = []
        self.wall = 0.0

    def __call__(
        self, argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        self.argvs.append(list(argv))
        start = time.perf_counter()
        result = run(argv, stdin, env)
        named = any(arg.startswith("--jobs=") for arg in argv)
        self.calls.append((argv[0], time.perf_counter() - start, result.stdout.count("\n"), named))
        return result


class Shape:
    """One shape's project: its jobs, submitted a batch at a time, and its window."""

    def __init__(self, shape: str, workdir: Path) -> None:
        self.shape = shape
        self.project = f"benchobs{uuid.uuid4().hex[:8]}"
        self.workdir = workdir
        self.since = datetime.now(UTC) - timedelta(seconds=5)
        self.scheduler = SlurmScheduler(project=self.project)
        self.made: list[str] = []
        self.count = 0

    def grow_to(self, total: int) -> None:
        """Submit until the project holds ``total`` jobs (array tasks), then wait until
        every one has ended and sacct has them."""
        while self.count < total:
            size = (
                total - self.count if self.shape == "jobs" else min(ARRAY_MAX, total - self.count)
            )
            if self.shape == "jobs":
                for _ in range(size):
                    self.made.append(self.scheduler.submit(self._request(f"job{self.count}")))
                    self.count += 1
            else:
                array = ArrayRequest(indices=tuple(range(size)))
                self.made.append(self.scheduler.submit(self._request(f"sweep{self.count}", array)))
                self.count += size
        self._wait_ended(total)

    def add_others(self, count: int) -> None:
        """``count`` jobs of the same user's that are not recon's (no tag), in the window:
        the whole window lists them and their steps, the named call does not."""
        name = f"{self.project}-other"
        for _ in range(count):
            submitted = subprocess.run(
                ["sbatch", "--parsable", "-p", "cpu", "-t", "1", "--mem=10M", "-o", "/dev/null",
                 f"--job-name={name}", "--wrap=true"],
                capture_output=True, text=True, check=True,
            )  # fmt: skip
            self.made.append(submitted.stdout.strip())
        deadline = time.monotonic() + WAIT
        while (
            name
            in subprocess.run(
                ["squeue", "--me", "-h", "-o", "%j"], capture_output=True, text=True, check=True
            ).stdout
        ):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{count} other jobs not all ended in {WAIT} s")
            time.sleep(2)

    def _request(self, name: str, array: ArrayRequest | None = None) -> SubmitRequest:
        tag = Tag(
            project=self.project,
            deployment="0123456789ab",
            kind="run",
            name=name,
            spec_hash="0123456789abcdef",
        )
        return SubmitRequest(script=SCRIPT, workdir=self.workdir, tag=tag, array=array)

    def _wait_ended(self, total: int) -> None:
        """Until every job or task of the project's is over, with its batch step ended
        in sacct (accounting lags slurmctld by seconds): then nothing changes between the
        passes timed, and their observations must be equal."""
        deadline = time.monotonic() + WAIT
        while time.monotonic() < deadline:
            observation = self.scheduler.observe(self.since)
            units = [
                unit
                for job in observation.jobs
                if job.tag.project == self.project
                for unit in (job.tasks().values() or [job])
            ]
            if len(units) >= total and all(_accounted(unit) for unit in units):
                return
            time.sleep(2)
        raise RuntimeError(f"{self.project}: {total} jobs not all ended in {WAIT} s")

    def cancel(self) -> None:
        for job_id in self.made:
            self.scheduler.cancel(job_id)


def _accounted(job: ObservedJob) -> bool:
    return (
        job.finished
        and all(row.source == "sacct" and row.exit_code is not None for row in job.components)
        and any(step.step == "batch" and step.health in ENDED for step in job.steps)
    )


def observe(shape: Shape, limit: int) -> tuple[Observation, Timed]:
    """One pass with the second call's form decided by ``limit``; ``timed.wall`` is the
    whole pass's wall time (the commands, then parsing and combining their text)."""
    timed = Timed()
    scheduler = SlurmScheduler(timed, project=shape.project)
    previous = adapter.NAMED_JOBS_MAX
    adapter.NAMED_JOBS_MAX = limit
    try:
        start = time.perf_counter()
        observation = scheduler.observe(shape.since)
        timed.wall = time.perf_counter() - start
    finally:
        adapter.NAMED_JOBS_MAX = previous
    assert [name for name, *_ in timed.calls] == ["squeue", "sacct", "sacct"], timed.calls
    assert observation.complete, observation.problems
    return observation, timed


def content(observation: Observation, project: str) -> dict[str, object]:
    """The project's jobs, each with its tag, health and rows (squeue's ticking time left
    aside): other work of the same user's comes and goes between two passes."""
    return {
        job.job_id: (
            job.tag,
            job.health,
            sorted(repr(replace(row, time_left=None)) for row in job.rows),
        )
        for job in observation.jobs
        if job.tag.project == project
    }


# What recon asks for text with; ``--json`` replaces it all (it prints every field).
TEXT_OPTIONS = ("--parsable2", "--noheader")
COMMAND_NAMES = ("squeue", "sacct -X", "sacct 2nd")


def as_json(argv: Sequence[str]) -> list[str]:
    """The same command asking for JSON: same window, filters and jobs, no text options."""
    kept = [arg for arg in argv if arg not in TEXT_OPTIONS and not arg.startswith("--format=")]
    return [*kept, "--json"]


class Form:
    """One command in one form, run --repeat times: median seconds, bytes, read time."""

    def __init__(self, argv: Sequence[str], repeat: int, read: Callable[[str], Any]) -> None:
        seconds: list[float] = []
        for _ in range(repeat):
            start = time.perf_counter()
            result = run(argv)
            seconds.append(time.perf_counter() - start)
            if result.returncode != 0:
                sys.exit(f"{' '.join(argv)} failed: {result.stderr.strip()}")
        self.seconds = statistics.median(seconds)
        self.text = result.stdout
        self.bytes = len(result.stdout.encode())
        reads: list[float] = []
        for _ in range(repeat):
            start = time.perf_counter()
            self.read = read(self.text)
            reads.append(time.perf_counter() - start)
        self.reading = statistics.median(reads)


def text_reader(argv: Sequence[str]) -> Callable[[str], Parsed]:
    """recon's own parser of the command's text."""
    parse = parse_squeue if argv[0] == "squeue" else parse_sacct
    return lambda text: parse(text, UTC)


def text_ids(parsed: Parsed, project: str) -> set[str]:
    """The numeric ids of the rows of the project's jobs (a step's are its job's)."""
    return {
        record.raw_id.partition(".")[0]
        for record in parsed.records
        if record.raw_id and record.tag is not None and record.tag.project == project
    }


def json_ids(document: dict[str, Any]) -> set[str]:
    return {str(job["job_id"]) for job in document["jobs"]}


def release() -> str:
    return run(["sinfo", "--version"]).stdout.strip()


def compare_forms(shape: Shape, repeat: int) -> tuple[float, int, float, int]:
    """Each command of one adapter pass in text and in JSON; prints a line per command
    and the observation's sums: (text seconds, text bytes, JSON seconds, JSON bytes)."""
    _, timed = observe(shape, adapter.NAMED_JOBS_MAX)
    sums = [0.0, 0, 0.0, 0]
    for name, argv in zip(COMMAND_NAMES, timed.argvs, strict=True):
        text = Form(argv, repeat, text_reader(argv))
        encoded = Form(as_json(argv), repeat, json.loads)
        missing = text_ids(text.read, shape.project) - json_ids(encoded.read)
        if missing:
            sys.exit(f"{name}: --json leaves out jobs the text names: {sorted(missing)[:10]}")
        print(
            f"    {name:9}: text {text.seconds:6.3f} s {text.bytes / 1e3:9.1f} kB "
            f"(read {text.reading * 1e3:6.1f} ms) | json {encoded.seconds:6.3f} s "
            f"{encoded.bytes / 1e3:9.1f} kB (read {encoded.reading * 1e3:6.1f} ms)",
            flush=True,
        )
        sums[0] += text.seconds + text.reading
        sums[1] += text.bytes
        sums[2] += encoded.seconds + encoded.reading
        sums[3] += encoded.bytes
    text_seconds, text_bytes, json_seconds, json_bytes = sums
    print(
        f"    observation: text {text_seconds:6.3f} s {text_bytes / 1e3:9.1f} kB | "
        f"json {json_seconds:6.3f} s {json_bytes / 1e3:9.1f} kB "
        f"(json/text: {json_seconds / text_seconds:.1f}x time, "
        f"{json_bytes / text_bytes:.1f}x bytes)",
        flush=True,
    )
    return text_seconds, int(text_bytes), json_seconds, int(json_bytes)


def growth(sizes: Sequence[int], figures: Sequence[float]) -> str:
    """Each step's factor per doubling of N."""
    steps = [
        f"{(figures[i] / figures[i - 1]) ** (1 / math.log2(sizes[i] / sizes[i - 1])):.2f}x"
        for i in range(1, len(sizes))
    ]
    return ", ".join(steps) or "-"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--live", required=True, help="job counts, e.g. 500,1000,2000")
    parser.add_argument("--shape", default="jobs,array")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--others", type=int, default=0, help="other jobs of the user's in each window"
    )
    parser.add_argument(
        "--json", action="store_true", help="compare the text and --json forms instead"
    )
    options = parser.parse_args()
    sizes = [int(size) for size in options.live.split(",")]
    if options.json:
        print(release())
    for shape_name in options.shape.split(","):
        workdir = Path("/tmp") / f"recon-bench-observe-{uuid.uuid4().hex[:8]}"
        workdir.mkdir()
        shape = Shape(shape_name, workdir)
        print(
            f"shape {shape_name} (project {shape.project}, NAMED_JOBS_MAX {adapter.NAMED_JOBS_MAX})"
        )
        totals: dict[str, list[float]] = {form: [] for form in FORMS}
        forms: list[tuple[float, int, float, int]] = []  # text s, text B, json s, json B
        try:
            if options.others:
                started = time.monotonic()
                shape.add_others(options.others)
                took = time.monotonic() - started
                print(f"  {options.others} other jobs (not recon's) ended in {took:.0f} s")
            for size in sizes:
                started = time.monotonic()
                shape.grow_to(size)
                took = time.monotonic() - started
                print(f"  {size} {shape_name}: submitted and ended in {took:.0f} s", flush=True)
                if options.json:
                    forms.append(compare_forms(shape, options.repeat))
                    continue
                seen: dict[str, dict[str, object]] = {}
                for form, limit in FORMS.items():
                    runs = [observe(shape, limit) for _ in range(options.repeat)]
                    observation, timed = runs[-1]
                    seen[form] = content(observation, shape.project)
                    med = [statistics.median(t.calls[i][1] for _, t in runs) for i in range(3)]
                    total = statistics.median(sum(c[1] for c in t.calls) for _, t in runs)
                    wall = statistics.median(t.wall for _, t in runs)
                    totals[form].append(wall)
                    ours = [job for job in observation.jobs if job.tag.project == shape.project]
                    tasks = sum(len(job.tasks()) or 1 for job in ours)
                    print(
                        f"    {form:7} ({'--jobs' if timed.calls[2][3] else 'window'}): "
                        f"squeue {med[0]:5.2f} s, "
                        f"sacct -X {med[1]:5.2f} s ({timed.calls[1][2]} rows), "
                        f"sacct 2nd {med[2]:5.2f} s ({timed.calls[2][2]} rows); "
                        f"commands {total:5.2f} s, observe {wall:5.2f} s; "
                        f"{len(ours)} jobs, {tasks} tasks",
                        flush=True,
                    )
                if not seen["named"] == seen["whole"] == seen["adapter"]:
                    for form in ("whole", "adapter"):
                        for job_id in sorted(seen["named"].keys() | seen[form].keys())[:2000]:
                            if seen["named"].get(job_id) != seen[form].get(job_id):
                                print(f"    {job_id} named: {seen['named'].get(job_id)}")
                                print(f"    {job_id} {form}: {seen[form].get(job_id)}")
                    sys.exit(f"the named and whole passes differ at {size} {shape_name}")
            if options.json:
                for i, figure in enumerate(("text time", "text bytes", "json time", "json bytes")):
                    column = [row[i] for row in forms]
                    print(f"  growth per doubling of N, {figure}: {growth(sizes, column)}")
                continue
            for form, times in totals.items():
                print(f"  growth per doubling of N, {form} observe: {growth(sizes, times)}")
        finally:
            shape.cancel()


if __name__ == "__main__":
    main()
