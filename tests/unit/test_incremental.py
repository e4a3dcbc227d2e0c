"""`recon watch`'s pass after a commit, planned in part (engine/incremental.py): the runs
the commit changed and their downstream are planned again, the rest kept; what a fresh
full look makes at that moment is the same plan.

The project is a real git repo with a real journal; the scheduler is test_steady's
scripted world, which lists the jobs submitted to it in the states the test sets.
"""

from __future__ import annotations

import dataclasses
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reconciler.desired import loader
from reconciler.desired.source import changed_files
from reconciler.engine import incremental
from reconciler.engine.plan.actions import Action, ActionKind
from reconciler.engine.plan.causes import Cause
from reconciler.engine.reconcile import Request, reconcile_once
from reconciler.engine.steady import SteadyPasses, same_plan
from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.scheduler.states import SlurmState
from reconciler.state.journal import Journal
from reconciler.state.paths import journal_path
from tests.gitrepo import GitRepo
from tests.unit.test_steady import START, World, counting_visits, fresh_plan, tip

# a -> b -> c (c's command runs train.py, its code); d alone; a sweep `grid` reading d.
PLAIN = (
    "kind: Run\nname: {name}\ncommand: {command}\nresources: {{cpus: 1}}\n"
    "retries: {retries}\n{inputs}outputs:\n  out: out.txt\n"
)
SWEEP = (
    "kind: Run\nname: grid\nmatrix:\n  i: [1, 2]\ncommand: echo {word} {{matrix.i}}\n"
    "resources: {{cpus: 1}}\ninputs:\n  x: d.out\noutputs:\n  out: out.txt\n"
)
# What a history's retries step writes: a number, or budgets per kind (neither hashed).
RETRY_FORMS = ("0", "1", "{failure: 1, timeout: 2, preemption: unlimited}")


class Project:
    """The repo's runs as values: each step changes one and commits the lot."""

    def __init__(self, root: Path) -> None:
        self.repo = GitRepo(root)
        self.words = {"a": "1", "b": "1", "c": "1", "d": "1"}
        self.retries = {"a": "0", "b": "0", "c": "0", "d": "0"}
        self.c_reads = "b"
        self.extra = False  # run e, alone
        self.code = "print(1)\n"
        self.sweep: str | None = None  # the sweep's word, when it is there

    def files(self) -> dict[str, str]:
        upstream = {"a": None, "b": "a", "c": self.c_reads, "d": None}
        files = {"recon.yaml": "project: incremental\n", "train.py": self.code}
        files[".gitignore"] = ".recon/\nruns/\n"
        for name, word in self.words.items():
            command = f"python3 train.py {word}" if name == "c" else f"echo {word}"
            reads = upstream[name]
            inputs = f"inputs:\n  x: {reads}.out\n" if reads else ""
            files[f"specs/{name}.yaml"] = PLAIN.format(
                name=name, command=command, retries=self.retries[name], inputs=inputs
            )
        if self.extra:
            files["specs/e.yaml"] = PLAIN.format(name="e", command="echo e", retries=0, inputs="")
        if self.sweep is not None:
            files["specs/grid.yaml"] = SWEEP.format(word=self.sweep)
        return files

    def commit(self) -> None:
        wanted = self.files()
        for path in ("specs/e.yaml", "specs/grid.yaml"):
            if path not in wanted and (self.repo.root / path).exists():
                self.repo.remove(path)
        self.repo.commit(wanted)


class TickingWorld(World):
    """test_steady's world, whose running jobs' rows say how much time they have left, as
    squeue's do: a running job's rows differ at every pass."""

    def observe(self, since: datetime) -> Observation:
        seen = super().observe(since)
        return seen.model_copy(update={"jobs": tuple(map(self._ticking, seen.jobs))})

    def _ticking(self, job: ObservedJob) -> ObservedJob:
        if self.states[job.job_id] is not SlurmState.RUNNING:
            return job
        left = timedelta(hours=2) - (self.now - START)
        rows = tuple(dataclasses.replace(row, time_left=left) for row in job.rows)
        return ObservedJob(job_id=job.job_id, tag=job.tag, rows=rows)


