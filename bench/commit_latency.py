"""How long a commit takes to reach squeue under `recon watch`, on the dev cluster, and where
the time goes.

    python bench/commit_latency.py [--commits 10] [--gap 1.0] [--keep-trace FILE]
                                   [--code DIR]

One `recon watch . --branch main` follows a project of its own (a fresh name, a temporary
git repo, `scheduler: slurm`, an interval of an hour so that only commits wake it). The
bench commits one new run at a time (`sleep 60`, 1 CPU, partition cpu), and from the
moment `git commit` returns, polls squeue until the run's job is listed. The watch runs
in a child process with timestamps added around its own functions (nothing in recon is
changed): when the ref watcher woke the loop, when the commit's pass began and ended,
and every Slurm command the pass ran (its start and end). Per commit it prints

    total    git commit returning -> the job listed by squeue
    wake     -> the ref watcher's wake-up: the file event and its debounce
    react    -> the commit's pass starting (the loop picking the wake-up up)
    pass     -> sbatch called: the tip, the lock, load, observe (its commands listed), plan
    sbatch   sbatch's own time, start to exit
    squeue   sbatch's exit -> the poll that lists the job (polled every ~10 ms; sbatch's
             exit is marked when recon has read it, so a poll can list the job sooner)

then the median of each over the commits, the wake-ups and passes each commit caused
(one of each is right), and the Slurm commands of the passes before sbatch (each call's
own time: two sacct calls may run at once). Waits
--gap seconds after each pass before the next commit, so each is measured alone.
--code DIR runs the watch from another checkout (say, /work/main), to compare on the same
load. Cancels every job of its project when it ends, even on Ctrl-C. A benchmark, not a
test.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent

# The watch, with marks: each appends one JSON line to the trace file named first.
CHILD = """\
import json, sys, threading, time
trace = open(sys.argv.pop(1), "a", buffering=1)
lock = threading.Lock()
def mark(what, **fields):
    with lock:
        trace.write(json.dumps({"what": what, "t": time.time(), **fields}) + "\\n")

from reconciler.engine import wakeups, watch
from reconciler.scheduler.slurm import adapter

put = wakeups.WakeQueue.put
def traced_put(self, wake):
    if wake is watch.Wake.REFS:
        mark("wake")
    put(self, wake)
wakeups.WakeQueue.put = traced_put

commit_pass = watch.WatchLoop._commit_pass
def traced_pass(self, state):
    mark("pass-start")
    try:
        return commit_pass(self, state)
    finally:
        mark("pass-end")
watch.WatchLoop._commit_pass = traced_pass

init = adapter.SlurmScheduler.__init__
def traced_init(self, *args, **kwargs):
    init(self, *args, **kwargs)
    inner = self._runner
    def runner(argv, stdin=None, env=None):
        start = time.time()
        try:
            return inner(argv, stdin) if env is None else inner(argv, stdin, env)
        finally:
            mark("command", name=argv[0], start=start)
    self._runner = runner
adapter.SlurmScheduler.__init__ = traced_init

sys.argv[0] = "recon"
from reconciler.cli import main
main()
"""

GIT_ENV = {
    "GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "bench@example.invalid",
    "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "bench@example.invalid",
}  # fmt: skip
TIMEOUT = 60.0
SPLIT = ("total", "wake", "react", "pass", "sbatch", "squeue")


@dataclass
class Commit:
    """One commit's figures, in seconds from `git commit` returning."""

    run: str
    returned: float
    listed: float = 0.0
    marks: list[dict[str, Any]] = field(default_factory=list)

    def split(self) -> dict[str, float]:
        wakes = [m["t"] for m in self.marks if m["what"] == "wake"]
        starts = [m["t"] for m in self.marks if m["what"] == "pass-start"]
        sbatch = next(m for m in self.marks if m["what"] == "command" and m["name"] == "sbatch")
        return {
            "total": self.listed - self.returned,
            "wake": wakes[0] - self.returned,
            "react": starts[0] - wakes[0],
            "pass": sbatch["start"] - starts[0],
            "sbatch": sbatch["t"] - sbatch["start"],
            "squeue": self.listed - sbatch["t"],
        }

    def counted(self, what: str) -> int:
        return sum(1 for m in self.marks if m["what"] == what)

    def before_sbatch(self) -> list[tuple[str, float]]:
        """The Slurm commands the pass ran before sbatch, and how long each took."""
        said = []
        for m in self.marks:
            if m["what"] == "command":
                if m["name"] == "sbatch":
                    break
                said.append((m["name"], m["t"] - m["start"]))
        return said


def git(root: Path, *args: str) -> None:
    subprocess.run(
        ["git", *args], cwd=root, env={**os.environ, **GIT_ENV}, check=True, capture_output=True
    )


