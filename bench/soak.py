"""An hour of chaos under `recon watch` on the dev cluster: is anything ever run twice or lost?

    python bench/soak.py                  # long form: 60 minutes of commits and faults
    python bench/soak.py --short          # a few minutes (3 of chaos)
    python bench/soak.py --minutes 20 --seed 7 --fault-every 30

One `recon watch` follows a project of its own (a DAG of plain runs and a sweep submitted
as a job array) while three things go on at once until the time is up:

- a driver commits a random change every few seconds: a run's command changed, a run added
  or removed, a sweep value added or removed, a whitespace-only edit;
- a fault injector, every `--fault-every` seconds, does one of: slurmctld SIGKILLed and
  restarted, slurmdbd stopped and started, a node set DOWN and resumed, a live job of the
  project cancelled by hand, the watch itself SIGKILLed and restarted, an `apply` run
  beside the watch (as cron would);
- a checker samples squeue every few seconds: live jobs per (run or sweep member, spec
  hash); more than one at once is a duplicate.

Then the faults and commits stop, the cluster is restored, and the soak waits until the
watch has converged (`recon plan --detailed-exitcode` says 0 and no job of the project is
live). It prints the faults, commits and passes, the worst moment (most live jobs for one
key), duplicates (a second live job for one key, from the samples and from sacct's submit
and end times, which see jobs too short for a sample), lost runs (a run or member of the
final commit with no job of its final spec, that recon does not wait for) and the time to
converge after the last fault. Exits 1 on any duplicate, lost run, traceback, or no
convergence.

DESTRUCTIVE: it kills and stops the cluster's daemons and fails its nodes, which disturbs
every other Slurm user of the machine. It restores the cluster (`recon dev-cluster up`,
nodes resumed) when it ends, and cancels whatever job of its project is left.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from trials import _GIT_ENV, STATES, _restore, live_jobs  # noqa: E402  (bench/trials.py)

from reconciler.engine.observe.arrays import _read_map as read_map  # noqa: E402
from reconciler.engine.plan.arrays import ArrayMap  # noqa: E402
from reconciler.scheduler.tag import Tag  # noqa: E402

Key = tuple[str, str]  # (run or sweep member, spec hash)
FAULTS = ("ctld", "dbd", "node", "cancel", "watch", "cron")
# Not a fault but a deliberate duplicate, to see the checker catch one: a second job with
# the tag of a live one, submitted by hand (`--faults twin`).
TWIN = "twin"
CPU_NODES = ("cpu1", "cpu2")
# A lab that runs through node failures retries what they kill (a job whose node went
# down as it launched is held by Slurm: a failed attempt, retried).
RETRIES = 3


@dataclass
class Soak:
    """What the soak did and found."""

    faults: Counter[str] = field(default_factory=Counter)
    commits: int = 0
    confirmed: int = 0  # prunes the guard held, confirmed as a person would
    samples: int = 0
    worst: int = 0
    worst_key: str = ""
    sampled_duplicates: set[Key] = field(default_factory=set)
    last_fault: float = 0.0
    notes: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class Project:
    """The soak's project: runs r00..r{n-1} (each reads its parent's output) and a sweep
    `sw` over `seed` reading r00's output, changed at random one commit at a time."""

    def __init__(self, base: Path, runs: int) -> None:
        self.name = f"sk{uuid.uuid4().hex[:8]}"
        self.root = base / self.name
        self.root.mkdir(parents=True)
        self.runs = {f"r{i:02}": 1 for i in range(runs)}  # name -> version
        self.seeds = [0, 1, 2]
        self.sweep_version = 1
        self.next_run = runs
        self.pad = 0
        self._git("init", "-q", "-b", "main")
        # A two-minute limit: a job slurmctld recovers as running after a SIGKILL, with
        # no process behind it, ends by its limit (then is retried) in two minutes.
        (self.root / "recon.yaml").write_text(
            f"project: {self.name}\ndefaults:\n  partition: cpu\n  time: 2\n"
        )
        self.commit("first")

    def _parent(self, name: str) -> str | None:
        index = int(name[1:])
        if index == 0:
            return None
        parent = f"r{(index - 1) // 2:02}"
        return parent if parent in self.runs else None

    def _write(self) -> None:
        specs = self.root / "specs"
        if specs.exists():
            for old in specs.iterdir():
                old.unlink()
        specs.mkdir(exist_ok=True)
        for name, version in self.runs.items():
            parent = self._parent(name)
            inputs = f"inputs:\n  up: {parent}.out\n" if parent else ""
            sleep = 2 + int(name[1:]) % 5
            (specs / f"{name}.yaml").write_text(
                f"kind: Run\nname: {name}\n"
                f"command: 'sleep {sleep}; echo {name} v{version} > {{outputs.out.path}}'\n"
                f"retries: {RETRIES}\nresources:\n  cpus: 1\n  memory: 50MiB\n{inputs}"
                "outputs:\n  out: out.txt\n"
            )
        upstream = "inputs:\n  up: r00.out\n" if "r00" in self.runs else ""
        (specs / "sw.yaml").write_text(
            "kind: Run\nname: sw\n"
            f"matrix:\n  seed: [{', '.join(map(str, self.seeds))}]\n"
            f"command: 'sleep 3; echo sw v{self.sweep_version} {{matrix.seed}}"
            f" > {{outputs.out.path}}'\n"
            f"retries: {RETRIES}\nresources:\n  cpus: 1\n  memory: 50MiB\n{upstream}"
            "outputs:\n  out: out.txt\n"
            + "#" * self.pad
            + "\n"
        )

    def commit(self, message: str) -> None:
        self._write()
        self._git("add", "-A")
        self._git("commit", "-q", "--allow-empty", "-m", message)

    def change(self, rng: random.Random) -> str:
        """One random change, committed; says what it was."""
        choice = rng.choice(("command", "command", "add", "remove", "sweep", "whitespace"))
        if choice == "add" and len(self.runs) < 14:
            name = f"r{self.next_run:02}"
            self.next_run += 1
            self.runs[name] = 1
        elif choice == "remove" and len(self.runs) > 3:
            name = rng.choice([n for n in self.runs if n != "r00"])
            del self.runs[name]
        elif choice == "sweep":
            if len(self.seeds) > 2 and rng.random() < 0.5:
                self.seeds.remove(rng.choice(self.seeds))
            elif rng.random() < 0.5:
                self.seeds.append(max(self.seeds) + 1)
            else:
                self.sweep_version += 1
        elif choice == "whitespace":
            self.pad = (self.pad + 1) % 3
        else:
            choice = "command"
            name = rng.choice(sorted(self.runs))
            self.runs[name] += 1
        self.commit(choice)
        return choice

    def _git(self, *args: str) -> None:
        subprocess.run(
            ["git", *args], cwd=self.root, env={**os.environ, **_GIT_ENV},
            check=True, capture_output=True,
        )  # fmt: skip

    def recon(self, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "reconciler", *args], cwd=self.root,
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip


