"""What a `recon watch` pass costs at 100,000 runs: a full pass, a timer pass that finds
nothing changed, and the pass after a commit that changes one run.

    python bench/watch.py [--sizes 10000,50000,100000] [--sweep 10000] [--repeat 3]
                          [--versus DIR] [--keep DIR]

Each repo is bench/plan.py's (prepare, a sweep of --sweep members, plain runs) in the
state a watch spends its life in: every run succeeded long ago, its output on disk and
its end settled in the journal, so the scheduler has nothing of the project's to report
in the window (engine/observe/observation.observation_window starts at the oldest unsettled job).
The scheduler is a scripted one answering at once (no job in the window, no sinfo):
every CPU-second measured is recon's own, beyond the scheduler's calls.

In a fresh process per checkout, as `recon watch` runs its passes (the watch's own pass
function where the checkout has engine/steady.py, else reconcile_once as its watch calls
it), with the clock moving 30 s per pass:
- first: the first pass (a full one: load, journal, observe, plan);
- timer: a timer pass with nothing changed (the median of --repeat);
- commit: the pass after a commit that changes one run's command (planned, and the
  plan declined: what is timed is the re-plan, not the sbatch), the median of --repeat
  such commits, each changed back (a full pass) before the next;
- jobs: then, a timer pass when one run's job runs and its rows change at every pass
  (its time left, as squeue shows it), the median of --repeat;
in CPU seconds, and the process's peak RSS (before the jobs part, which edits the
journal), and how far back the last pass asked the scheduler (every job settled: the
window's margin alone, however many runs; with the job running, from its record); then
growth per doubling of runs. Targets
(issue 30): a nothing-changed pass at most 0.5 CPU-s at 100,000 runs, a one-run commit
re-planned within 1 s. --versus DIR measures another checkout in turn (say, /work/main),
on a copy of each repo of its own. A benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from plan import HERE, growth, make_repo, readable_by, seed_completed

CHILD = """\
import json, statistics, sys, time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from reconciler.engine.reconcile import Request, reconcile_once
from reconciler.errors import ObservationError
from reconciler.scheduler.base import Observation
from reconciler.scheduler.testing import ScriptedScheduler

root, repeat = Path(sys.argv[1]), int(sys.argv[2])
now = [datetime.now(UTC)]
clock = lambda: now[0]
def no_sinfo():  # a new error each time: one kept and raised again keeps its frames
    raise ObservationError("no sinfo here")

jobs_seen = [lambda: ()]  # what the scheduler lists: nothing, until one job runs
scheduler = ScriptedScheduler(
    observe=lambda since: Observation(taken_at=now[0], jobs=jobs_seen[0](), complete=True),
    partitions=no_sinfo,
    max_array_size=1001,
)

def full(request):  # declining what a plan would carry out: the commit's re-plan is timed
    return reconcile_once(
        request, scheduler=scheduler, lock_timeout=0, clock=clock, approve=lambda plan: False
    )

def tip():
    import subprocess
    out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True)
    return out.stdout.strip()

try:
    from reconciler.engine.steady import SteadyPasses
    watch = SteadyPasses(request=lambda commit: Request(root, commit), full=full, clock=clock,
                         scheduler=scheduler)
    watch.approve = lambda plan: False  # a commit's pass planned in part declines alike
except ImportError:  # a recon before engine/steady.py: every pass a full one
    watch = lambda commit: full(Request(root, commit))

def timed(commit):
    now[0] += timedelta(seconds=30)
    start = time.process_time()
    outcome = watch(commit)
    return time.process_time() - start, outcome

first, outcome = timed(tip())
assert not outcome.plan.has_changes, outcome.plan.summary
del outcome  # as a watch holds no pass of its own between passes
timer = statistics.median(timed(tip())[0] for _ in range(repeat))
import subprocess
env = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "b",
       "GIT_COMMITTER_EMAIL": "b@b", "PATH": "/usr/bin:/bin"}

def commit_text(path, text, message):
    path.unlink()  # the file may be a hard link shared with another checkout's copy
    path.write_text(text)
    subprocess.run(["git", "commit", "-q", "-am", message], cwd=root, env=env, check=True)

commits = []
for turn in range(repeat):  # each: one run changed (timed), then changed back (a full pass)
    changed = root / "specs" / f"sweep-{7 + turn:05d}.yaml"
    text = changed.read_text()
    commit_text(changed, text.replace("--lr ", "--lr 0.5 --x "), "one run")
    seconds, outcome = timed(tip())
    commits.append(seconds)
    assert [a.target for a in outcome.plan.actions if a.changes_cluster] == [f"sweep-{7 + turn}"], (
        outcome.plan.summary)
    del outcome
    commit_text(changed, text, "changed back")
    timed(tip())
    timed(tip())  # kept again, as before the change
commit = statistics.median(commits)
peak = 0  # the watch's own, before the part below
with open("/proc/self/status") as status:
    for line in status:
        if line.startswith("VmHWM:"):
            peak = int(line.split()[1]) / 1024

