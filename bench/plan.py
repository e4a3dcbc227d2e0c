"""Live `recon plan` (and `recon status`) at sweep scale, and `recon plan --against HEAD~1`.

    python bench/plan.py [--sizes 1000,2000,5000,10000] [--backends local,slurm]
                         [--scenarios none,completed,unsettled,mixed] [--repeat 3]
                         [--scripts] [--sweep MEMBERS] [--validate] [--status]
                         [--versus DIR] [--keep DIR]

At 100,000 runs (issue 30's figures, local backend, nothing submitted; beside main):

    python bench/plan.py --sizes 10000,50000,100000 --backends local --scenarios none \
        --sweep 10000 --validate --status --repeat 1 --versus /work/main

Each figure is the wall time, CPU time (user + system: steadier on a shared machine) and
peak RSS of the whole command in a fresh process, as a user runs it (interpreter
start-up, warm parse cache, observation, plan, report), the median of --repeat runs,
then the growth per doubling of runs between sizes ((t2/t1) ** (1 / log2(n2/n1))). Scenarios:

- none:      N runs (one `prepare`, N-1 sweep points reading its output), nothing submitted;
- completed: every run succeeded: one journal record and one ended job per run, outputs
             on disk; the journal has recorded every end, so the observation window
             starts an hour back and (on the local backend) no ended job is read again;
- unsettled: as completed, but the journal has not recorded the ends yet (the first
             pass after 10,000 jobs ended): every job is observed and judged;
- mixed:     as completed, with every tenth pair of runs coupled (`coupled_with`) and every
             tenth run heterogeneous (two components).

With --scripts, each sweep point's command names a committed script of its own
(`python3 scripts/point-N.py ...`), so every run has a code file to compare; the journal
records of the completed scenarios then carry the code versions the jobs ran with (as
recon records them with each intent), when the journal has the column.

Backends: `local` is measured for real (the ended jobs are written into the local
backend's store as its supervisors would). `slurm` runs the real squeue and sinfo on the
dev cluster, and where jobs are meant to be there (completed, mixed) sacct's text is
generated (three rows per job: the job, its batch and extern steps) and handed to the
real adapter's parser and combiner through its runner seam: submitting 10,000 jobs to the
dev cluster would take an hour. Nothing is submitted or cancelled by this benchmark.

With --sweep M, each repo of the `none` scenario holds one sweep of M members (a matrix
of `lr` x `seed`, every member reading prepare's output) in place of M of its plain runs:
the size still counts every run. --validate times `recon validate` (warm: its parse
cache filled) and --status `recon status` beside each plan of the `none` scenario.

--versus DIR measures the checkout at DIR too (say, /work/main), command by command in
turn with this one, on a copy of each repo of its own (hard links; the parse cache is
each code's own): on a machine shared with other work, figures taken side by side in
the same minutes are the only fair comparison. A completed or unsettled scenario's copy
is seeded with jobs, journal and sacct text of its own (its state directory, and so its
deployment id, differs from the original's: the original's jobs would be another
deployment's, and the copy would plan every run anew), its journal stamped with the
schema that checkout knows, its sacct text in the columns it asks for.

At the largest size it also times `recon status`, and `recon plan --against HEAD~1` after
one file changed. It is a benchmark, not a test.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported at run time once sys.path holds this checkout
    from reconciler.scheduler.tag import Tag

PROJECT = "benchplan"
HERE = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(HERE))  # this checkout's reconciler, in this process and the children

SWEEP = """\
kind: Run
name: sweep-{i}
command: python train.py --lr {lr} --seed {i} --out {{outputs.model.path}}
resources:
{resources}
inputs:
  data: prepare.dataset
outputs:
  model:
    path: model.pt
{extra}"""
PLAIN = '  cpus: 1\n  memory: 1GiB\n  time: "01:00:00"\n'
HET = (
    '  time: "01:00:00"\n  components:\n    - cpus: 1\n      memory: 1GiB\n'
    "    - cpus: 1\n      memory: 1GiB\n"
)
PREPARE = (
    "kind: Run\nname: prepare\ncommand: x\nresources:\n  cpus: 1\n  memory: 1GiB\n"
    "outputs:\n  dataset: d.csv\n"
)
MATRIX = """\
kind: Run
name: grid
matrix:
  lr: {lrs}
  seed: {seeds}