class Watch:
    """The `recon watch` under test, its JSON log appended to one file across restarts."""

    def __init__(self, project: Project, interval: str) -> None:
        self.project = project
        self.interval = interval
        self.log_path = project.root.parent / f"{project.name}.watch.log"
        self.err_path = project.root.parent / f"{project.name}.watch.err"
        self.process: subprocess.Popen[bytes] | None = None
        self.starts = 0

    def start(self) -> None:
        with self.log_path.open("ab") as out, self.err_path.open("ab") as err:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "reconciler", "watch", ".", "--interval", self.interval,
                 "--log-format", "json"],
                cwd=self.project.root, stdout=out, stderr=err, start_new_session=True,
            )  # fmt: skip
        self.starts += 1

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.kill()

    def events(self) -> Counter[str]:
        found: Counter[str] = Counter()
        for line in self.log_path.read_text().splitlines():
            try:
                found[json.loads(line)["event"]] += 1
            except (ValueError, KeyError):
                found["unreadable"] += 1
        return found

    def tracebacks(self) -> list[str]:
        text = self.err_path.read_text() if self.err_path.exists() else ""
        crashed = [
            line for line in self.log_path.read_text().splitlines() if '"pass-crashed"' in line
        ]
        return crashed + (["stderr: " + text.strip()[-500:]] if "Traceback" in text else [])