def watched(tmp_path: Path) -> tuple[Project, World, SteadyPasses]:
    project = Project(tmp_path / "repo")
    project.commit()
    world = TickingWorld(project.repo.root)
    passes = SteadyPasses(
        request=lambda commit: Request(project.repo.root, commit),
        full=lambda request: reconcile_once(request, scheduler=world.scheduler, clock=world.clock),
        clock=world.clock,
        scheduler=world.scheduler,
    )
    return project, world, passes


def finish_all(world: World, state: SlurmState = SlurmState.COMPLETED) -> None:
    for job_id, now in world.states.items():
        if now in (SlurmState.PENDING, SlurmState.RUNNING):
            world.set(job_id, state)


def settled(project: Project, world: World, passes: SteadyPasses) -> None:
    """Every run's job done, its end recorded, and the last pass kept."""
    for _ in range(4):
        finish_all(world)
        world.now += timedelta(seconds=30)
        passes(tip(project.repo))
    assert passes.kept is not None


def test_a_commit_changing_one_run_plans_it_and_its_downstream_again(tmp_path: Path) -> None:
    project, world, passes = watched(tmp_path)
    settled(project, world, passes)
    project.words["a"] = "2"
    project.commit()
    world.now += timedelta(seconds=30)
    fresh = fresh_plan(project.repo, world)
    outcome = passes(tip(project.repo))
    assert (passes.replanned, passes.visited) == (1, 3)  # a, b and c; not d
    actions = {action.target: action for action in outcome.plan.actions}
    assert actions["a"].kind is ActionKind.SUBMIT
    assert actions["b"].kind is ActionKind.MAY_RERUN  # its upstream reruns: downstream follows
    assert actions["c"].cause is Cause.UPSTREAM_RERUN
    assert actions["d"].cause is Cause.CURRENT
    assert same_plan(fresh, outcome.plan)
    assert [request.tag.name for request in world.requests.values()][-3:] == ["a", "b", "c"]


def test_a_commit_that_changes_no_decision_is_kept_and_checked_by_the_next_full_pass(
    tmp_path: Path,
) -> None:
    project, world, passes = watched(tmp_path)
    told: list[str] = []
    passes.log = lambda _level, event, **_fields: told.append(event)
    settled(project, world, passes)
    project.retries["d"] = "{failure: 2, preemption: unlimited}"  # not its identity: nothing to do
    project.commit()
    world.now += timedelta(seconds=30)
    outcome = passes(tip(project.repo))
    assert (passes.replanned, passes.visited) == (1, 1)
    assert not outcome.plan.has_changes
    assert passes.kept is not None and passes.kept.replanned
    world.now += timedelta(seconds=30)
    assert passes(tip(project.repo)) is outcome  # then reused by a timer pass
    passes.full_every = 1  # the next pass a full one: checked against the kept plan
    world.now += timedelta(seconds=30)
    passes(tip(project.repo))
    assert passes.mismatches == 0 and told == []


@pytest.mark.parametrize(
    "change",
    ["recon.yaml", "code", "inputs", "run added", "two docs"],
)
def test_a_change_that_is_not_one_runs_own_makes_a_full_pass(tmp_path: Path, change: str) -> None:
    project, world, passes = watched(tmp_path)
    settled(project, world, passes)
    fulls = passes.fulls
    if change == "recon.yaml":
        project.repo.commit({"recon.yaml": "project: incremental\nprune_limit: 5\n"})
    else:
        if change == "code":  # c's command runs it: c's code changed
            project.code = "print(2)\n"
        elif change == "inputs":
            project.c_reads = "a"
        elif change == "run added":
            project.extra = True
        else:  # a file holding two runs: a and b moved together
            project.words["a"] = "2"
        project.commit()
        if change == "two docs":
            files = project.files()
            project.repo.remove("specs/b.yaml")
            both = files["specs/a.yaml"] + "---\n" + files["specs/b.yaml"]
            project.repo.commit({"specs/a.yaml": both})
    world.now += timedelta(seconds=30)
    fresh = fresh_plan(project.repo, world)
    outcome = passes(tip(project.repo))
    assert (passes.replanned, passes.fulls) == (0, fulls + 1)
    assert same_plan(fresh, outcome.plan)