command: python train.py --lr {{matrix.lr}} --seed {{matrix.seed}} --out {{outputs.model.path}}
resources:
{resources}
inputs:
  data: prepare.dataset
outputs:
  model:
    path: model.pt
"""

# What the child process runs: the CLI itself, with (for generated sacct text) the Slurm
# adapter's runner swapped for one that answers sacct from a file and runs the rest.
CHILD = """\
import atexit, os, subprocess, sys


def peak():  # VmHWM is this program's own: ru_maxrss would count the bench's image too
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                with open(os.environ["BENCH_PEAK_FILE"], "w") as out:
                    out.write(line.split()[1])


atexit.register(peak)
args = sys.argv[1:]
if args[0] == "--sacct":
    text = open(args[1]).read()
    args = args[2:]
    from reconciler.scheduler import select
    from reconciler.scheduler.slurm.adapter import SlurmScheduler
    from reconciler.scheduler.slurm.runner import run

    def runner(argv, stdin=None):
        if argv[0] == "sacct":
            return subprocess.CompletedProcess(list(argv), 0, text, "")
        return run(argv, stdin)

    select.select_scheduler = lambda choice, state_dir, project=None: SlurmScheduler(
        runner, project=project
    )
sys.argv = ["recon", *args]
from reconciler.cli import main
main()
"""


def git(root: Path, *args: str) -> None:
    identity = {"GIT_AUTHOR_NAME": "b", "GIT_AUTHOR_EMAIL": "b@b"}
    env = {**os.environ, **identity, "GIT_COMMITTER_NAME": "b", "GIT_COMMITTER_EMAIL": "b@b"}
    subprocess.run(["git", *args], cwd=root, env=env, check=True, capture_output=True)


def make_repo(
    root: Path, runs: int, scenario: str, backend: str, scripts: bool = False, sweep: int = 0
) -> None:
    """``runs`` runs: prepare, a sweep of ``sweep`` members (none when 0) and plain runs."""
    (root / "specs").mkdir(parents=True)
    (root / "recon.yaml").write_text(
        f'project: {PROJECT}\nscheduler: {backend}\nspecs:\n  - "specs/**/*.yaml"\n'
    )
    (root / "specs" / "prepare.yaml").write_text(PREPARE)
    if sweep:
        lrs = 50  # the members: a multiple of it
        seeds = list(range(sweep // lrs))
        grid = [round(0.0001 * (i + 1), 6) for i in range(lrs)]
        text = MATRIX.format(lrs=grid, seeds=seeds, resources=PLAIN)
        (root / "specs" / "grid.yaml").write_text(text)
    mixed = scenario == "mixed"
    for i in range(runs - 1 - sweep):
        het = mixed and i % 10 == 5
        coupled = mixed and i % 20 == 1  # sweep-1 couples with sweep-0, and so on
        text = SWEEP.format(
            i=i,
            lr=0.001 * (i + 1),
            resources=HET if het else PLAIN,
            extra=f"coupled_with: [sweep-{i - 1}]\n" if coupled else "",
        )
        if scripts:
            text = text.replace("python train.py", f"python3 scripts/point-{i}.py")
            (root / "scripts").mkdir(exist_ok=True)
            (root / "scripts" / f"point-{i}.py").write_text(f"print({i})\n")
        (root / "specs" / f"sweep-{i:05d}.yaml").write_text(text)
    (root / ".gitignore").write_text(".recon/\nruns/\n")
    git(root, "init", "-q")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "sweep")


def seed_completed(root: Path, backend: str, sacct_file: Path, settled: bool = True) -> None:
    """Every run succeeded: its output on disk, one ended job, one journal record (whose
    end is recorded when `settled`)."""
    from reconciler.desired.loader import load_desired, open_source
    from reconciler.scheduler.states import Health
    from reconciler.state.journal import Journal
    from reconciler.state.paths import run_path, tag_for

    desired = load_desired(open_source(root))
    state = root / desired.project.state_dir
    state.mkdir(parents=True, exist_ok=True)
    now = datetime.now(UTC)
    ended = now - timedelta(hours=1)
    names = sorted(desired.runs)
    for name in names:
        run = desired.runs[name]
        directory = Path(run_path(desired, run))
        directory.mkdir(parents=True, exist_ok=True)
        for output in run.spec.outputs.values():
            (directory / output.path).write_text(name)
    tags = {name: tag_for(desired, "run", name, desired.runs[name].spec_hash) for name in names}
    if backend == "local":
        ids = _local_jobs(state, names, tags, ended)
    else:
        ids = {name: str(900000 + index) for index, name in enumerate(names)}
        sacct_file.write_text(_sacct_text(names, tags, ids, ended))
    with Journal(state / "journal.sqlite") as journal:
        db = journal._db  # one transaction for 10,000 records: seeding, not what is timed
        stamp = (ended - timedelta(minutes=6)).isoformat()  # the intent, before sbatch
        final = Health.SUCCEEDED.value if settled else None
        db.executemany(
            "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, status,"
            " spec_fields, created_at, updated_at, job_id, final_health, exit_code)"
            " VALUES (?, 'run', ?, ?, ?, 'submitted', '{}', ?, ?, ?, ?, 0)",
            [
                (PROJECT, name, tags[name].spec_hash, desired.commit, stamp, stamp, ids[name],
                 final)
                for name in names
            ],
        )  # fmt: skip
        columns = {row[1] for row in db.execute("PRAGMA table_info(submissions)")}
        if "code_versions" in columns:  # as recon records them with each intent
            ids_of = dict(db.execute("SELECT name, id FROM submissions").fetchall())
            db.executemany(  # by id: `name` has no index of its own (n^2 at 100,000)
                "UPDATE submissions SET code_versions = ? WHERE id = ?",
                [
                    (json.dumps(dict(getattr(desired.runs[n], "code", {}))), ids_of[n])
                    for n in names
                ],
            )
        db.commit()


def _local_jobs(
    state: Path, names: list[str], tags: dict[str, Tag], ended: datetime
) -> dict[str, str]:
    from reconciler.scheduler.local.decide import Ending
    from reconciler.scheduler.local.directives import Component
    from reconciler.scheduler.local.store import JobSpec, Store

    store = Store(state / "local")
    store.prepare()
    ids = {}
    for name in names:
        tag = tags[name]

        def build(_first: int, job_id: int, tag: Tag = tag) -> tuple[JobSpec, dict[str, str]]:
            spec = JobSpec(
                job_id=job_id,
                name=tag.job_name,
                comment=tag.format(),
                workdir=str(state),
                dependencies=(),
                components=(Component(),),
                stdout=str(state / f"{job_id}.out"),
                stderr=None,
                time_limit=None,
                submitted=ended - timedelta(minutes=5),
            )
            return spec, {}

        (spec,) = store.create(build, "#!/bin/sh\ntrue\n")
        store.write_started(spec.job_id, ended - timedelta(minutes=4))
        store.write_ended(spec.job_id, Ending(at=ended, exit_code=0))
        ids[name] = str(spec.job_id)
    return ids


def _sacct_text(
    names: list[str], tags: dict[str, Tag], ids: dict[str, str], ended: datetime
) -> str:
    """Three rows a job (its own, its batch and extern steps) in the columns this checkout
    asks sacct for, as Slurm with an accounting gatherer prints them: usage (ElapsedRaw,
    TimelimitRaw, AllocTRES) on every row, MaxRSS on the steps, TotalCPU on all."""
    from reconciler.scheduler.slurm.parse import SACCT_FIELDS

    local = ended.astimezone()
    end = local.strftime("%Y-%m-%dT%H:%M:%S")
    start = (local - timedelta(minutes=4)).strftime("%Y-%m-%dT%H:%M:%S")
    submit = (local - timedelta(minutes=5)).strftime("%Y-%m-%dT%H:%M:%S")
    tres = "billing=1,cpu=1,mem=500M,node=1"
    lines = []
    for name in names:
        job, tag = ids[name], tags[name]
        common = {
            "State": "COMPLETED", "ExitCode": "0:0", "Submit": submit, "Start": start,
            "End": end, "NodeList": "cpu1", "ElapsedRaw": "240", "AllocTRES": tres,
            "TotalCPU": f"00:{int(job) % 60:02}.{int(job) % 1000:03}",
        }  # fmt: skip
        rows = (
            {"JobID": job, "Partition": "cpu", "TimelimitRaw": "60", "JobName": tag.job_name,
             "Comment": tag.format()},
            {"JobID": f"{job}.batch", "MaxRSS": f"{100000 + int(job) % 90000}K",
             "JobName": "batch"},
            {"JobID": f"{job}.extern", "MaxRSS": "0", "JobName": "extern"},
        )  # fmt: skip
        for row in rows:
            cells = {**common, "JobIDRaw": row["JobID"], **row}
            lines.append("|".join(cells.get(field, "") for field in SACCT_FIELDS))
    return "\n".join(lines) + "\n"


def _fitted(sacct: Path, code: Path) -> Path:
    """``sacct`` in the columns the checkout at ``code`` asks for (one that predates some
    of this one's: without them), beside it; ``sacct`` itself for this checkout."""
    from reconciler.scheduler.slurm.parse import SACCT_FIELDS

    if code == HERE:
        return sacct
    asked = "from reconciler.scheduler.slurm.parse import SACCT_FIELDS; print(*SACCT_FIELDS)"
    env = {**os.environ, "PYTHONPATH": str(code)}
    told = subprocess.run(
        [sys.executable, "-c", asked], cwd=code, env=env, capture_output=True, text=True, check=True
    )
    keep = [SACCT_FIELDS.index(field) for field in told.stdout.split()]
    fitted = sacct.with_name(f"{sacct.name}-{len(keep)}")
    if not fitted.exists():
        rows = (line.split("|") for line in sacct.read_text().splitlines())
        fitted.write_text("".join("|".join(cells[i] for i in keep) + "\n" for cells in rows))
    return fitted


def measure(
    args: list[str],
    repeat: int,
    sacct: Path | None = None,
    warm: bool = True,
    code: Path = HERE,
) -> tuple[float, float]:
    """The median wall seconds and the peak MiB of ``recon ARGS`` run by the checkout
    at ``code``; the median CPU seconds are then ``cpu()``."""
    if warm:
        _timed_rss(args, sacct, code)  # warm the parse cache and the page cache
    walls, peaks = [], []
    _CPU.clear()
    for _ in range(repeat):
        wall, peak = _timed_rss(args, sacct, code)
        walls.append(wall)
        peaks.append(peak)
    return statistics.median(walls), max(peaks)


def cpu() -> float:
    """The median CPU seconds of the last `measure`."""
    return statistics.median(_CPU)


def _timed_rss(args: list[str], sacct: Path | None, code: Path = HERE) -> tuple[float, float]:
    sacct = None if sacct is None else _fitted(sacct, code)
    argv = [sys.executable, "-c", CHILD, *(["--sacct", str(sacct)] if sacct else []), *args]
    peak_file = Path(tempfile.gettempdir()) / f"recon-bench-peak-{os.getpid()}"
    env = {**os.environ, "PYTHONPATH": str(code), "BENCH_PEAK_FILE": str(peak_file)}
    start = time.perf_counter()
    # cwd: `python -c` puts it first on sys.path, before PYTHONPATH
    process = subprocess.Popen(
        argv, env=env, cwd=code, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    assert process.stderr is not None
    err = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - start
    exit_code = os.waitstatus_to_exitcode(status)
    if exit_code not in (0, 2):
        raise RuntimeError(f"recon {' '.join(args)} exited {exit_code}: {err.decode()[-2000:]}")
    _CPU.append(usage.ru_utime + usage.ru_stime)
    return wall, int(peak_file.read_text()) / 1024


# CPU seconds (user + system) of each measured process: on a shared machine, steadier
# than wall time, which waits for other processes' turns too.
_CPU: list[float] = []


def growth(sizes: list[int], times: list[float]) -> str:
    steps = []
    for i in range(1, len(sizes)):
        (n1, t1), (n2, t2) = (sizes[i - 1], times[i - 1]), (sizes[i], times[i])
        steps.append(f"{(t2 / t1) ** (1 / math.log2(n2 / n1)):.2f}x")
    return ", ".join(steps) or "-"


def status(work: Path, backend: str, sizes: list[int], form: str, repeat: int) -> None:
    """`recon status` over the completed repos (their parse cache is warm from the plans)."""
    walls, cpus = [], []
    for size in sizes:
        root = work / f"{backend}-completed-{size}"
        sacct = work / f"{backend}-completed-{size}.sacct"
        generated = sacct if backend == "slurm" else None
        args = ["status", str(root), "--format", form]
        wall, peak = measure(args, repeat, generated, warm=False)
        walls.append(wall)
        cpus.append(cpu())
        print(
            f"status {backend:5} completed {size:6} runs ({form:4}): {wall:6.2f} s"
            f" (cpu {cpus[-1]:6.2f} s)  peak {peak:5.0f} MiB",
            flush=True,
        )
    print(
        f"status {backend:5} completed ({form}) growth per doubling: wall "
        f"{growth(sizes, walls)}; cpu {growth(sizes, cpus)}"
    )


def slurm_up() -> bool:
    return (
        shutil.which("sbatch") is not None
        and subprocess.run(
            ["squeue", "--noheader", "--me"], capture_output=True, check=False
        ).returncode
        == 0
    )


def commands_of(scenario: str, options: argparse.Namespace) -> list[str]:
    """The commands timed on each repo of ``scenario``."""
    extra = ["validate"] if options.validate else []
    return [*extra, "plan", *(["status"] if options.status and scenario == "none" else [])]


def readable_by(code: Path, journal: Path) -> None:
    """Let an earlier checkout read the journal this one seeded: stamp it with the schema
    version that checkout knows, when every later migration only adds columns (which an
    earlier recon does not read); otherwise stop, saying so."""
    from reconciler.state.journal import _MIGRATIONS, SCHEMA_VERSION

    asked = "from reconciler.state.journal import SCHEMA_VERSION; print(SCHEMA_VERSION)"
    known = subprocess.run(
        [sys.executable, "-c", asked],
        cwd=code, env={**os.environ, "PYTHONPATH": str(code)},
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    theirs = int(known)
    if theirs >= SCHEMA_VERSION:
        return
    later = [statement for step in _MIGRATIONS[theirs:] for statement in step]
    if not all(s.startswith("ALTER TABLE") and " ADD COLUMN " in s for s in later):
        sys.exit(f"{code} knows journal schema {theirs}: its journals differ from this one's")
    with sqlite3.connect(journal) as db:
        db.execute(f"PRAGMA user_version = {theirs}")
    db.close()


def seeded_copy(copy: Path, backend: str, scenario: str, code: Path) -> Path | None:
    """A completed or unsettled scenario's copy for another checkout: its own jobs,
    journal and sacct text, seeded as the original was (a copy's state directory, and so
    its deployment id, is its own: the original's jobs would be another deployment's),
    the journal stamped with the schema that checkout knows. The sacct file, for slurm."""
    sacct = copy.with_name(f"{copy.name}.sacct")
    if not (copy / ".recon" / "journal.sqlite").exists():
        seed_completed(copy, backend, sacct, scenario != "unsettled")
        readable_by(code, copy / ".recon" / "journal.sqlite")
    return sacct if backend == "slurm" else None


def copy_for(root: Path, label: str) -> Path:
    """The repo ``root`` for another checkout's code: hard links, so it costs seconds at
    100,000 files, and no state directory (its parse cache is that code's own)."""
    copy = root.with_name(f"{root.name}-{label}")
    if not copy.exists():
        subprocess.run(["cp", "-al", str(root), str(copy)], check=True)
        shutil.rmtree(copy / ".recon", ignore_errors=True)
    return copy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,2000,5000,10000")
    parser.add_argument("--backends", default="local,slurm")
    parser.add_argument("--scenarios", default="none,completed,unsettled,mixed")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--keep", type=Path, help="build the repos here and leave them")
    parser.add_argument("--scripts", action="store_true", help="each run names a script")
    parser.add_argument("--sweep", type=int, default=0, help="members of one sweep (none)")
    parser.add_argument("--validate", action="store_true", help="time `recon validate` too")
    parser.add_argument("--status", action="store_true", help="time `recon status` (none)")
    parser.add_argument("--versus", type=Path, help="another checkout to measure in turn")
    options = parser.parse_args()
    sizes = [int(size) for size in options.sizes.split(",")]
    backends = options.backends.split(",")
    if "slurm" in backends and not slurm_up():
        print("slurm: the dev cluster does not answer; measuring the local backend only")
        backends = [b for b in backends if b != "slurm"]
    codes = {"this": HERE, **({"versus": options.versus.resolve()} if options.versus else {})}
    if options.versus:
        print(f"this: {HERE}; versus: {options.versus.resolve()}")
    work = options.keep or Path(tempfile.mkdtemp(prefix="recon-bench-plan-"))
    try:
        for backend in backends:
            for scenario in options.scenarios.split(","):
                commands = commands_of(scenario, options)
                walls: dict[tuple[str, str], list[float]] = {}
                cpus: dict[tuple[str, str], list[float]] = {}
                peaks: dict[tuple[str, str], list[float]] = {}
                for size in sizes:
                    root = work / f"{backend}-{scenario}-{size}"
                    sacct = work / f"{backend}-{scenario}-{size}.sacct"
                    if not root.exists():
                        sweep = options.sweep if scenario == "none" and size > options.sweep else 0
                        make_repo(root, size, scenario, backend, options.scripts, sweep)
                        if scenario != "none":
                            seed_completed(root, backend, sacct, scenario != "unsettled")
                    generated = sacct if backend == "slurm" and scenario != "none" else None
                    for command in commands:
                        for label, code in codes.items():  # in turn, in the same minutes
                            repo, text = root, generated
                            if code != HERE:
                                repo = copy_for(root, label)
                                if scenario != "none":
                                    text = seeded_copy(repo, backend, scenario, code)
                            args = [command, str(repo)]
                            wall, peak = measure(args, options.repeat, text, code=code)
                            key = (command, label)
                            walls.setdefault(key, []).append(wall)
                            cpus.setdefault(key, []).append(cpu())
                            peaks.setdefault(key, []).append(peak)
                            taken = cpus[key][-1]
                            print(
                                f"{command:8} {label:6} {backend:5} {scenario:9} {size:6} runs:"
                                f" {wall:6.2f} s (cpu {taken:6.2f} s)  peak {peak:5.0f} MiB",
                                flush=True,
                            )
                for (command, label), times in walls.items():
                    print(
                        f"{command:8} {label:6} {backend:5} {scenario:9} growth per doubling: "
                        f"wall {growth(sizes, times)}; cpu {growth(sizes, cpus[command, label])};"
                        f" peak {growth(sizes, peaks[command, label])}"
                    )
                if scenario == "completed":
                    for form in ("text", "json"):
                        status(work, backend, sizes, form, options.repeat)
        root = work / f"{backends[0]}-none-{sizes[-1]}"
        if root.exists():
            changed = root / "specs" / "sweep-00007.yaml"
            if "--lr 0.5" not in changed.read_text():
                changed.write_text(changed.read_text().replace("--lr ", "--lr 0.5 --x "))
                git(root, "commit", "-q", "-am", "one file changed")
            wall, peak = measure(["plan", "--against", "HEAD~1", str(root)], options.repeat)
            print(
                f"plan --against HEAD~1, {sizes[-1]} runs, one file changed: {wall:.2f} s"
                f" (cpu {cpu():.2f} s)  peak {peak:.0f} MiB"
            )
    finally:
        if options.keep is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