def live_keys(project: Project) -> Counter[Key]:
    """Live jobs per key now, from squeue, array tasks one by one through their maps."""
    rows = subprocess.run(
        ["squeue", "-h", "-r", "-o", "%i|%T|%k|%Z"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    found: Counter[Key] = Counter()
    for row in rows:
        parts = row.split("|")
        if len(parts) != 4:
            continue
        job_id, _state, comment, workdir = parts
        tag = Tag.parse(comment)
        if tag is None or tag.project != project.name:
            continue
        found[member_key(tag, job_id, workdir)] += 1
    return found


def member_key(tag: Tag, job_id: str, workdir: str) -> Key:
    """A plain job's (run, hash); an array task's (member, hash) from the array's map."""
    if "_" not in job_id:
        return (tag.name, tag.spec_hash)
    index = job_id.split("_", 1)[1]
    members = _map(workdir, tag.spec_hash)
    if members is None or not index.isdigit() or int(index) not in members.members:
        return (f"{tag.name}[task {index} of array {tag.spec_hash}]", tag.spec_hash)
    return members.members[int(index)]


_MAPS: dict[tuple[str, str], ArrayMap] = {}


def _map(workdir: str, digest: str) -> ArrayMap | None:
    """The array's map, read where apply writes it (``engine/observe/arrays``), once found
    (one not written yet is looked for again)."""
    if (workdir, digest) not in _MAPS and (found := read_map(workdir, digest)) is not None:
        _MAPS[workdir, digest] = found
    return _MAPS.get((workdir, digest))


def accounted(project: Project) -> dict[str, tuple[Key, float, float]]:
    """Every job of the project sacct knows: job id -> (key, submitted, ended), in epoch
    seconds (a job not ended yet: now). Pending array ranges expand to their tasks."""
    text = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", "now-3hours", "-E", "now", "-s", STATES,
         "-o", "JobID,Comment,WorkDir,Submit,End"],
        capture_output=True, text=True, check=False,
    ).stdout  # fmt: skip
    now = time.time()
    jobs: dict[str, tuple[Key, float, float]] = {}
    for row in text.splitlines():
        parts = row.split("|")
        if len(parts) != 5:
            continue
        job_id, comment, workdir, submitted, ended = parts
        tag = Tag.parse(comment)
        if tag is None or tag.project != project.name:
            continue
        start = _epoch(submitted) or now
        end = _epoch(ended) or now
        for one in _tasks(job_id):
            jobs[one] = (member_key(tag, one, workdir), start, end)
    return jobs


def _tasks(job_id: str) -> list[str]:
    """`12_[3-5,7]` -> 12_3, 12_4, 12_5, 12_7; anything else as it is."""
    head, _, rest = job_id.partition("_[")
    if not rest:
        return [job_id]
    tasks = []
    for part in rest.rstrip("]").split("%")[0].split(","):
        low, _, high = part.partition("-")
        tasks += [f"{head}_{i}" for i in range(int(low), int(high or low) + 1)]
    return tasks