@pytest.mark.parametrize("others", [0, 30])
def test_a_one_run_commit_visits_that_run_and_its_downstream_only(
    tmp_path: Path, others: int
) -> None:
    """However many other runs the project has: O(changed + downstream), not O(all)."""
    project, world, passes = watched(tmp_path)
    more = {
        f"specs/o{i}.yaml": PLAIN.format(name=f"o{i}", command=f"echo {i}", retries=0, inputs="")
        for i in range(others)
    }
    project.repo.commit(more)
    settled(project, world, passes)
    project.words["b"] = "2"
    project.commit()
    world.now += timedelta(seconds=30)
    with counting_visits() as visits:
        passes(tip(project.repo))
    assert passes.replanned == 1
    assert sorted(visits) == ["b", "b", "c"]  # b loaded and decided; c decided


# One step of a history: what changes between two passes.
COMMAND = st.tuples(st.just("command"), st.sampled_from("abcd"))
SETTLE = st.tuples(st.just("finish"), st.just(SlurmState.COMPLETED))
STEPS = st.one_of(
    COMMAND,  # a run's own change, and its jobs done: the most common, listed more than once
    COMMAND,
    COMMAND,
    SETTLE,
    SETTLE,
    st.tuples(st.just("retries"), st.sampled_from("abcd")),
    st.tuples(st.just("code")),
    st.tuples(st.just("inputs")),
    st.tuples(st.just("extra")),
    st.tuples(st.just("finish"), st.sampled_from([SlurmState.COMPLETED, SlurmState.FAILED])),
    st.tuples(st.just("run"), st.sampled_from("abcd")),
    st.tuples(st.just("run"), st.sampled_from("abcd")),
    st.tuples(st.just("wait"), st.integers(1, 600)),
    st.tuples(st.just("output"), st.sampled_from("abcd")),
)


