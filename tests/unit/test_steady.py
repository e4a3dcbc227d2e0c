"""`recon watch`'s kept passes (engine/steady.py): a timer pass that finds nothing changed
reuses the last one, and is what a full pass would have made.

The project is a real git repo and the journal a real one; the scheduler is a scripted
world that lists the jobs submitted to it in states the test sets, since what is tested
is the engine's loop, not an adapter.
"""

from __future__ import annotations

import gc
import os
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.desired import loader
from reconciler.engine.observe.journal import read_journal
from reconciler.engine.plan import assemble, replan
from reconciler.engine.plan.actions import LookKind, NextLook, Plan
from reconciler.engine.plan.runs import decide as decide_run
from reconciler.engine.reconcile import (
    PassOutcome,
    Request,
    load,
    look,
    reconcile_once,
)
from reconciler.engine.steady import Kept, SteadyPasses, same_plan
from reconciler.errors import ObservationError
from reconciler.scheduler.base import JobRecord, Observation, ObservedJob, SubmitRequest
from reconciler.scheduler.states import SlurmState
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.state.journal import Journal
from reconciler.state.paths import journal_path
from tests.gitrepo import GitRepo

START = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
RUN = (
    "kind: Run\nname: {name}\ncommand: echo {word}\nresources: {{cpus: 1}}\n"
    "outputs:\n  out: out.txt\n"
)