def _epoch(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None  # Unknown, None


def overlapping(jobs: dict[str, tuple[Key, float, float]]) -> list[str]:
    """Keys with two jobs alive at once (one submitted before the other ended)."""
    by_key: dict[Key, list[tuple[float, float, str]]] = {}
    for job_id, (key, start, end) in jobs.items():
        by_key.setdefault(key, []).append((start, end, job_id))
    found = []
    for key, spans in by_key.items():
        spans.sort()
        for (_, end, first), (start, _, second) in itertools.pairwise(spans):
            if start < end - 1:  # a second's slack: sacct's times are whole seconds
                found.append(f"{key[0]} {key[1]}: jobs {first} and {second} alive at once")
    return found


def checker(project: Project, soak: Soak, stop: threading.Event, every: float) -> None:
    while not stop.wait(every):
        keys = live_keys(project)
        with soak.lock:
            soak.samples += 1
            for key, count in keys.items():
                if count > soak.worst:
                    soak.worst, soak.worst_key = count, f"{key[0]} {key[1]}"
                if count > 1:
                    soak.sampled_duplicates.add(key)


def driver(project: Project, watch: Watch, soak: Soak, stop: threading.Event, every: float,
           rng: random.Random) -> None:  # fmt: skip
    """The lab: a commit every few seconds. A run removed while its job is the project's
    only live one is held by the prune guard (it would empty the project) until a person
    confirms it: the driver confirms, as that person would, once the watch says so."""
    told = 0
    while not stop.wait(rng.uniform(0.5 * every, 1.5 * every)):
        project.change(rng)
        with soak.lock:
            soak.commits += 1
        refused = watch.events()["prune-refused"]
        if refused > told:
            project.recon("apply", ".", "--auto-approve", "--allow-prune-all", "--quiet",
                          "--lock-timeout", "120")  # fmt: skip
            told = refused
            with soak.lock:
                soak.confirmed += 1


def inject(kind: str, project: Project, watch: Watch, rng: random.Random) -> None:
    """One fault, and its end: every daemon and node is back when this returns."""
    from reconciler.devcluster import daemons, processes
    from reconciler.devcluster.cli import this_cluster

    if kind == "ctld":
        for pid in processes.pids_of(daemons.slurmctld(this_cluster())):
            os.kill(pid, signal.SIGKILL)
        time.sleep(rng.uniform(1, 8))
        _restore()
    elif kind == "dbd":
        processes.stop(daemons.slurmdbd(this_cluster()))
        time.sleep(rng.uniform(5, 30))
        _restore()
    elif kind == "node":
        node = rng.choice(CPU_NODES)
        _scontrol("update", f"nodename={node}", "state=down", "reason=soak")
        time.sleep(rng.uniform(5, 30))
        _scontrol("update", f"nodename={node}", "state=resume")
    elif kind == "cancel":
        live = subprocess.run(
            ["squeue", "-h", "-o", "%i|%k"], capture_output=True, text=True, check=False
        ).stdout.splitlines()
        ours = [
            row.split("|")[0] for row in live
            if (tag := Tag.parse(row.partition("|")[2])) and tag.project == project.name
        ]  # fmt: skip
        if ours:
            subprocess.run(["scancel", rng.choice(ours)], capture_output=True, check=False)
    elif kind == "watch":
        watch.kill()
        time.sleep(rng.uniform(0, 5))
        watch.start()
    elif kind == TWIN:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not _twin(project):
            time.sleep(1)
    elif kind == "cron":
        project.recon("apply", ".", "--auto-approve", "--quiet", "--lock-timeout", "120")


def _twin(project: Project) -> bool:
    """sbatch a second job with the tag of a live job of the project, if there is one."""
    live = subprocess.run(
        ["squeue", "-h", "-o", "%i|%k"], capture_output=True, text=True, check=False
    ).stdout.splitlines()
    for row in live:
        job_id, _, comment = row.partition("|")
        tag = Tag.parse(comment)
        if tag is not None and tag.project == project.name and "_" not in job_id:
            made = subprocess.run(
                ["sbatch", "-p", "cpu", "-c", "1", "--mem", "50M", "-t", "5",
                 f"--comment={comment}", "-J", tag.job_name, f"--chdir={project.root}",
                 "-o", "/dev/null", "--wrap", "sleep 30"],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            return made.returncode == 0
    return False


def _scontrol(*args: str) -> None:
    subprocess.run(["scontrol", *args], capture_output=True, check=False)


def faults(project: Project, watch: Watch, soak: Soak, stop: threading.Event, every: float,
           kinds: tuple[str, ...], rng: random.Random) -> None:  # fmt: skip
    while kinds and not stop.wait(rng.uniform(0.5 * every, 1.5 * every)):
        kind = rng.choice(kinds)
        inject(kind, project, watch, rng)
        with soak.lock:
            soak.faults[kind] += 1
            soak.last_fault = time.monotonic()


def converge(project: Project, timeout: float) -> float | None:
    """Seconds until the plan is empty and no job of the project is live; None: never."""
    started = time.monotonic()
    while time.monotonic() - started < timeout:
        if (
            not live_keys(project)
            and project.recon("plan", ".", "--detailed-exitcode").returncode == 0
        ):
            return time.monotonic() - started
        time.sleep(3)
    return None


def lost_runs(project: Project) -> tuple[list[str], list[str]]:
    """Runs and members of the final commit with no job of their final spec: those recon
    does not wait for (lost), and those it waits for (waiting)."""
    from reconciler.desired.loader import load_desired, open_source

    final = {
        name: run.spec_hash for name, run in load_desired(open_source(project.root)).runs.items()
    }
    plan = project.recon("plan", ".", "--format", "json")
    actions: list[dict[str, Any]] = json.loads(plan.stdout)["actions"] if plan.stdout else []
    waiting = {a["target"] for a in actions if a.get("unseen_job") or a.get("outcome") == "waiting"}
    with_job = {key for key, _, _ in accounted(project).values()}
    lost: list[str] = []
    wait: list[str] = []
    for name, spec in sorted(final.items()):
        if (name, spec) not in with_job:
            (wait if name in waiting else lost).append(f"{name} {spec}")
    return lost, wait


def cancel_all(project: Project) -> int:
    """Cancel every job of the project still live (squeue's: sacct shows no comment for
    a job not ended yet), and again until none is; how many there were."""
    live = live_ids(project)
    deadline = time.monotonic() + 120
    while (left := live_ids(project)) and time.monotonic() < deadline:
        for job_id in sorted(left):
            subprocess.run(["scancel", job_id], capture_output=True, check=False)
        time.sleep(2)
    return len(live)


def live_ids(project: Project) -> set[str]:
    """The ids of the project's live jobs (an array's once), by squeue's word."""
    return {row.split("|")[0].split("_")[0] for row in live_jobs({project.name})}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--short", action="store_true", help="3 minutes of chaos")
    parser.add_argument("--minutes", type=float, help="minutes of chaos (default 60)")
    parser.add_argument("--commit-every", type=float, default=6.0, help="seconds, on average")
    parser.add_argument("--fault-every", type=float, default=25.0, help="seconds, on average")
    parser.add_argument("--sample-every", type=float, default=3.0, help="squeue, seconds")
    parser.add_argument("--interval", default="10s", help="the watch's --interval")
    parser.add_argument("--runs", type=int, default=7, help="runs at the start, besides the sweep")
    parser.add_argument("--converge-within", type=float, default=900, help="seconds")
    parser.add_argument(
        "--faults", default=",".join(FAULTS), help=f"comma-separated, of {','.join(FAULTS)}"
    )
    parser.add_argument("--seed", type=int, default=None)
    args = parser.parse_args()
    kinds = tuple(kind for kind in (*FAULTS, TWIN) if kind in args.faults.split(","))
    minutes = args.minutes if args.minutes is not None else (3 if args.short else 60)
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    soak = Soak()
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="recon-soak-") as scratch:
        project = Project(Path(scratch), args.runs)
        watch = Watch(project, args.interval)
        stop = threading.Event()
        threads = [
            threading.Thread(target=checker, args=(project, soak, stop, args.sample_every)),
            threading.Thread(target=driver, args=(project, watch, soak, stop, args.commit_every,
                                                  random.Random(rng.random()))),
            threading.Thread(target=faults, args=(project, watch, soak, stop, args.fault_every,
                                                  kinds, random.Random(rng.random()))),
        ]  # fmt: skip
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # stopped: clean up below
        watch.start()
        try:
            for thread in threads:
                thread.start()
            stop.wait(minutes * 60)
        finally:
            stop.set()
            for thread in threads:
                thread.join()
            _restore()
            for node in CPU_NODES:
                _scontrol("update", f"nodename={node}", "state=resume")
            if sys.exc_info()[0] is not None:  # stopped or broken: leave nothing behind
                watch.kill()
                cancel_all(project)
        chaos_ended = time.monotonic()
        since_fault = chaos_ended - (soak.last_fault or chaos_ended)
        checker_stop = threading.Event()
        sampling = threading.Thread(
            target=checker, args=(project, soak, checker_stop, args.sample_every)
        )
        sampling.start()
        try:
            took = converge(project, args.converge_within)
            lost, waiting = lost_runs(project) if took is not None else ([], [])
        finally:
            checker_stop.set()
            sampling.join()
            watch.stop()
        jobs = accounted(project)
        overlaps = overlapping(jobs)
        events = watch.events()
        tracebacks = watch.tracebacks()
        left = cancel_all(project)
        _report(
            seed, minutes, soak, events, watch, jobs, overlaps, lost, waiting, tracebacks,
            took, since_fault, time.monotonic() - started, left, sys.stdout,
        )  # fmt: skip
        duplicates = len(soak.sampled_duplicates) + len(overlaps)
        return 1 if duplicates or lost or tracebacks or took is None else 0


def _report(seed: int, minutes: float, soak: Soak, events: Counter[str], watch: Watch,
            jobs: dict[str, tuple[Key, float, float]], overlaps: list[str], lost: list[str],
            waiting: list[str], tracebacks: list[str], took: float | None, since_fault: float,
            total: float, left: int, out: IO[str]) -> None:  # fmt: skip
    fault_list = ", ".join(f"{kind} {soak.faults[kind]}" for kind in (*FAULTS, TWIN)
                           if kind in soak.faults or kind != TWIN)  # fmt: skip
    rows = [
        ("seed", str(seed)),
        ("chaos", f"{minutes:g} min (whole soak {total / 60:.1f} min)"),
        ("faults injected", f"{sum(soak.faults.values())} ({fault_list})"),
        ("commits", f"{soak.commits} ({soak.confirmed} held prunes confirmed by hand)"),
        ("watch passes", f"{events['pass']} ({events['retry']} retried, "
                         f"{events['pass-crashed']} crashed; watch started {watch.starts}x)"),
        ("jobs submitted", str(len(jobs))),
        ("squeue samples", str(soak.samples)),
        ("worst moment", f"{soak.worst} live job(s) for one key ({soak.worst_key or '-'})"),
        ("duplicates", f"{len(soak.sampled_duplicates)} sampled, {len(overlaps)} from sacct"),
        ("lost runs", f"{len(lost)} ({len(waiting)} still waiting for a lost job)"),
        ("tracebacks", str(len(tracebacks))),
        ("converged", "never" if took is None else
         f"{took:.0f} s after the chaos ended, {since_fault + took:.0f} s after the last fault"),
        ("left live at the end", f"{left} job(s), cancelled"),
    ]  # fmt: skip
    width = max(len(name) for name, _ in rows)
    for name, value in rows:
        out.write(f"{name:<{width}}  {value}\n")
    for line in [*sorted(soak.sampled_duplicates), *overlaps, *lost, *tracebacks, *soak.notes]:
        out.write(f"    {line}\n")
    duplicates = len(soak.sampled_duplicates) + len(overlaps)
    failed = duplicates or lost or tracebacks or took is None
    out.write("FAILED\n" if failed else "OK: no duplicate, no lost run, no traceback; converged\n")


if __name__ == "__main__":
    sys.exit(main())
