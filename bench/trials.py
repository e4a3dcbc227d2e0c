"""Fault trials on the dev cluster: does recon ever run a run twice, lose one, or crash?

    python bench/trials.py                 # long form: 100 kills, 5 x 10 concurrent applies,
                                           # and one trial of each destructive kind
    python bench/trials.py --short         # CI: a few trials of each kind
    python bench/trials.py --kinds kill,concurrent --kills 200

Kinds (each on projects of its own, cancelled when done):
- kill        SIGKILL `recon apply` at a random moment of a 20-run DAG, again and again,
              now and then after a commit that changes every run (so kills land in
              replaces too), then one clean apply;
- concurrent  K applies of one folder at once;
- dbd         slurmdbd stopped while a DAG runs and applies go on, restarted mid-pass;
- ctld        slurmctld SIGKILLed mid-apply and restarted;
- node        the node under a running job set DOWN, then resumed.
dbd, ctld and node are DESTRUCTIVE: they disturb every other Slurm user of the machine.
They run only when named in --kinds or with --destructive, and restore the cluster
(`recon dev-cluster up`, the node resumed) right after.

Counted from the cluster itself (sacct with the explicit state list, squeue for live
comments), per (run, spec hash): a duplicate is a second job of one, a lost run is a run of
the final spec with no job once recon has converged; tracebacks are counted from every
recon command's output. Runs still waiting for a job slurmctld lost (recon waits 10 minutes
for a job it submitted and cannot see, unless its id comes back under another tag), and
their downstream runs waiting for them, are reported as "waiting", not lost. Exits 1 on
any duplicate, lost run or traceback, or when a job of any trial project is still live
once every trial has cleaned up (the check the test suite makes for its own projects).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from reconciler.scheduler.tag import Tag

RUNS = 20
STATES = "BF,CA,CD,DL,F,NF,OOM,PD,PR,R,RQ,RS,RV,S,TO"
_GIT_ENV = {
    "GIT_AUTHOR_NAME": "trials", "GIT_AUTHOR_EMAIL": "trials@example.invalid",
    "GIT_COMMITTER_NAME": "trials", "GIT_COMMITTER_EMAIL": "trials@example.invalid",
}  # fmt: skip


@dataclass
class Tally:
    """What the trials of one kind found."""

    kind: str
    trials: int = 0
    faults: int = 0  # kills that landed, outages made, nodes failed
    applies: int = 0
    runs: int = 0
    duplicates: int = 0
    lost: int = 0
    waiting: int = 0
    tracebacks: int = 0
    left: int = 0  # jobs still live once every trial has cleaned up
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not (self.duplicates or self.lost or self.tracebacks or self.left)

    def line(self) -> str:
        return (
            f"{self.kind:<11} trials {self.trials:>4}  faults {self.faults:>4}  "
            f"applies {self.applies:>4}  runs {self.runs:>5}  duplicates {self.duplicates}  "
            f"lost {self.lost}  waiting {self.waiting}  tracebacks {self.tracebacks}  "
            f"left {self.left}"
        )


# Every trial project's name, for the last check: no job of any of them is left live.
MADE: list[str] = []


class Project:
    """A temporary project of its own, driven through the `recon` command."""

    def __init__(self, base: Path, tally: Tally, *, held: bool, sleep: int = 2) -> None:
        self.name = f"tr{uuid.uuid4().hex[:8]}"
        MADE.append(self.name)
        self.root = base / self.name
        self.tally = tally
        self.held = held
        self.sleep = sleep
        self.version = 0
        self.root.mkdir(parents=True)
        self._git("init", "-q", "-b", "main")
        (self.root / "recon.yaml").write_text(
            f"project: {self.name}\ndefaults:\n  partition: cpu\n  time: 10\n"
        )
        self.commit_dag()

    def commit_dag(self) -> None:
        """The 20-run DAG (a binary tree: r{i} reads r{(i-1)//2}'s output) at a new version:
        every run's spec changes, so every queued job is replaced."""
        self.version += 1
        specs = self.root / "specs"
        specs.mkdir(exist_ok=True)
        extra = "  sbatch_extra: ['--hold']\n" if self.held else ""
        for i in range(RUNS):
            inputs = f"inputs:\n  up: r{(i - 1) // 2:02}.out\n" if i else ""
            (specs / f"r{i:02}.yaml").write_text(
                f"kind: Run\nname: r{i:02}\n"
                f"command: 'sleep {self.sleep}; echo v{self.version} > {{outputs.out.path}}'\n"
                f"resources:\n  cpus: 1\n  memory: 50MiB\n{extra}{inputs}"
                "outputs:\n  out: out.txt\n"
            )
        self._git("add", "-A")
        self._git("commit", "-q", "-m", f"v{self.version}")

    def _git(self, *args: str) -> None:
        subprocess.run(
            ["git", *args], cwd=self.root, env={**os.environ, **_GIT_ENV},
            check=True, capture_output=True,
        )  # fmt: skip

    def start(self, *args: str) -> subprocess.Popen[str]:
        self.tally.applies += 1
        return subprocess.Popen(
            [sys.executable, "-m", "reconciler", "apply", ".", "--auto-approve", *args],
            cwd=self.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip

    def finish(self, process: subprocess.Popen[str], timeout: float = 300) -> int:
        out, err = process.communicate(timeout=timeout)
        if "Traceback" in out + err:
            self.tally.tracebacks += 1
            self.tally.notes.append(f"{self.name}: {(out + err).strip().splitlines()[-1]}")
        return process.returncode

    def apply(self, *args: str) -> int:
        return self.finish(self.start(*args))

    def converged(self) -> bool:
        """`recon plan --detailed-exitcode` says 0: nothing to do, no job unaccounted for."""
        plan = subprocess.run(
            [sys.executable, "-m", "reconciler", "plan", ".", "--detailed-exitcode"],
            cwd=self.root, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if "Traceback" in plan.stdout + plan.stderr:
            self.tally.tracebacks += 1
        return plan.returncode == 0

    def jobs(self) -> dict[tuple[str, str], set[str]]:
        """Job ids per (run, spec hash), as the cluster reports them."""
        finished = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-S", "now-6hours", "-E", "now", "-s", STATES,
             "-o", "JobID,Comment"],
            capture_output=True, text=True, check=False,
        ).stdout  # fmt: skip
        live = subprocess.run(
            ["squeue", "-h", "-o", "%i|%k"], capture_output=True, text=True, check=False
        ).stdout
        found: dict[tuple[str, str], set[str]] = {}
        for line in (finished + live).splitlines():
            job_id, _, comment = line.partition("|")
            tag = Tag.parse(comment)
            if tag is not None and tag.project == self.name:
                found.setdefault((tag.name, tag.spec_hash), set()).add(job_id.split("+")[0])
        return found

    def count(self) -> None:
        """Duplicates over every (run, spec); lost and waiting runs of the final spec.

        A run waits when recon's plan waits for it: for a job the scheduler does not show
        yet (slurmctld lost it; recon gives it `UNSEEN_GRACE` before submitting again) or
        for such an upstream. A run with no job that recon does not wait for is lost.
        Accounting may lag after slurmdbd comes back (the jobs that ended while it was
        down reach sacct later, and squeue has forgotten them), so a run missing from
        the cluster's answer is looked for again for a minute before it counts as lost.
        """
        self.tally.runs += RUNS
        actions = self._plan()
        latest = {a["spec_hash"] for a in actions if a["spec_hash"]}
        waiting = {
            a["target"] for a in actions if a.get("unseen_job") or a.get("outcome") == "waiting"
        }
        deadline = time.monotonic() + 60
        while True:
            found = self.jobs()
            with_job = {run for (run, spec) in found if spec in latest}
            missing = [f"r{i:02}" for i in range(RUNS) if f"r{i:02}" not in with_job]
            lost = [run for run in missing if run not in waiting]
            if not lost or time.monotonic() > deadline:
                break
            time.sleep(5)
        for (run, spec), ids in found.items():
            if len(ids) > 1:
                self.tally.duplicates += len(ids) - 1
                self.tally.notes.append(f"{self.name}: {run} {spec} has jobs {sorted(ids)}")
        self.tally.waiting += len([run for run in missing if run in waiting])
        self.tally.lost += len(lost)
        if lost:
            said = {a["target"]: f"{a['kind']}: {a['reason']}" for a in actions}
            self.tally.notes.append(f"{self.name}: no job for {lost}")
            self.tally.notes += [f"    {run}: the plan says {said.get(run)}" for run in lost]

    def _plan(self) -> list[dict[str, Any]]:
        """The actions `recon plan --format json` gives now."""
        plan = subprocess.run(
            [sys.executable, "-m", "reconciler", "plan", ".", "--format", "json"],
            cwd=self.root, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
        if plan.returncode != 0:
            raise RuntimeError(f"recon plan failed in {self.root}: {plan.stderr.strip()}")
        actions: list[dict[str, Any]] = json.loads(plan.stdout)["actions"]
        return actions

    def cancel_all(self, within: float = 180, quiet: float = 0.0) -> None:
        """Cancel every job of the project, and again until none is live: a job on a node
        that went down is requeued only once the node answers again (it then waits on
        BeginTime), so a cancel sent while it was still completing does not hold."""
        for ids in self.jobs().values():
            for job_id in ids:
                subprocess.run(["scancel", job_id], capture_output=True, check=False)
        cancel_live({self.name}, within, quiet)


def cancel_live(projects: set[str], within: float = 180, quiet: float = 0.0) -> None:
    """Cancel the live jobs of these projects until none has been live for ``quiet``
    seconds: a job whose node went down can leave squeue for a moment and come back
    requeued (24.11: 11 jobs left so)."""
    deadline = time.monotonic() + within
    quiet_since = time.monotonic()
    while time.monotonic() < deadline:
        live = live_jobs(projects)
        if live:
            quiet_since = time.monotonic()
        elif time.monotonic() - quiet_since >= quiet:
            return
        for row in live:
            subprocess.run(["scancel", row.split("|")[0]], capture_output=True, check=False)
        time.sleep(2)


def live_jobs(projects: set[str], within: float = 120) -> list[str]:
    """Every live job of these projects, as `id|state|reason|submitted|tag` (squeue).

    squeue is asked again until it answers (for at most ``within`` seconds, then an
    error): while a trial's slurmctld restarts, a failed squeue printed nothing, which
    read as "none live", and a trial's clean-up stopped with its jobs still queued (24.11:
    13 jobs of one trial left so)."""
    deadline = time.monotonic() + within
    while True:
        listed = subprocess.run(
            ["squeue", "-h", "-o", "%i|%T|%r|%V|%k"], capture_output=True, text=True, check=False
        )
        if listed.returncode == 0:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f"squeue did not answer for {within:g} s: {listed.stderr.strip()}")
        time.sleep(2)
    rows = listed.stdout.splitlines()
    found = []
    for row in rows:
        tag = Tag.parse(row.rsplit("|", 1)[-1])
        if tag is not None and tag.project in projects:
            found.append(row)
    return found


def leftovers(settle: float = 20) -> Tally:
    """After every trial: no job of any trial project is live (as the test suite checks
    for its own projects). Waits `settle` seconds first, for jobs requeued late."""
    tally = Tally("leftovers")
    time.sleep(settle)
    left = live_jobs(set(MADE))
    tally.trials = len(MADE)
    if left:
        tally.left = len(left)
        tally.notes += [f"left live: {row}" for row in left]
        for row in left:
            subprocess.run(["scancel", row.split("|")[0]], capture_output=True, check=False)
    return tally


def kill_trials(base: Path, kills: int, per_project: int, window: float) -> Tally:
    """SIGKILL apply at random moments; every third kill follows a commit that changes every
    run (the kill may land in a replace); then one clean apply."""
    tally = Tally("kill")
    done = 0
    while done < kills:
        project = Project(base, tally, held=True)
        try:
            for i in range(min(per_project, kills - done)):
                if i % 3 == 2:
                    project.commit_dag()
                process = project.start()
                time.sleep(random.uniform(0.0, window))
                if process.poll() is None:
                    process.send_signal(signal.SIGKILL)
                    tally.faults += 1
                project.finish(process)
                tally.trials += 1
                done += 1
            if project.apply() != 0:
                tally.notes.append(f"{project.name}: the clean apply failed")
            project.count()
        finally:
            project.cancel_all()
    return tally


def concurrent_trials(base: Path, trials: int, at_once: int) -> Tally:
    tally = Tally("concurrent")
    for _ in range(trials):
        project = Project(base, tally, held=True)
        try:
            processes = [project.start("--lock-timeout", "300") for _ in range(at_once)]
            codes = [project.finish(process) for process in processes]
            tally.faults += at_once - 1
            if any(code != 0 for code in codes):
                tally.notes.append(f"{project.name}: exit codes {codes}")
            project.count()
            tally.trials += 1
        finally:
            project.cancel_all()
    return tally


def _until_converged(project: Project, timeout: float) -> None:
    """Apply until plan has nothing left to do, or the time is up."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        project.apply()
        if project.converged():
            return
        time.sleep(2)


def dbd_trials(base: Path, trials: int, restore: Callable[[], None]) -> Tally:
    """slurmdbd stopped while the DAG runs and applies go on; restarted mid-pass."""
    from reconciler.devcluster import daemons, processes
    from reconciler.devcluster.cli import this_cluster

    tally = Tally("dbd")
    dbd = daemons.slurmdbd(this_cluster())
    for _ in range(trials):
        project = Project(base, tally, held=False, sleep=3)
        try:
            project.apply()
            processes.stop(dbd)
            tally.faults += 1
            for _ in range(4):  # passes while accounting is down
                project.apply()
                time.sleep(1)
            running = project.start()
            time.sleep(random.uniform(0.0, 1.5))
            restore()  # slurmdbd back while that pass runs
            project.finish(running)
            _until_converged(project, timeout=300)
            project.count()
            tally.trials += 1
        finally:
            restore()
            project.cancel_all()
    return tally


def ctld_trials(base: Path, trials: int, window: float, restore: Callable[[], None]) -> Tally:
    """slurmctld SIGKILLed mid-apply, then restarted; applies until recon converges."""
    from reconciler.devcluster import daemons, processes
    from reconciler.devcluster.cli import this_cluster

    tally = Tally("ctld")
    ctld = daemons.slurmctld(this_cluster())
    for _ in range(trials):
        project = Project(base, tally, held=True)
        try:
            running = project.start()
            time.sleep(random.uniform(0.2, window))
            for pid in processes.pids_of(ctld):
                os.kill(pid, signal.SIGKILL)
            tally.faults += 1
            project.finish(running)
            restore()
            _until_converged(project, timeout=120)
            project.count()
            tally.trials += 1
        finally:
            restore()
            project.cancel_all()
            # slurmctld saves its state every few seconds: killed, it came back with the
            # jobs an earlier trial had cancelled just before as running, with no process
            # behind them (22.05: 5 such jobs, requeued by the node trial, left queued).
            cancel_live(set(MADE))
    return tally


def node_trials(base: Path, trials: int) -> Tally:
    """The node under a running job goes DOWN (NODE_FAIL, then Slurm requeues the job);
    recon must neither submit the run again beside it nor lose it."""
    tally = Tally("node")
    for _ in range(trials):
        project = Project(base, tally, held=False, sleep=120)
        node = ""
        try:
            project.apply()
            node = _node_of_running_job(project)
            subprocess.run(
                ["scontrol", "update", f"nodename={node}", "state=down", "reason=trial"],
                capture_output=True, check=False,
            )  # fmt: skip
            tally.faults += 1
            for _ in range(3):
                time.sleep(2)
                project.apply()
            project.count()
            tally.trials += 1
        finally:
            if node:
                subprocess.run(
                    ["scontrol", "update", f"nodename={node}", "state=resume"],
                    capture_output=True, check=False,
                )  # fmt: skip
            project.cancel_all(quiet=30)
    return tally


def _node_of_running_job(project: Project) -> str:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        rows = subprocess.run(
            ["squeue", "-h", "-t", "R", "-o", "%N|%k"], capture_output=True, text=True, check=False
        ).stdout.splitlines()
        for row in rows:
            nodes, _, comment = row.partition("|")
            tag = Tag.parse(comment)
            if tag is not None and tag.project == project.name and nodes:
                return nodes.split(",")[0]
        time.sleep(0.5)
    raise RuntimeError(f"no job of {project.name} ran within a minute")


def _restore() -> None:
    """`recon dev-cluster up`: start whatever daemon is missing and wait until jobs run."""
    subprocess.run(
        [sys.executable, "-m", "reconciler", "dev-cluster", "up"], capture_output=True, check=False
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="a few trials of each (CI)")
    parser.add_argument(
        "--kinds", default="", help="comma-separated: kill,concurrent,dbd,ctld,node"
    )
    parser.add_argument("--destructive", action="store_true", help="also dbd, ctld and node")
    parser.add_argument("--kills", type=int, help="kill trials (default 100; 6 short)")
    parser.add_argument("--concurrent", type=int, default=10, help="applies at once")
    parser.add_argument("--trials", type=int, help="trials of the other kinds")
    parser.add_argument("--window", type=float, default=4.0, help="kill within this many s")
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    random.seed(args.seed)
    kinds = set(filter(None, args.kinds.split(","))) or {"kill", "concurrent"}
    if args.destructive:
        kinds |= {"dbd", "ctld", "node"}
    kills = args.kills if args.kills is not None else (6 if args.short else 100)
    trials = args.trials if args.trials is not None else (1 if args.short else 5)
    tallies = []
    with tempfile.TemporaryDirectory(prefix="recon-trials-") as scratch:
        base = Path(scratch)
        if "kill" in kinds:
            tallies.append(kill_trials(base, kills, per_project=5, window=args.window))
        if "concurrent" in kinds:
            tallies.append(concurrent_trials(base, trials, args.concurrent))
        if "dbd" in kinds:
            tallies.append(dbd_trials(base, 1 if args.short else trials, _restore))
        if "ctld" in kinds:
            tallies.append(ctld_trials(base, 1 if args.short else trials, args.window, _restore))
        if "node" in kinds:
            tallies.append(node_trials(base, 1))
        tallies.append(leftovers())
    for tally in tallies:
        print(tally.line())
        for note in tally.notes:
            print(f"    {note}")
    failed = [tally.kind for tally in tallies if not tally.ok]
    print(
        "FAILED: " + ", ".join(failed)
        if failed
        else "OK: no duplicate, no lost run, no traceback, nothing left live"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