# One run's job running (its journal record not settled yet), its rows ticking as squeue's
# time left does: every timer pass sees that one job changed.
from reconciler.desired.loader import load_desired, open_source
from reconciler.state.paths import tag_for
from reconciler.scheduler.base import JobRecord, ObservedJob
from reconciler.scheduler.states import SlurmState
import sqlite3
kept = getattr(watch, "kept", None)  # the kept pass's desired state: no second load
desired = kept.outcome.desired if kept is not None and kept.outcome is not None else (
    load_desired(open_source(root)))
del kept
name = "sweep-11"
tag = tag_for(desired, "run", name, desired.runs[name].spec_hash)
started = now[0]
del desired
with sqlite3.connect(root / ".recon" / "journal.sqlite") as db:
    db.execute("UPDATE submissions SET final_health = NULL, job_id = '999911' WHERE name = ?",
               (name,))
def running():
    row = JobRecord(job_id="999911", top_id="999911", tag=tag, state=SlurmState.RUNNING,
                    submit=started, start=started, source="squeue",
                    time_left=timedelta(hours=10) - (now[0] - started))
    return (ObservedJob(job_id="999911", tag=tag, rows=(row,)),)
jobs_seen[0] = running
timed(tip())  # the journal changed: a full pass
timed(tip())  # the job's rows moved on: kept from here
jobs = statistics.median(timed(tip())[0] for _ in range(repeat))
rejobbed = getattr(watch, "rejobbed", 0)
replanned = getattr(watch, "replanned", 0)  # planned in part (engine/incremental.py)
window = (now[0] - scheduler.observed_since[-1]).total_seconds() / 3600  # sacct -S, hours back
print(json.dumps(
    {"first": first, "timer": timer, "commit": commit, "peak": peak, "window": window,
     "replanned": replanned, "jobs": jobs, "rejobbed": rejobbed}
))
"""


def prepared(work: Path, size: int, sweep: int) -> Path:
    """The repo of ``size`` runs, every one succeeded and settled (made once, then kept)."""
    root = work / f"watch-{size}"
    if not root.exists():
        make_repo(root, size, "none", "slurm", sweep=sweep if size > sweep else 0)
        seed_completed(root, "slurm", work / f"watch-{size}.sacct")
    return root


def copy_of(root: Path, label: str) -> Path:
    """A copy for one measurement: files hard-linked, the state directory (the journal,
    which a pass writes) copied; no parse cache, then one made by a first load."""
    copy = root.with_name(f"{root.name}-{label}")
    shutil.rmtree(copy, ignore_errors=True)
    subprocess.run(["cp", "-al", str(root), str(copy)], check=True)
    shutil.rmtree(copy / ".recon")
    shutil.copytree(root / ".recon", copy / ".recon")
    (copy / ".recon" / "spec-cache.marshal").unlink(missing_ok=True)
    # the commit the child makes moves this copy's branch alone: git's files are replaced,
    # never written in place, but the index is rewritten: give the copy its own
    shutil.copy2(root / ".git" / "index", copy / ".git" / "index.new")
    os.replace(copy / ".git" / "index.new", copy / ".git" / "index")
    return copy


def measure(root: Path, code: Path, repeat: int) -> dict[str, float]:
    # the parse cache warm, as a watch running for a while has it
    env = {**os.environ, "PYTHONPATH": str(code)}
    subprocess.run(
        [sys.executable, "-m", "reconciler", "validate", str(root)],
        env=env, cwd=code, capture_output=True, check=True,
    )  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(root), str(repeat)],
        env=env, cwd=code, capture_output=True, text=True, check=False,  # cwd: first on sys.path
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    figures: dict[str, float] = json.loads(done.stdout.splitlines()[-1])
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,50000,100000")
    parser.add_argument("--sweep", type=int, default=10000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--versus", type=Path, help="another checkout to measure in turn")
    parser.add_argument("--keep", type=Path, help="build the repos here and leave them")
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    codes = {"this": HERE, **({"versus": options.versus.resolve()} if options.versus else {})}
    for label, code in codes.items():
        print(f"{label}: {code}")
    work = options.keep or Path(tempfile.mkdtemp(prefix="recon-bench-watch-"))
    figures: dict[str, list[dict[str, float]]] = {label: [] for label in codes}
    try:
        for size in sizes:
            root = prepared(work, size, options.sweep)
            for label, code in codes.items():  # in turn, in the same minutes
                copy = copy_of(root, label)
                readable_by(code, copy / ".recon" / "journal.sqlite")
                seen = measure(copy, code, options.repeat)
                shutil.rmtree(copy)
                figures[label].append(seen)
                print(
                    f"{label:6} {size:6} runs: first pass {seen['first']:6.2f} s cpu, "
                    f"timer pass (nothing changed) {seen['timer']:7.4f} s cpu, "
                    f"one-run commit {seen['commit']:6.2f} s cpu "
                    f"({seen.get('replanned', 0):.0f} planned in part), "
                    f"timer pass with one job running {seen['jobs']:7.4f} s cpu "
                    f"({seen.get('rejobbed', 0):.0f} planned in part), "
                    f"peak {seen['peak']:5.0f} MiB, "
                    f"window {seen['window']:.1f} h back",
                    flush=True,
                )
        for label in codes:
            rows = figures[label]
            print(
                f"{label:6} growth per doubling: "
                + "; ".join(
                    f"{name} {growth(sizes, [row[name] for row in rows])}"
                    for name in ("first", "timer", "commit", "jobs", "peak")
                )
            )
    finally:
        if options.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
