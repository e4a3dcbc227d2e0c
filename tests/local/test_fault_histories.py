"""Generated fault histories: the real engine (load, observe, settle, plan, apply) with a
real journal and git repository, against a scripted cluster (tests/simcluster.py), through
random sequences of commits, passes and faults. After every step:

- at most one live job per (deployment, run, spec hash), sweep members included;
- no job outside the deployment is ever cancelled or taken into the journal;
- recon never deletes or rewrites an output (only jobs write them);
- a saved plan is carried out only while it is still true;

and at the end, once faults stop and jobs are let finish, the project converges within a
bounded number of passes and then plans nothing.

Histories: `RECON_HISTORIES` (default 100 in the suite), each up to `RECON_HISTORY_STEPS`
steps (default 30: fewer histories, each deeper, reach the states only several faults in
a row make, and a history's cost is mostly its closing passes, not its steps; CI runs
2,000 of up to 15 steps besides, in a lane of its own), split over
`RECON_HISTORY_WORKERS` processes (default: one a core).
Worker k draws the fixed set of seed `RECON_HISTORY_SEED + k` (default seed 0), so the
suite runs the same histories each time and another seed runs new ones. A failing history
is printed by Hypothesis as a readable script of rule calls, shrunk to the fewest steps
that still fail, with its worker's seed.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import shutil
import threading
import traceback
from collections import Counter
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)

from reconciler.engine.apply import faults as fault_points
from reconciler.engine.observe.arrays import map_file
from reconciler.engine.plan.actions import ActionKind, Plan
from reconciler.engine.plan.arrays import ArrayMap
from reconciler.engine.reconcile import Look, PassOutcome, Request, look_once, reconcile_once
from reconciler.errors import ReconError
from reconciler.scheduler.base import (
    AllocateRequest,
    Observation,
    StepRequest,
    SubmitRequest,
)
from reconciler.scheduler.partitions import Partition
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.state.journal import Journal
from reconciler.state.paths import JOURNAL_FILE
from tests.gitrepo import GitRepo
from tests.simcluster import ALIVE, ENDINGS, Faults, SimCluster, SimJob, SimTask

HISTORIES = int(os.environ.get("RECON_HISTORIES", "100"))
STEPS = int(os.environ.get("RECON_HISTORY_STEPS", "30"))
SEED = int(os.environ.get("RECON_HISTORY_SEED", "0"))
WORKERS = int(os.environ.get("RECON_HISTORY_WORKERS", str(os.cpu_count() or 1)))
PROJECT = "hist"
START = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)
RUNS = ("a", "b", "c", "d")  # b reads a's output, c reads b's; d stands alone
SWEEP_VALUES = (1, 2, 3)
CONVERGE_WITHIN = 12  # passes once the faults stop, three minutes apart

# Counted over every history of a session, printed by the last test.
TALLY: Counter[str] = Counter()


def run_spec(name: str, version: int, present: set[str]) -> str:
    upstream = {"b": "a", "c": "b"}.get(name)
    reads = upstream is not None and upstream in present
    inputs = f"inputs:\n  up: {upstream}.out\n" if reads else ""
    source = " $(cat {inputs.up.path})" if reads else ""
    # d, alone, has budgets per kind: a preemption never spends it, a timeout twice
    retries = D_RETRIES if name == "d" else "1"
    # c checkpoints: a timeout or a preemption is a requeue, at most 3 since a success
    checkpoint = CHECKPOINT if name == "c" else ""
    return (
        f"kind: Run\nname: {name}\n"
        f"command: 'echo {name}{version}{source} > {{outputs.out.path}}'\n"
        f"retries: {retries}\nresources: {{cpus: 1}}\n{inputs}{checkpoint}"
        "outputs:\n  out: out.txt\n"
    )


CHECKPOINT = "checkpoint: {path: ckpt/, max_requeues: 3}\n"


D_RETRIES = "{failure: 1, timeout: 2, preemption: unlimited, node_failure: 1, out_of_memory: 1}"


def allocation_specs(shape: int, version: int) -> dict[str, str]:
    """Allocation `w` (its setup a step of its own) and run `e`, which runs inside it."""
    return {
        "specs/w.yaml": (
            "kind: Allocation\nname: w\ntime_limit: 1h\nmin_remaining: 10m\n"
            f"resources: {{cpus: {shape}}}\nsetup:\n  - 'true'\n"
        ),
        "specs/e.yaml": (
            "kind: Run\nname: e\nallocation: w\n"
            f"command: 'echo e{version} > {{outputs.out.path}}'\n"
            "retries: 1\nresources: {cpus: 1}\noutputs:\n  out: out.txt\n"
        ),
    }


def sweep_spec(values: tuple[int, ...], version: int) -> str:
    listed = ", ".join(str(value) for value in values)
    return (
        "kind: Run\nname: s\n"
        f"command: 'echo s{version}-{{matrix.x}} > {{outputs.out.path}}'\n"
        f"matrix:\n  x: [{listed}]\nresources: {{cpus: 1}}\noutputs:\n  out: out.txt\n"
    )


class History(RuleBasedStateMachine):
    """One project, one cluster, one journal, and what the history did to them."""

    def __init__(self) -> None:
        super().__init__()
        self.now = START
        self.cluster = SimCluster(clock=lambda: self.now)
        self.versions: dict[str, int] = {}
        self.sweep: tuple[int, ...] = ()
        self.sweep_version = 0
        self.allocation: tuple[int, int] | None = None  # w's cpus and e's version, if declared
        self.saved: Plan | None = None
        self.foreign: list[str] = []
        self.root: Path | None = None

    # -- set-up ---------------------------------------------------------------------------

    @initialize(
        runs=st.sets(st.sampled_from(RUNS), min_size=1),
        sweep=st.sets(st.sampled_from(SWEEP_VALUES)),
    )
    def project(self, runs: set[str], sweep: set[int]) -> None:
        self.root = Path(_scratch.make())
        self.repo = GitRepo(self.root)
        self.repo.write({"recon.yaml": f"project: {PROJECT}\nscheduler: slurm\n"})
        self.versions = dict.fromkeys(runs, 1)
        self.sweep = tuple(sorted(sweep))
        self._commit()
        others = [
            Tag(project=PROJECT, deployment="0123456789ab", kind="run", name="a",
                spec_hash="feedfacefeedface"),  # another clone's job of the same run
            Tag(project="other", deployment="0123456789ab", kind="run", name="a",
                spec_hash="feedfacefeedface"),
            None,  # this user's job with no recon tag at all
        ]  # fmt: skip
        self.foreign = [self.cluster.add_foreign(tag) for tag in others]
        TALLY["histories"] += 1

    def teardown(self) -> None:
        try:
            if self.root is not None:
                self._converges()
        finally:
            if self.root is not None:
                shutil.rmtree(self.root, ignore_errors=True)

    # -- what a lab does ------------------------------------------------------------------

    @rule(name=st.sampled_from(RUNS), how=st.sampled_from(["add", "remove", "change"]))
    def commit(self, name: str, how: str) -> None:
        if how == "remove":
            self.versions.pop(name, None)
        else:
            self.versions[name] = self.versions.get(name, 0) + (1 if how == "change" else 0) or 1
        self._commit()

    @rule(how=st.sampled_from(["declare", "drop", "reshape", "change-run"]))
    def commit_allocation(self, how: str) -> None:
        """Allocation `w` and its run `e` declared or dropped together; `w`'s shape
        changed (a new job replaces the old once no step runs in it); `e` changed."""
        shape, version = self.allocation or (1, 1)
        if how == "drop":
            self.allocation = None
        elif how == "reshape":
            self.allocation = (3 - shape, version)
        elif how == "change-run":
            self.allocation = (shape, version + 1)
        else:
            self.allocation = (shape, version)
        self._commit()
        TALLY["allocation commits"] += 1

    @rule(values=st.sets(st.sampled_from(SWEEP_VALUES)), change=st.booleans())
    def commit_sweep(self, values: set[int], change: bool) -> None:
        self.sweep = tuple(sorted(values))
        self.sweep_version += int(change)
        self._commit()

    @rule(minutes=st.integers(1, 3), confirmed=st.booleans())
    def apply(self, minutes: int, confirmed: bool) -> None:
        """`recon apply`, now and then with `--allow-prune-all`."""
        self._pass(minutes, confirmed=confirmed)

    @rule()
    def apply_killed_after_sbatch(self) -> None:
        """sbatch returned a job id and the journal never heard of it (the id may be a
        forgotten job's, handed out again)."""
        with killed_after_sbatch():
            self._pass(1)

    @rule(point=st.sampled_from(fault_points.POINTS))
    def apply_killed_at(self, point: str) -> None:
        """A pass stops at a fault point, as a SIGKILL there would leave it: after a
        scheduler call (a job made, an allocation made, a step started, a job cancelled)
        and before the journal heard of it, or as it begins."""
        with killed_at(point) as reached:
            self._pass(1)
            if reached():
                TALLY[f"passes killed at {point}"] += 1

    @rule()
    def two_applies_at_once(self) -> None:
        """Two passes at the same moment (cron and watch); the lock makes them take turns."""
        before = self._outputs()
        threads = [threading.Thread(target=self._quiet_pass) for _ in range(2)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        self._outputs_kept(before)
        TALLY["passes"] += 2

    @rule()
    def two_applies_from_two_processes(self) -> None:
        """Two passes at once from two processes (cron's and the watch's): the lock file
        and the journal are shared as between processes; the child's scheduler calls
        reach this cluster through a pipe."""
        assert self.root is not None
        before = self._outputs()
        ours, theirs = multiprocessing.Pipe()
        child = os.fork()
        if child == 0:  # the other process: one pass, then gone without cleaning up
            try:
                reconcile_once(
                    Request(self.root), scheduler=_Forwarded(theirs), clock=lambda: self.now,
                    lock_timeout=30,
                )  # fmt: skip
            except BaseException:  # a pass may fail as the faults make it; nothing to say
                pass
            finally:
                theirs.send(("done", ()))
                os._exit(0)
        serving = threading.Thread(target=_serve, args=(ours, self.cluster))
        serving.start()
        self._quiet_pass()
        serving.join()
        os.waitpid(child, 0)
        self._outputs_kept(before)
        TALLY["passes"] += 2
        TALLY["passes from a second process"] += 1

    @rule()
    def save_a_plan(self) -> None:
        try:
            self.saved = self._look().plan
        except ReconError:
            self.saved = None  # `recon plan -out` failed: nothing saved

    @precondition(lambda self: self.saved is not None)
    @rule()
    def apply_the_saved_plan(self) -> None:
        saved, self.saved = self.saved, None
        assert saved is not None
        outcome = self._pass(1, saved=saved)
        if outcome is not None:  # carried out: the world still called for exactly that
            assert _moves(saved) == _moves(outcome.plan), "a stale saved plan was carried out"
            TALLY["saved plans carried out"] += 1

    @rule()
    def lose_the_journal(self) -> None:
        assert self.root is not None
        for path in (self.root / ".recon").glob(f"{JOURNAL_FILE}*"):
            path.unlink()
        TALLY["journals lost"] += 1

    # -- what the cluster does ------------------------------------------------------------

    @rule(endings=st.lists(st.sampled_from((None, *ENDINGS)), min_size=1, max_size=8))
    def jobs_move_on(self, endings: list[SlurmState | None]) -> None:
        picks = iter(endings * 50)
        self.cluster.step(lambda job, task: next(picks, None))
        TALLY["job steps"] += 1

    @precondition(
        lambda self: any(
            j.tag is not None and j.tag.project == PROJECT and j.tag.name == "c"
            for j in self.cluster.live()
        )
    )
    @rule(ending=st.sampled_from((SlurmState.TIMEOUT, SlurmState.PREEMPTED)))
    def checkpointing_run_is_stopped(self, ending: SlurmState) -> None:
        """c, which checkpoints, outlives its time limit or is preempted: requeued, never
        retried."""

        def stopped(job: SimJob, task: object) -> SlurmState | None:
            # c's upstreams finish, so that c runs; c is stopped
            if job.tag is None or job.tag.project != PROJECT:
                return None
            if job.tag.name != "c":
                return SlurmState.COMPLETED
            TALLY["checkpointing jobs stopped"] += 1
            return ending

        for _ in range(4):  # a's, b's, then c's job start and end in turn
            self.cluster.step(stopped)

    @rule(
        faults=st.builds(
            Faults,
            observe_fails=st.booleans(),
            partial=st.booleans(),
            submit_fails=st.booleans(),
            reply_lost=st.booleans(),
            lag=st.integers(0, 2),
        )
    )
    def faults_change(self, faults: Faults) -> None:
        self.cluster.faults = faults
        TALLY["fault sets"] += 1

    @rule()
    def faults_stop(self) -> None:
        self.cluster.faults = Faults()

    @precondition(lambda self: any(j.tag and j.tag.project == PROJECT for j in self.cluster.live()))
    @rule(data=st.data())
    def slurmctld_forgets_a_job(self, data: st.DataObject) -> None:
        """slurmctld killed and restarted lost a job it had just accepted; its id goes to
        the next submission."""
        mine = [j for j in self.cluster.live() if j.job_id not in self.foreign]
        if mine:
            self.cluster.forget(data.draw(st.sampled_from(mine)).job_id)
            TALLY["jobs forgotten"] += 1

    # -- what must always hold ------------------------------------------------------------

    @invariant()
    def one_live_job_per_run_and_spec(self) -> None:
        if self.root is None:
            return
        keys: Counter[tuple[str, str]] = Counter()
        for job in self.cluster.live():
            if job.job_id in self.foreign or job.tag is None:
                continue
            for task in job.tasks if job.limit is None else ():  # an allocation: its steps
                if task.state in ALIVE:
                    keys[_key(job, task)] += 1
            for step in job.steps:
                if step.state in ALIVE and step.tag.kind == "run":
                    keys[(step.tag.name, step.tag.spec_hash)] += 1
        twice = {key: count for key, count in keys.items() if count > 1}
        assert not twice, f"more than one live job for {twice}"

    @invariant()
    def others_jobs_are_never_touched(self) -> None:
        if self.root is None:
            return
        cancelled = set(self.cluster.cancels) & set(self.foreign)
        assert not cancelled, f"cancelled jobs that are not this deployment's: {cancelled}"
        journal = self.root / ".recon" / JOURNAL_FILE
        if journal.exists():
            with Journal(journal) as opened:
                taken = {r.job_id for r in opened.records(PROJECT)} | {
                    r.job_id for r in opened.records("other")
                }
            assert not taken & set(self.foreign), "took another's job into the journal"

    # -- inside ---------------------------------------------------------------------------

    def _commit(self) -> None:
        present = set(self.versions)
        files = {
            f"specs/{name}.yaml": run_spec(name, version, present)
            for name, version in self.versions.items()
        }
        if self.sweep:
            files["specs/s.yaml"] = sweep_spec(self.sweep, self.sweep_version)
        if self.allocation is not None:
            files |= allocation_specs(*self.allocation)
        specs = self.repo.root / "specs"
        for old in specs.glob("*.yaml") if specs.exists() else ():
            if f"specs/{old.name}" not in files:
                old.unlink()
        self.repo.commit(files)
        TALLY["commits"] += 1

    def _look(self) -> Look:
        assert self.root is not None
        return look_once(Request(self.root), scheduler=_quiet(self.cluster), clock=lambda: self.now)

    def _pass(
        self, minutes: int, saved: Plan | None = None, *, confirmed: bool = False
    ) -> PassOutcome | None:
        assert self.root is not None
        self.now += timedelta(minutes=minutes)
        before = self._outputs()
        try:
            outcome = reconcile_once(
                Request(self.root, allow_prune_all=confirmed), scheduler=self.cluster, saved=saved,
                clock=lambda: self.now, lock_timeout=30,
            )  # fmt: skip
        except (ReconError, fault_points.InjectedFault):
            TALLY["passes failed (as they may)"] += 1
            outcome = None
        finally:
            self._outputs_kept(before)
        TALLY["passes"] += 1
        if outcome is not None:
            plan = outcome.look.plan
            TALLY["requeues planned"] += sum(a.kind is ActionKind.REQUEUE for a in plan.actions)
        return outcome

    def _quiet_pass(self) -> None:
        assert self.root is not None
        try:
            reconcile_once(
                Request(self.root), scheduler=self.cluster, clock=lambda: self.now,
                lock_timeout=30,
            )  # fmt: skip
        except (ReconError, fault_points.InjectedFault):
            TALLY["passes failed (as they may)"] += 1

    def _outputs(self) -> dict[Path, tuple[int, int, bytes]]:
        assert self.root is not None
        found = {}
        for path in (self.root / "runs").rglob("out.txt") if (self.root / "runs").exists() else ():
            info = path.stat()
            found[path] = (info.st_ino, info.st_mtime_ns, path.read_bytes())
        return found

    def _outputs_kept(self, before: dict[Path, tuple[int, int, bytes]]) -> None:
        after = self._outputs()
        for path, was in before.items():
            assert after.get(path) == was, f"recon deleted or rewrote the output {path}"

    def _converges(self) -> None:
        """Faults stop and every job that runs succeeds: within CONVERGE_WITHIN passes the
        plan has nothing left to do."""
        self.cluster.faults = Faults()
        for _ in range(CONVERGE_WITHIN):
            # Three minutes a pass: a job lost without a trace is waited for UNSEEN_GRACE
            # (Slurm's two views lag) before its run is sent again; a person confirms
            # what the prune guard holds.
            self._pass(3, confirmed=True)
            for _ in range(4):  # a chain's jobs start and end in turn
                self.cluster.step(lambda job, task: SlurmState.COMPLETED)
            plan = self._look().plan
            if not plan.has_changes and not any(a.unseen_job for a in plan.actions):
                TALLY["converged"] += 1
                return
        shown = [f"{a.kind.value} {a.target}: {a.reason}" for a in plan.actions]
        raise AssertionError(f"no convergence within {CONVERGE_WITHIN} passes: {shown}")


@contextlib.contextmanager
def killed_at(point: str) -> Iterator[Callable[[], bool]]:
    """A pass inside stops the first time it reaches `point` (raised once), as a SIGKILL
    there would leave it: after sbatch, the journal without the id. Gives a function that
    says whether the point was reached."""
    fault_points._reached.clear()
    os.environ[fault_points.ENV] = f"{point}:raise:1"
    try:
        yield lambda: fault_points._reached.get(point, 0) > 0
    finally:
        del os.environ[fault_points.ENV]
        fault_points._reached.clear()


def killed_after_sbatch() -> contextlib.AbstractContextManager[Callable[[], bool]]:
    return killed_at("after-sbatch")


class _Forwarded:
    """The cluster as another process sees it: each call goes through a pipe to the
    process that holds it (``_serve``), and comes back as its answer or its error."""

    name = "slurm"

    def __init__(self, pipe: Connection) -> None:
        self.pipe = pipe

    def _call(self, method: str, *args: object) -> Any:
        self.pipe.send((method, args))
        ok, answer = self.pipe.recv()
        if not ok:
            raise answer
        return answer

    def observe(self, since: datetime) -> Observation:
        return cast(Observation, self._call("observe", since))

    def submit(self, request: SubmitRequest) -> str:
        return cast(str, self._call("submit", request))

    def cancel(self, job_id: str) -> None:
        self._call("cancel", job_id)

    def max_array_size(self) -> int:
        return cast(int, self._call("max_array_size"))

    def allocate(self, request: AllocateRequest) -> str:
        return cast(str, self._call("allocate", request))

    def release(self, job_id: str) -> None:
        self._call("release", job_id)

    def partitions(self) -> tuple[Partition, ...]:
        return cast(tuple[Partition, ...], self._call("partitions"))

    def containers(self) -> frozenset[str]:
        return cast(frozenset[str], self._call("containers"))

    def start_step(self, request: StepRequest) -> str | None:
        return cast(str | None, self._call("start_step", request))


def _serve(pipe: Connection, cluster: SimCluster) -> None:
    """Answer the other process's scheduler calls until its pass is done."""
    while True:
        method, args = pipe.recv()
        if method == "done":
            return
        try:
            pipe.send((True, getattr(cluster, method)(*args)))
        except Exception as error:  # the answer is the error: raised in the caller
            pipe.send((False, error))


def _quiet(cluster: SimCluster) -> ScriptedScheduler:
    """The cluster as `recon plan` sees it: looking never acts (nothing that acts is
    scripted: a call fails the history), and never moves lag on."""

    def observe(since: datetime) -> Observation:
        hidden = {job_id: job.hidden_for for job_id, job in cluster.jobs.items()}
        try:
            return cluster.observe(since)
        finally:
            for job_id, count in hidden.items():
                if job_id in cluster.jobs:
                    cluster.jobs[job_id].hidden_for = count

    return ScriptedScheduler(
        name=cluster.name,
        observe=observe,
        partitions=cluster.partitions,
        max_array_size=cluster.max_array_size,
    )


def _key(job: SimJob, task: SimTask) -> tuple[str, str]:
    """The run and spec hash a live task works for; a sweep's task, its member's."""
    assert job.tag is not None
    if task.index is None:
        return (job.tag.name, job.tag.spec_hash)
    mapped = ArrayMap.from_json(map_file(job.workdir, job.tag.spec_hash).read_text())
    return mapped.members[task.index]


def _moves(plan: Plan) -> list[tuple[str, str, str | None]]:
    return [(a.kind.value, a.target, a.spec_hash) for a in plan.actions if a.changes_cluster]


class _Scratch:
    """Folders for histories, under pytest's temporary root."""

    base: Path | None = None
    count = 0

    def make(self) -> str:
        assert self.base is not None
        self.count += 1
        path = self.base / f"h{self.count}"
        path.mkdir()
        return str(path)


_scratch = _Scratch()


def _run_histories(worker: int, base: str) -> tuple[Counter[str], str | None]:
    """One worker's share of the histories, its own fixed set (seed `SEED + worker`):
    the tally, and the failing history's report if one failed."""
    _scratch.base = Path(base)
    TALLY.clear()
    History._hypothesis_internal_use_seed = SEED + worker
    share = HISTORIES // WORKERS + (1 if worker < HISTORIES % WORKERS else 0)
    History.TestCase.settings = settings(
        max_examples=share,
        stateful_step_count=STEPS,
        deadline=None,
        suppress_health_check=list(HealthCheck),
        database=None,
    )
    try:
        History.TestCase().runTest()
    except BaseException as failure:  # any failure at all: the parent reports it
        return TALLY.copy(), "".join(traceback.format_exception(failure))
    return TALLY.copy(), None


def test_generated_fault_histories(tmp_path_factory: pytest.TempPathFactory) -> None:
    """The histories, split over `WORKERS` processes (one a core): each draws its own
    fixed set, so a failure is found again by the same seed."""
    bases = [str(tmp_path_factory.mktemp(f"histories{worker}")) for worker in range(WORKERS)]
    with multiprocessing.get_context("fork").Pool(WORKERS) as pool:
        results = pool.starmap(_run_histories, enumerate(bases))
    tally: Counter[str] = Counter()
    for counted, _ in results:
        tally.update(counted)
    print(f"\n{WORKERS} worker(s), seeds {SEED}..{SEED + WORKERS - 1}: " + ", ".join(
        f"{name}: {count}" for name, count in sorted(tally.items())
    ))  # fmt: skip
    failures = [
        f"worker {worker} (seed {SEED + worker}):\n{failure}"
        for worker, (_, failure) in enumerate(results) if failure
    ]  # fmt: skip
    assert not failures, "\n".join(failures)
    assert tally["histories"] >= HISTORIES // 2 and tally["converged"] == tally["histories"]


def test_a_lost_id_handed_to_a_killed_submission_plans_as_apply_sees_it(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    _scratch.base = tmp_path_factory.mktemp("reused")
    history = History()
    history.project(runs={"a"}, sweep={1, 2})
    try:
        history.apply_killed_after_sbatch()
        history.apply_killed_after_sbatch()
        history.commit(how="add", name="c")
        lost = next(job for job in history.cluster.live() if job.tag and job.tag.name == "a"
                    and job.job_id not in history.foreign)  # fmt: skip
        history.cluster.forget(lost.job_id)  # its id goes to the next submission: c's
        with killed_after_sbatch():
            history._pass(1)
        reused = history.cluster.jobs[lost.job_id].tag
        assert reused is not None and reused.name == "c"
        for _ in range(3):
            history._pass(3, confirmed=True)
            history.cluster.step(lambda job, task: SlurmState.COMPLETED)
        applied = history._pass(3, confirmed=True)
        planned = history._look().plan
        assert applied is not None
        assert _moves(planned) == _moves(applied.plan)
        assert history.root is not None
        with Journal(history.root / ".recon" / JOURNAL_FILE) as opened:
            held = [r for r in opened.records(PROJECT) if r.job_id == lost.job_id]
        # c's job is c's: its end is on c's record (adopted), never on a's, whose job was lost
        assert {(r.name, r.final_health) for r in held} >= {("c", Health.SUCCEEDED)}
        assert ("a", Health.SUCCEEDED) not in {(r.name, r.final_health) for r in held}
    finally:
        shutil.rmtree(history.root or "", ignore_errors=True)


@pytest.mark.parametrize("point", fault_points.POINTS)
def test_a_pass_killed_at_each_fault_point_is_recovered(
    tmp_path_factory: pytest.TempPathFactory, point: str
) -> None:
    """Each fault point is reached by a pass of a project with a run, a sweep and an
    allocation (a commit now and then gives it a job to cancel); the pass dies there, and
    the project still converges with one live job per run at most."""
    _scratch.base = tmp_path_factory.mktemp(f"killed-{point}")
    history = History()
    history.project(runs={"a", "d"}, sweep={1, 2})
    history.commit_allocation("declare")
    try:
        reached = False
        for attempt in range(8):
            with killed_at(point) as was_reached:
                history._pass(1)
                reached = was_reached()
            history.one_live_job_per_run_and_spec()
            if reached:
                break
            if attempt % 2 == 0:
                history.commit(name="a", how="change")  # a's pending job is replaced: a cancel
                history.commit_allocation("reshape")  # w's old job is released
            else:
                history.cluster.step(lambda job, task: None)  # pending jobs start
        assert reached, f"no pass reached {point}"
    finally:
        history.teardown()


def test_a_run_in_an_allocation_that_writes_no_output_is_said_so(
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    """A run's step whose command succeeds without writing its declared output fails
    and publishes nothing, and recon says why in the step's own words (its marker is
    named by the step's id, 12.3), not as a bare failure."""
    _scratch.base = tmp_path_factory.mktemp("step-unwritten")
    history = History()
    history.project(runs={"d"}, sweep=set())
    history.commit_allocation("declare")
    specs = allocation_specs(1, 1)
    specs["specs/e.yaml"] = specs["specs/e.yaml"].replace("echo e1 > {outputs.out.path}", "true")
    history.repo.commit(specs)
    assert history.root is not None
    try:
        for _ in range(4):
            history._pass(1)
            history.cluster.step(lambda job, task: SlurmState.COMPLETED)
        with Journal(history.root / ".recon" / JOURNAL_FILE) as opened:
            said = [r.reason for r in opened.records(PROJECT) if r.name == "e" and r.reason]
        assert said and all("completed without its declared outputs: out" in why for why in said)
        assert not (history.root / "runs" / "e" / "out.txt").exists()
    finally:
        shutil.rmtree(history.root, ignore_errors=True)