def listed(project: str) -> dict[str, str]:
    """The project's jobs squeue lists: run name -> job id."""
    out = subprocess.run(
        ["squeue", "-h", "-o", "%i|%k"], capture_output=True, text=True, check=False
    ).stdout
    found = {}
    for line in out.splitlines():
        job_id, _, tag = line.partition("|")
        parts = tag.split(":")
        if len(parts) == 6 and parts[0] == "recon2" and parts[1] == project:
            found[parts[4]] = job_id
    return found


def read_trace(path: Path, after: float) -> list[dict[str, Any]]:
    marks = [json.loads(line) for line in path.read_text().splitlines() if line]
    return [m for m in marks if m.get("start", m["t"]) >= after]


def wait_for(what: str, path: Path, after: float) -> None:
    deadline = time.monotonic() + TIMEOUT
    while not any(m["what"] == what for m in read_trace(path, after)):
        if time.monotonic() > deadline:
            raise RuntimeError(f"no {what} in the watch's trace after {TIMEOUT:g} s")
        time.sleep(0.05)


def measure(root: Path, project: str, trace: Path, commits: int, gap: float) -> list[Commit]:
    done = []
    for i in range(commits):
        run = f"r{i:02}"
        (root / "specs" / f"{run}.yaml").write_text(
            f"kind: Run\nname: {run}\ncommand: 'sleep 60'\n"
            "resources:\n  cpus: 1\n  memory: 100MiB\noutputs:\n  out: out.txt\n"
        )
        git(root, "add", "-A")
        began = time.time()
        git(root, "commit", "-q", "-m", run)
        commit = Commit(run, time.time())
        deadline = time.monotonic() + TIMEOUT
        while run not in listed(project):
            if time.monotonic() > deadline:
                raise RuntimeError(f"{run} not listed by squeue after {TIMEOUT:g} s")
            time.sleep(0.01)
        commit.listed = time.time()
        wait_for("pass-end", trace, began)
        time.sleep(gap)  # the pass's tail (journal, log) and any late wake-up land here
        commit.marks = read_trace(trace, began)
        done.append(commit)
        figures = "  ".join(f"{k} {v:.3f}" for k, v in commit.split().items())
        print(f"{run}: {figures}  wakes {commit.counted('wake')}"
              f"  passes {commit.counted('pass-start')}", flush=True)  # fmt: skip
    return done


def report(done: list[Commit]) -> None:
    splits = [c.split() for c in done]
    print(f"\nmedian over {len(done)} commits (s):")
    for key in SPLIT:
        values = [s[key] for s in splits]
        print(f"  {key:7} {statistics.median(values):.3f}  (min {min(values):.3f}, "
              f"max {max(values):.3f})")  # fmt: skip
    wakes = [c.counted("wake") for c in done]
    passes = [c.counted("pass-start") for c in done]
    print(f"wake-ups per commit: {wakes}; passes per commit: {passes}")
    commands: dict[str, list[float]] = {}
    for c in done:
        for name, took in c.before_sbatch():
            commands.setdefault(name, []).append(took)
    for name, times in commands.items():
        print(f"  before sbatch: {name} x{len(times) / len(done):g} per pass, "
              f"median {statistics.median(times):.3f} s")  # fmt: skip


def cancel_all(project: str) -> None:
    for _ in range(3):  # a job submitted while the watch was stopping is cancelled too
        jobs = listed(project)
        if jobs:
            subprocess.run(["scancel", *jobs.values()], check=False)
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--commits", type=int, default=10)
    parser.add_argument("--gap", type=float, default=1.0, help="seconds between passes")
    parser.add_argument("--keep-trace", type=Path, help="copy the watch's trace here")
    parser.add_argument("--code", type=Path, default=HERE.parent, help="the checkout to run")
    args = parser.parse_args()
    project = f"lat{uuid.uuid4().hex[:10]}"
    with tempfile.TemporaryDirectory(prefix="recon-latency-") as folder:
        root = Path(folder) / "repo"
        (root / "specs").mkdir(parents=True)
        (root / "recon.yaml").write_text(
            f"project: {project}\nscheduler: slurm\ndefaults:\n  partition: cpu\n  time: 10\n"
        )
        git(root, "init", "-q", "-b", "main")
        git(root, "add", "-A")
        git(root, "commit", "-q", "-m", "project")
        trace = Path(folder) / "trace.jsonl"
        trace.touch()
        environment = {**os.environ, "PYTHONPATH": str(args.code.resolve())}
        watch = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(trace), "watch", ".", "--branch", "main",
             "--interval", "1h", "--log-format", "json"],
            cwd=root, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            wait_for("command", trace, 0)  # the first pass has looked at the cluster
            time.sleep(2)  # and is over
            print(f"project {project}: {args.commits} commits, one new run each")
            done = measure(root, project, trace, args.commits, args.gap)
            report(done)
            if args.keep_trace:
                args.keep_trace.write_text(trace.read_text())
        finally:
            watch.send_signal(signal.SIGTERM)
            try:
                watch.wait(timeout=30)
            except subprocess.TimeoutExpired:
                watch.kill()
            cancel_all(project)
    return 0


if __name__ == "__main__":
    sys.exit(main())
