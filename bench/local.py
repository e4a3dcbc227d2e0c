"""Local backend speed: how soon a submitted job runs, and what observe() costs at 200 jobs.

    python bench/local.py [--samples 20] [--jobs 200] [--keep DIR]

Figures printed (medians, and the worst of the samples):
- submit(): the call itself (id, job directory, dispatch pass, supervisor spawned);
- submit to RUNNING: until observe() reports the job RUNNING;
- submit to script: until the script's first command has run (the supervisor's start-up);
- upstream end to downstream script: an afterok hand-off with no recon process involved;
- observe() over N waiting jobs (nothing final, every job's files read each time), over
  N ended jobs read by a fresh scheduler (cold), and again by the same one (warm: ended
  jobs are remembered), and by a fresh one whose window starts after them all (what a
  state directory of many old jobs costs: a binary search).
It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.scheduler.base import SubmitRequest
from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.local.scheduler import CLOCK_STEP_BACK
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag

SINCE = datetime.now(UTC) - timedelta(hours=1)


def tag(name: str) -> Tag:
    return Tag(
        project="bench",
        deployment="0123456789ab",
        kind="run",
        name=name,
        spec_hash="0123456789abcdef",
    )


def request(work: Path, name: str, body: str, after: tuple[str, ...] = ()) -> SubmitRequest:
    script = f"#!/bin/sh\n#SBATCH --output={work}/{name}-%j.out\n{body}\n"
    return SubmitRequest(script=script, workdir=work, dependencies=after, tag=tag(name))


def wait_for(condition: Callable[[], bool], poll: float = 0.001, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise TimeoutError("gave up waiting")
        time.sleep(poll)


def started_running(scheduler: LocalScheduler, name: str) -> bool:
    found = scheduler.observe(SINCE).find("bench", name)
    return bool(found) and found[0].health is not Health.PENDING


def written(path: Path) -> bool:
    return path.exists() and path.read_text().strip() != ""


def latencies(root: Path, samples: int) -> None:
    work = root / "work"
    work.mkdir()
    scheduler = LocalScheduler(root / "latency", cpus=64)
    calls: list[float] = []
    to_running: list[float] = []
    to_script: list[float] = []
    handoffs: list[float] = []
    for index in range(samples):
        name, marker = f"job{index}", work / f"ran-{index}"
        ended, started = work / f"up-ended-{index}", work / f"down-started-{index}"
        began = time.monotonic()
        scheduler.submit(request(work, name, f"touch {marker}"))
        calls.append(time.monotonic() - began)
        wait_for(functools.partial(started_running, scheduler, name))
        to_running.append(time.monotonic() - began)
        wait_for(marker.exists)
        to_script.append(time.monotonic() - began)
        # afterok hand-off: the upstream writes its end time, the downstream its start.
        up = scheduler.submit(request(work, f"up{index}", f"sleep 0.2; date +%s.%N > {ended}"))
        scheduler.submit(request(work, f"down{index}", f"date +%s.%N > {started}", (up,)))
        wait_for(functools.partial(written, started), poll=0.01)
        handoffs.append(float(started.read_text()) - float(ended.read_text()))
    report("submit() call", calls)
    report("submit to RUNNING", to_running)
    report("submit to script running", to_script)
    report("upstream end to downstream script", handoffs)


def observe_costs(root: Path, jobs: int) -> None:
    work = root / "work-observe"
    work.mkdir()
    state = root / "observe"
    scheduler = LocalScheduler(state, cpus=64)
    gate = scheduler.submit(request(work, "gate", "sleep 600"))
    waiting = [
        scheduler.submit(request(work, f"w{index}", "true", (gate,))) for index in range(jobs)
    ]
    report(f"observe(), {jobs} waiting jobs", timed(lambda: scheduler.observe(SINCE), 10))
    scheduler.cancel(gate)  # every waiting job is cancelled with it (afterok)
    wait_for(lambda: all(job.finished for job in scheduler.observe(SINCE).jobs), poll=0.1)
    assert len(scheduler.observe(SINCE).jobs) == len(waiting) + 1
    report(
        f"observe(), {jobs} ended jobs, fresh scheduler",
        timed(lambda: LocalScheduler(state, cpus=64).observe(SINCE), 10),
    )
    report(
        f"observe(), {jobs} ended jobs, same scheduler",
        timed(lambda: scheduler.observe(SINCE), 10),
    )
    # A window that starts after every job (and the backend's allowance for clock steps).
    later = datetime.now(UTC) + CLOCK_STEP_BACK + timedelta(minutes=1)
    report(
        f"observe() after {jobs} ended jobs, fresh scheduler",
        timed(lambda: LocalScheduler(state, cpus=64).observe(later), 10),
    )


def timed(action: Callable[[], object], times: int) -> list[float]:
    durations = []
    for _ in range(times):
        began = time.perf_counter()
        action()
        durations.append(time.perf_counter() - began)
    return durations


def report(what: str, seconds: list[float]) -> None:
    median, worst = statistics.median(seconds) * 1000, max(seconds) * 1000
    print(f"{what:<50} median {median:8.1f} ms   worst {worst:8.1f} ms   (n={len(seconds)})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--keep", type=Path, default=None, help="work here and keep it")
    args = parser.parse_args()
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        latencies(args.keep, args.samples)
        observe_costs(args.keep, args.jobs)
        return
    with tempfile.TemporaryDirectory() as directory:
        latencies(Path(directory), args.samples)
        observe_costs(Path(directory), args.jobs)


if __name__ == "__main__":
    main()