class World:
    """A cluster the test steers: each job submitted to it is listed, pending until the
    test sets its state; a job that completes writes its run's output."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.now = START
        self.requests: dict[str, SubmitRequest] = {}
        self.states: dict[str, SlurmState] = {}
        self.scheduler = ScriptedScheduler(
            observe=self.observe,
            submit=self.submit,
            cancel=self.cancel,
            partitions=ObservationError("no sinfo here: fit unknown"),
        )

    def clock(self) -> datetime:
        return self.now

    def submit(self, request: SubmitRequest) -> str:
        job_id = str(501 + len(self.requests))
        self.requests[job_id] = request
        self.states[job_id] = SlurmState.PENDING
        return job_id

    def cancel(self, job_id: str) -> None:
        self.states[job_id] = SlurmState.CANCELLED

    def set(self, job_id: str, state: SlurmState) -> None:
        self.states[job_id] = state
        if state is SlurmState.COMPLETED:
            request = self.requests[job_id]
            (Path(request.workdir) / "out.txt").write_text(job_id)

    def observe(self, _since: datetime) -> Observation:
        jobs = []
        for job_id, request in self.requests.items():
            state = self.states[job_id]
            ended = state in (SlurmState.COMPLETED, SlurmState.FAILED, SlurmState.CANCELLED)
            record = JobRecord(
                job_id=job_id,
                top_id=job_id,
                tag=request.tag,
                state=state,
                # sacct's: 0:0 for a job that completed or was cancelled
                exit_code=(1 if state is SlurmState.FAILED else 0) if ended else None,
                cancelled_by=os.getuid() if state is SlurmState.CANCELLED else None,
                submit=START,
                start=START if state is not SlurmState.PENDING else None,
                end=START + timedelta(minutes=1) if ended else None,
                source="sacct",
            )
            jobs.append(ObservedJob(job_id=job_id, tag=request.tag, rows=(record,)))
        return Observation(taken_at=self.now, jobs=tuple(jobs), complete=True)


def project(tmp_path: Path, runs: int) -> tuple[GitRepo, World, SteadyPasses]:
    repo = GitRepo(tmp_path / "repo")
    specs = {f"specs/r{i}.yaml": RUN.format(name=f"r{i}", word=i) for i in range(runs)}
    repo.commit({"recon.yaml": "project: steady\n", **specs})
    world = World(repo.root)
    passes = SteadyPasses(
        request=lambda commit: Request(repo.root, commit),
        full=lambda request: reconcile_once(request, scheduler=world.scheduler, clock=world.clock),
        clock=world.clock,
        scheduler=world.scheduler,
    )
    return repo, world, passes


def tip(repo: GitRepo) -> str:
    return repo.git("rev-parse", "HEAD")


def fresh_plan(repo: GitRepo, world: World) -> Any:
    """The plan a full look makes now, writing nothing."""
    request = Request(repo.root, tip(repo))
    desired = load(request)
    return look(request, desired, world.scheduler, read_journal(desired), world.now).plan


def test_a_pass_with_nothing_changed_reuses_the_last_one(tmp_path: Path) -> None:
    repo, world, passes = project(tmp_path, 3)
    passes(tip(repo))  # submits every run
    assert len(world.requests) == 3
    settled = passes(tip(repo))  # the journal changed: a full pass; nothing to do
    assert not settled.plan.has_changes
    world.now += timedelta(seconds=30)
    again = passes(tip(repo))
    assert again is settled
    assert (passes.reused, passes.fulls) == (1, 2)
    assert same_plan(fresh_plan(repo, world), again.plan)


@pytest.mark.parametrize(
    "change",
    ["job state", "journal write", "commit", "next look"],
)
def test_a_change_makes_the_pass_a_full_one(tmp_path: Path, change: str) -> None:
    repo, world, passes = project(tmp_path, 2)
    passes(tip(repo))
    kept = passes(tip(repo))
    assert passes.kept is not None
    world.now += timedelta(seconds=30)
    if change == "job state":
        world.set("501", SlurmState.RUNNING)
    elif change == "journal write":  # another process's: an event, no record changed
        desired = kept.desired
        with Journal(journal_path(desired)) as journal:
            journal.log_event(desired.project.project, "r0", "note", "elsewhere", world.now)
    elif change == "commit":
        repo.commit({"specs/r1.yaml": RUN.format(name="r1", word="changed")})
    else:
        assert passes.kept is not None
        looked = kept.plan.model_copy(update={"next_look": _look_at(world.now)})
        passes.kept = _with_plan(passes.kept, looked)
    passes(tip(repo))
    if change == "commit":  # one run's command: that run planned again, the rest kept
        assert (passes.reused, passes.replanned, passes.fulls) == (0, 1, 2)
    elif change == "job state":  # a job started: its run planned again, the rest kept
        assert (passes.reused, passes.rejobbed, passes.fulls) == (0, 1, 2)
    else:
        assert (passes.reused, passes.fulls) == (0, 3)


def _look_at(at: datetime) -> NextLook:
    return NextLook(at=at, kind=LookKind.GRACE, target="r0", reason="a grace ends")


def _with_plan(kept: Kept, plan: Plan) -> Kept:
    """The kept pass, as if its plan had been ``plan``."""
    assert kept.outcome is not None
    outcome = replace(kept.outcome, look=replace(kept.outcome.look, plan=plan))
    return replace(kept, plan=plan, outcome=outcome)


def test_every_nth_pass_is_a_full_one_and_finds_a_deleted_output(tmp_path: Path) -> None:
    repo, world, passes = project(tmp_path, 2)
    passes.full_every = 3
    passes(tip(repo))
    world.set("501", SlurmState.COMPLETED)
    world.set("502", SlurmState.COMPLETED)
    passes(tip(repo))  # records the ends
    current = passes(tip(repo))
    assert not current.plan.has_changes
    assert passes.reused == 0
    assert passes(tip(repo)) is current
    (Path(world.requests["501"].workdir) / "out.txt").unlink()  # not a timer pass's to see
    assert passes(tip(repo)) is current
    assert passes.reused == 2
    found = passes(tip(repo))  # the third: a full pass
    assert [a.target for a in found.plan.actions if a.changes_cluster] == ["r0"]
    assert passes.mismatches == 0


@contextmanager
def counting_visits() -> Iterator[list[str]]:
    """Each run a pass visits: loaded (its DesiredRun made) or decided, in full or in part
    (engine/plan/replan)."""
    visits: list[str] = []
    made, decide = loader._desired_run, decide_run

    def counted_made(summary: Any, *args: Any) -> Any:
        visits.append(summary.name)
        return made(summary, *args)

    def counted_decide(inputs: Any, run: Any, *args: Any) -> Any:
        visits.append(run.name)
        return decide(inputs, run, *args)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(loader, "_desired_run", counted_made)
        patch.setattr(assemble, "decide", counted_decide)
        patch.setattr(replan, "decide", counted_decide)
        yield visits


@pytest.mark.parametrize("runs", [2, 12])
def test_a_timer_pass_with_nothing_changed_visits_no_run(tmp_path: Path, runs: int) -> None:
    repo, world, passes = project(tmp_path, runs)
    passes(tip(repo))
    passes(tip(repo))
    with counting_visits() as visits:
        passes(tip(repo))
    assert visits == []
    world.set("501", SlurmState.RUNNING)  # one job's news: its run alone planned again
    with counting_visits() as visits:
        passes(tip(repo))
    assert visits == ["r0"]
    world.set("501", SlurmState.COMPLETED)  # an end to record: a full pass, which counts
    with counting_visits() as visits:
        passes(tip(repo))
    assert len(visits) >= runs


# One step of a history: what changes between two passes.
STEPS = st.one_of(
    st.tuples(st.just("wait"), st.integers(1, 600)),
    st.tuples(
        st.just("job"),
        st.integers(0, 2),
        st.sampled_from([SlurmState.RUNNING, SlurmState.COMPLETED, SlurmState.FAILED]),
    ),
    st.tuples(st.just("commit"), st.integers(0, 2)),
    st.tuples(st.just("output"), st.integers(0, 2)),
)


@settings(
    max_examples=12,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(STEPS, min_size=1, max_size=8))
def test_kept_passes_equal_full_ones_over_random_histories(
    tmp_path_factory: pytest.TempPathFactory, history: list[tuple[Any, ...]]
) -> None:
    """After each step, the watch's pass; a kept one must be what a full look makes now,
    except that files changed on disk wait for the next full pass (checked apart)."""
    repo, world, passes = project(tmp_path_factory.mktemp("history"), 3)
    passes.full_every = 4
    commits = 0
    files_changed = False
    for step in history:
        world.now += timedelta(seconds=30)
        if step[0] == "wait":
            world.now += timedelta(seconds=step[1])
        elif step[0] == "job":
            jobs = [
                job for job, request in world.requests.items() if request.tag.name == f"r{step[1]}"
            ]
            if jobs and world.states[jobs[-1]] in (SlurmState.PENDING, SlurmState.RUNNING):
                world.set(jobs[-1], step[2])
        elif step[0] == "commit":
            commits += 1
            repo.commit({f"specs/r{step[1]}.yaml": RUN.format(name=f"r{step[1]}", word=commits)})
        else:
            for request in world.requests.values():
                output = Path(request.workdir) / "out.txt"
                if request.tag.name == f"r{step[1]}" and output.exists():
                    output.unlink()
                    files_changed = True
        before = (passes.reused, passes.rejobbed, passes.replanned)
        outcome = passes(tip(repo))
        if (passes.reused, passes.rejobbed, passes.replanned) == before:
            files_changed = False  # a full pass looked at the files
        elif passes.replanned == before[2] and not files_changed:
            # (a commit's pass may act: test_incremental compares it before it does)
            assert same_plan(fresh_plan(repo, world), outcome.plan)
    assert passes.mismatches == 0


def test_a_kept_plan_unlike_the_fresh_one_is_told_and_the_fresh_one_counts(
    tmp_path: Path,
) -> None:
    repo, world, passes = project(tmp_path, 2)
    told: list[tuple[str, str]] = []
    passes.log = lambda level, event, **_fields: told.append((level, event))
    passes.full_every = 2
    passes(tip(repo))
    fresh = passes(tip(repo))
    kept = passes.kept
    assert kept is not None
    wrong = fresh.plan.model_copy(update={"notes": ("a note no full pass makes",)})
    passes.kept = _with_plan(kept, wrong)
    world.now += timedelta(seconds=30)
    assert passes(tip(repo)).plan is wrong  # kept: reused as it is
    again = passes(tip(repo))  # the second since the full one: a full one, checked
    assert (passes.reused, passes.fulls, passes.mismatches) == (1, 3, 1)
    assert told == [("warning", "steady-mismatch")]
    assert same_plan(again.plan, fresh.plan)


def test_the_kept_state_is_let_go_before_a_full_pass_loads_its_own(tmp_path: Path) -> None:
    """Holding both would double a full pass's peak memory at 100,000 runs."""
    repo, _world, passes = project(tmp_path, 2)
    passes(tip(repo))
    kept = passes(tip(repo))
    assert passes.kept is not None
    kept_desired = weakref.ref(kept.desired)
    del kept
    alive: list[bool] = []
    full = passes.full

    def watched(request: Request) -> PassOutcome:
        alive.append(kept_desired() is not None)
        return full(request)

    passes.full = watched
    repo.commit({"specs/r9.yaml": RUN.format(name="r9", word="new")})  # a run added: full
    gc.disable()  # as during a pass: dropped, not collected
    try:
        passes(tip(repo))
    finally:
        gc.enable()
    assert alive == [False]