@settings(
    max_examples=30,
    derandomize=True,  # the same histories in every run: 36 commit and 33 jobs passes
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(history=st.lists(STEPS, min_size=1, max_size=14))
def test_passes_planned_in_part_equal_full_ones_over_random_histories(
    tmp_path_factory: pytest.TempPathFactory, history: list[tuple[Any, ...]]
) -> None:
    """After each step, the watch's pass; one planned in part must make the plan a fresh
    full look makes at that moment (files changed on disk aside: those wait for a full
    pass, as in a kept timer pass)."""
    project, world, passes = watched(tmp_path_factory.mktemp("history"))
    settled(project, world, passes)
    passes.full_every = 5
    files_changed = False
    for count, step in enumerate(history, start=1):
        world.now += timedelta(seconds=30)
        kind = step[0]
        if kind == "command":
            project.words[step[1]] = f"v{count}"  # never the word it had
        elif kind == "retries":
            project.retries[step[1]] = RETRY_FORMS[count % len(RETRY_FORMS)]
        elif kind == "code":
            project.code = f"print({count})\n"
        elif kind == "inputs":
            project.c_reads = "a" if project.c_reads == "b" else "b"
        elif kind == "extra":
            project.extra = not project.extra
        elif kind == "finish":  # and the pass that records the ends
            finish_all(world, step[1])
            passes(tip(project.repo))
            world.now += timedelta(seconds=30)
        elif kind == "run":
            for job_id, request in world.requests.items():
                if request.tag.name == step[1] and world.states[job_id] is SlurmState.PENDING:
                    world.set(job_id, SlurmState.RUNNING)
        elif kind == "wait":
            world.now += timedelta(seconds=step[1])
        else:
            for request in world.requests.values():
                output = Path(request.workdir) / "out.txt"
                if request.tag.name == step[1] and output.exists():
                    output.unlink()
                    files_changed = True
        if kind in ("command", "retries", "code", "inputs", "extra"):
            project.commit()
        for _ in range(2):  # the step's pass, and the next one 30 s on (running jobs tick)
            fresh = fresh_plan(project.repo, world)
            before = (passes.replanned, passes.reused, passes.rejobbed)
            outcome = passes(tip(project.repo))
            if (passes.replanned, passes.reused, passes.rejobbed) == before:
                files_changed = False  # a full pass looked at the files
            elif not files_changed:
                assert same_plan(fresh, outcome.plan), (kind, fresh.summary, outcome.plan.summary)
            world.now += timedelta(seconds=30)
    assert passes.mismatches == 0


def loaded(project: Project) -> Any:
    return loader.load_desired(loader.open_source(project.repo.root, tip(project.repo)))


def same_runs(one: Any, other: Any) -> bool:
    """Two desired states alike in every run: name, hash, shape, code, location."""
    return (
        list(one.runs) == list(other.runs)
        and all(
            (run.spec_hash, run.shape, dict(run.code), run.location, run.spec)
            == (twin.spec_hash, twin.shape, dict(twin.code), twin.location, twin.spec)
            for run, twin in ((one.runs[name], other.runs[name]) for name in one.runs)
        )
        and one.upstreams == other.upstreams
    )


@pytest.mark.parametrize(
    "change",
    ["command", "retries", "comment", "sweep changed", "sweep added", "sweep's input", "code"],
)
def test_a_reload_is_a_fresh_load_or_nothing(tmp_path: Path, change: str) -> None:
    """``loader.reload`` makes what a full load makes, or says it cannot (None)."""
    project = Project(tmp_path / "repo")
    project.sweep = "1"
    project.commit()
    before = loaded(project)
    if change == "command":
        project.words["b"] = "2"
    elif change == "retries":
        project.retries["d"] = "1"
    elif change == "sweep changed":
        project.sweep = "2"
    elif change == "sweep added":
        project.sweep = None
        project.commit()
        before = loaded(project)
        project.sweep = "1"
    elif change == "sweep's input":  # d feeds the sweep: d planned again, members with it
        project.words["d"] = "2"
    elif change == "code":
        project.code = "print(3)\n"
    if change == "comment":
        project.repo.commit({"specs/a.yaml": project.files()["specs/a.yaml"] + "# a note\n"})
    else:
        project.commit()
    old = before.commit
    changes = changed_files(project.repo.root, old, tip(project.repo))
    assert changes is not None
    made = loader.reload(before, tip(project.repo), changes)
    fresh = loaded(project)
    if change in ("sweep changed", "sweep added", "code"):
        assert made is None
        return
    assert made is not None
    assert same_runs(made.desired, fresh)
    expected = {"command": {"b"}, "retries": {"d"}, "comment": set(), "sweep's input": {"d"}}
    assert made.changed == expected[change]


@pytest.mark.parametrize("news", ["journal write", "job state", "fault"])
def test_a_commit_with_other_news_or_a_fault_makes_a_full_pass(tmp_path: Path, news: str) -> None:
    project, world, passes = watched(tmp_path)
    told: list[str] = []
    passes.log = lambda _level, event, **_fields: told.append(event)
    settled(project, world, passes)
    project.words["a"] = "2"
    project.commit()
    world.now += timedelta(seconds=30)
    if news == "journal write":  # another process's: an event, no record changed
        kept = passes.kept
        assert kept is not None and kept.outcome is not None
        desired = kept.outcome.desired
        with Journal(journal_path(desired)) as journal:
            journal.log_event(desired.project.project, "a", "note", "elsewhere", world.now)
    elif news == "job state":  # a job the scheduler now shows that it did not
        world.submit(world.requests["501"])
    fresh = fresh_plan(project.repo, world)
    with pytest.MonkeyPatch.context() as patch:
        if news == "fault":
            patch.setattr(incremental, "replan", _broken)
        outcome = passes(tip(project.repo))
    assert (passes.replanned, passes.fulls) == (0, 4)
    assert same_plan(fresh, outcome.plan)
    assert told == (["replan-failed"] if news == "fault" else [])


def _broken(*_args: Any) -> None:
    raise RuntimeError("a fault of the part-planning's")


def a_changed_and_sent(project: Project, world: World, passes: SteadyPasses) -> str:
    """Run a's command changed and its new job sent, recorded, then kept: the job's id."""
    settled(project, world, passes)
    project.words["a"] = "2"
    project.commit()
    for _ in range(3):  # a's new job and its downstream sent, recorded, then kept
        world.now += timedelta(seconds=30)
        passes(tip(project.repo))
    return next(job for job, request in reversed(world.requests.items()) if request.tag.name == "a")


def test_a_timer_pass_whose_jobs_changed_plans_their_runs_again(tmp_path: Path) -> None:
    """A job started, then its rows changed (its time left): each a timer pass planned in
    part, the same plan as a fresh look's; its end is recorded by a full pass."""
    project, world, passes = watched(tmp_path)
    job = a_changed_and_sent(project, world, passes)
    assert passes.kept is not None
    world.set(job, SlurmState.RUNNING)
    for _ in range(2):  # started, then its time left moved on
        world.now += timedelta(seconds=30)
        fresh = fresh_plan(project.repo, world)
        before = passes.rejobbed
        outcome = passes(tip(project.repo))
        assert passes.rejobbed == before + 1
        assert same_plan(fresh, outcome.plan)
        assert outcome.plan.next_look is not None and outcome.plan.next_look.target == "a"
    world.set(job, SlurmState.COMPLETED)
    world.now += timedelta(seconds=30)
    fulls = passes.fulls
    passes(tip(project.repo))
    assert passes.fulls == fulls + 1


def test_a_timer_pass_whose_jobs_changed_walks_the_plan_once(tmp_path: Path) -> None:
    """At 100,000 runs, a timer pass while a job runs (its time left changes at every
    pass) is a re-plan of that run and its downstream plus a few walks over every run;
    each walk more is a tenth of its CPU. Asking whether the plan has work walks the
    actions (``Action.changes_cluster``, each): once per pass, not once per check."""
    project, world, passes = watched(tmp_path)
    job = a_changed_and_sent(project, world, passes)
    world.set(job, SlurmState.RUNNING)
    asked: list[str] = []  # each action asked whether it changes the cluster
    changes = Action.changes_cluster

    def counted(action: Action) -> bool:
        asked.append(action.target)
        return bool(changes.__get__(action))

    for _ in range(2):  # started, then its time left moved on
        world.now += timedelta(seconds=30)
        asked.clear()
        with counting_visits() as visits, pytest.MonkeyPatch.context() as patch:
            patch.setattr(Action, "changes_cluster", property(counted))
            before = passes.rejobbed
            outcome = passes(tip(project.repo))
        assert passes.rejobbed == before + 1
        assert sorted(visits) == ["a", "b", "c"]  # decided again: a and its downstream
        assert len(outcome.plan.actions) == 4
        assert sorted(asked) == ["a", "b", "c", "d"]  # one walk


def test_a_commit_while_a_job_runs_plans_both_changes_in_part(tmp_path: Path) -> None:
    """On Slurm a running job's rows change at every pass: a commit's pass then plans the
    changed runs and those of the jobs that changed, and their downstream."""
    project, world, passes = watched(tmp_path)
    job = a_changed_and_sent(project, world, passes)
    world.set(job, SlurmState.RUNNING)
    world.now += timedelta(seconds=30)
    passes(tip(project.repo))  # a started: a jobs pass, kept
    project.retries["d"] = "{timeout: 1}"
    project.commit()
    world.now += timedelta(seconds=30)  # a's time left moved on meanwhile
    fresh = fresh_plan(project.repo, world)
    replanned = passes.replanned
    outcome = passes(tip(project.repo))
    assert (passes.replanned, passes.visited) == (replanned + 1, 4)  # a, b, c; d
    assert same_plan(fresh, outcome.plan)
