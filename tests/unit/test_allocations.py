"""The allocation planner on plain values: which jobs are reused, renewed, set up or
released, where runs inside allocations start, and what they wait for."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import timedelta
from typing import Any

import pytest

from reconciler.desired.desired import (
    Desired,
    DesiredAllocation,
    Location,
    effective_allocation,
    spec_hash,
)
from reconciler.desired.models import Allocation, NodeShape, Project, Run, RunResources
from reconciler.engine.ledger.status import allocation_statuses
from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import Action, ActionKind
from reconciler.engine.plan.allocation_state import AllocationState, Ready
from reconciler.engine.plan.allocations.placement import (
    Placement,
    beyond_allocation,
    place,
    renewals,
)
from reconciler.engine.plan.allocations.state import plan_allocations, prunes
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.guards import PruneCause, PruneGuard
from reconciler.engine.plan.inputs import FileState, PlanInputs
from reconciler.scheduler.base import JobRecord, Launch, Observation, ObservedJob
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.state.records import SetupRecord, SubmissionRecord, SubmissionStatus
from tests import planning
from tests.planning import NOW, PROJECT, run

RUNNING, PENDING = SlurmState.RUNNING, SlurmState.PENDING
OTHER_HASH = "ffffffffffffffff"


def allocation(name: str = "warm", **fields: Any) -> DesiredAllocation:
    data: dict[str, Any] = {"kind": "Allocation", "name": name, "time_limit": "1h"}
    data.update(fields)
    project = Project.model_validate({"project": PROJECT})
    spec = effective_allocation(Allocation.model_validate(data), project)
    return DesiredAllocation(spec, Location("specs/w.yaml", 1), spec_hash(spec))


WARM = allocation()
SET_UP = allocation(setup=["pip install x"])
NO_RETRY = allocation(setup=["pip install x"], setup_retries=0)


def tag(of: DesiredAllocation, spec: str | None = None) -> Tag:
    return Tag(
        project=PROJECT,
        deployment="0123456789ab",
        kind="alloc",
        name=of.name,
        spec_hash=spec or of.spec_hash,
    )


def run_tag(name: str) -> Tag:
    return Tag(
        project=PROJECT,
        deployment="0123456789ab",
        kind="run",
        name=name,
        spec_hash="0123456789abcdef",
    )


def step(job_id: str, state: SlurmState, name: Tag, exit_code: int | None = None) -> JobRecord:
    top, _, number = job_id.partition(".")
    return JobRecord(
        job_id=job_id,
        top_id=top,
        step=number,
        name=name.format(),
        state=state,
        exit_code=exit_code,
        source="sacct",
    )


def held(
    job_id: str,
    state: SlurmState = RUNNING,
    left: int | None = 50,
    of: DesiredAllocation = WARM,
    spec: str | None = None,
    steps: tuple[JobRecord, ...] = (),
    reason: str | None = None,
) -> ObservedJob:
    """An allocation job; `left` in minutes."""
    own = tag(of, spec)
    row = JobRecord(
        job_id=job_id,
        top_id=job_id,
        tag=own,
        state=state,
        reason=reason,
        nodes="cpu1" if state is RUNNING else None,
        time_left=timedelta(minutes=left) if left is not None and state is RUNNING else None,
        source="squeue",
    )
    return ObservedJob(job_id=job_id, tag=own, rows=(row, *steps))


def setup_record(job_id: str, of: DesiredAllocation = SET_UP, **fields: Any) -> SetupRecord:
    data: dict[str, Any] = {
        "id": int(job_id),
        "project": PROJECT,
        "name": of.name,
        "spec_hash": of.spec_hash,
        "allocation_job": job_id,
        "step_id": None,
        "created_at": NOW - timedelta(minutes=1),
        "updated_at": NOW,
    }
    data.update(fields)
    return SetupRecord.model_validate(data)


def alloc_record(job_id: str, of: DesiredAllocation = WARM, **fields: Any) -> SubmissionRecord:
    data: dict[str, Any] = {
        "id": int(job_id.replace(".", "")),
        "project": PROJECT,
        "kind": "alloc",
        "name": of.name,
        "spec_hash": of.spec_hash,
        "commit": None,
        "job_id": job_id,
        "status": SubmissionStatus.SUBMITTED,
        "created_at": NOW - timedelta(minutes=1),
        "updated_at": NOW,
    }
    data.update(fields)
    return SubmissionRecord(**data)


@dataclass(frozen=True)
class Cluster:
    """What a case observes and the journal holds, made into the planner's inputs by
    ``inputs``."""

    jobs: tuple[ObservedJob, ...] = ()
    complete: bool = True
    records: tuple[SubmissionRecord, ...] = ()
    setups: tuple[SetupRecord, ...] = ()
    backend: str = "slurm"
    containers: frozenset[str] | None = None
    prune: bool = True

    def inputs(self) -> PlanInputs:
        problems = () if self.complete else ("sacct failed",)
        observation = Observation(
            taken_at=NOW, jobs=self.jobs, complete=self.complete, problems=problems
        )
        return PlanInputs.of(
            planning.desired(prune=self.prune),
            observation,
            self.records,
            NOW,
            files=FileState(),
            fit=None,
            replace=frozenset(),
            scheduler=self.backend,
            setups=self.setups,
            containers=self.containers,
        )


def cluster(*jobs: ObservedJob, **fields: Any) -> Cluster:
    return Cluster(jobs, **fields)


def decided(actions: list[Action]) -> list[tuple[str, tuple[str, ...], Cause, str]]:
    return [(a.kind.value, a.job_ids, a.cause, a.reason) for a in actions]


@dataclass(frozen=True)
class Case:
    name: str
    cluster: Cluster
    # kind, job ids, cause, and part of the reason (what it tells: job ids, time left)
    expected: list[tuple[str, tuple[str, ...], Cause, str]]
    of: DesiredAllocation = WARM
    ready: str | None = None  # the job runs start in
    blocked: bool = False
    extra: dict[str, Any] = field(default_factory=dict)


RUN_STEP = step("12.3", RUNNING, run_tag("train"))
CASES = [
    Case("none held", cluster(), [("submit", (), Cause.NONE_HELD, "none held")]),
    Case(
        "running with time to spare is reused",
        cluster(held("12", left=50)),
        [("reuse", (), Cause.READY, "allocation job 12 on cpu1, 50m left")],
        ready="12",
    ),
    Case(
        "no time limit shown is reused",
        cluster(held("12", left=None)),
        [("reuse", (), Cause.READY, "allocation job 12 on cpu1 (reused while")],
        ready="12",
    ),
    Case(
        "expiring and idle: renewed, then released",
        cluster(held("12", left=4)),
        [
            ("replace", (), Cause.RENEW, "renewed: job 12 has 4m left"),
            ("cancel", ("12",), Cause.RENEW, "expiring"),
        ],
    ),
    Case(
        "expiring with a run in it: renewed, released once its step ends",
        cluster(held("12", left=4, steps=(RUN_STEP,))),
        [
            ("replace", (), Cause.RENEW, "renewed"),
            (
                "no-op",
                (),
                Cause.RENEW,
                "(expiring (4m left)) released once step 12.3 (run train) ends",
            ),
        ],
    ),
    Case(
        "spec changed, old one busy: the new one is used, the old one waits for its step",
        cluster(held("12", spec=OTHER_HASH, steps=(RUN_STEP,)), held("13")),
        [
            ("reuse", (), Cause.READY, "job 13"),
            ("no-op", (), Cause.SPEC_CHANGED, "(allocation spec changed) released once"),
        ],
        ready="13",
    ),
    Case(
        "spec changed, old one idle: allocated anew, old one released",
        cluster(held("12", spec=OTHER_HASH)),
        [
            ("replace", (), Cause.SPEC_CHANGED, "spec changed"),
            ("cancel", ("12",), Cause.SPEC_CHANGED, "allocation spec changed"),
        ],
    ),
    Case(
        "a step the journal knows and sacct does not show yet keeps the old one",
        cluster(
            held("12", spec=OTHER_HASH),
            held("13"),
            records=(
                alloc_record("12.4", kind="run", name="train", spec_hash="0123456789abcdef"),
                alloc_record("12.2", kind="run", name="done", final_health=Health.SUCCEEDED),
            ),
            setups=(setup_record("12", of=WARM, step_id="12.0"),),
        ),
        [
            ("reuse", (), Cause.READY, "job 13"),
            (
                "no-op",
                (),
                Cause.SPEC_CHANGED,
                "released once steps 12.4 (run train), 12.0 (setup) end",
            ),
        ],
        ready="13",
    ),
    Case(
        "a pending old spec is released at once",
        cluster(held("12", PENDING, spec=OTHER_HASH), held("13")),
        [
            ("reuse", (), Cause.READY, "job 13"),
            ("cancel", ("12",), Cause.SPEC_CHANGED, "spec changed"),
        ],
        ready="13",
    ),
    Case(
        "queued: waited for",
        cluster(held("12", PENDING, reason="Resources")),
        [("no-op", (), Cause.IN_PROGRESS, "allocation job 12 is queued (Resources)")],
    ),
    Case(
        "two ready: the newest is used, the older released",
        cluster(held("12", left=40), held("13", left=59)),
        [
            ("reuse", (), Cause.READY, "job 13"),
            ("cancel", ("12",), Cause.SUPERSEDED, "superseded by job 13"),
        ],
        ready="13",
    ),
    Case(
        "a renewal on its way keeps the ready one in use",
        cluster(held("12", left=20), held("13", PENDING)),
        [("reuse", (), Cause.READY, "job 12")],
        ready="12",
    ),
    Case(
        "setup never started: started",
        cluster(held("12")),
        [("setup", ("12",), Cause.SETUP, "setup starts in allocation job 12 (1 command)")],
        of=SET_UP,
    ),
    Case(
        "setup running: waited for",
        cluster(held("12", of=SET_UP, steps=(step("12.0", RUNNING, tag(SET_UP)),))),
        [("no-op", (), Cause.IN_PROGRESS, "setup runs in allocation job 12 (step 12.0)")],
        of=SET_UP,
    ),
    Case(
        "setup started but not listed yet: waited for",
        cluster(held("12", of=SET_UP), setups=(setup_record("12"),)),
        [("no-op", (), Cause.IN_PROGRESS, "setup runs in allocation job 12")],
        of=SET_UP,
    ),
    Case(
        "setup started long ago and never seen: started again",
        cluster(
            held("12", of=SET_UP),
            setups=(setup_record("12", created_at=NOW - timedelta(hours=1)),),
        ),
        [("setup", ("12",), Cause.SETUP, "setup starts")],
        of=SET_UP,
    ),
    Case(
        "setup done: reused",
        cluster(held("12", of=SET_UP, steps=(step("12.0", SlurmState.COMPLETED, tag(SET_UP)),))),
        [("reuse", (), Cause.READY, "job 12")],
        of=SET_UP,
        ready="12",
    ),
    Case(
        "setup failed: tried again in a new job, and the job released",
        cluster(held("12", of=SET_UP, steps=(step("12.0", SlurmState.FAILED, tag(SET_UP), 2),))),
        [
            (
                "replace",
                (),
                Cause.SETUP_RETRY,
                "setup is tried again; setup failed in job 12, 1 try left",
            ),
            ("cancel", ("12",), Cause.SETUP_FAILED, "its setup failed"),
        ],
        of=SET_UP,
    ),
    Case(
        "setup failed with no retries: blocked, and the job released",
        cluster(
            held("12", of=NO_RETRY, steps=(step("12.0", SlurmState.FAILED, tag(NO_RETRY), 2),))
        ),
        [
            (
                "blocked",
                (),
                Cause.SETUP_FAILED,
                "setup failed in allocation job 12: step 12.0 failed (exit 2), 1 of 1 tries "
                "failed; fix",
            ),
            ("cancel", ("12",), Cause.SETUP_FAILED, "its setup failed"),
        ],
        of=NO_RETRY,
        blocked=True,
    ),
    Case(
        "a retry's new job says which try its setup is",
        cluster(
            held("13", of=SET_UP),
            setups=(setup_record("9", final_health=Health.FAILED, exit_code=1),),
        ),
        [("setup", ("13",), Cause.SETUP, "(1 command); setup failed in job 9, 1 try left")],
        of=SET_UP,
    ),
    Case(
        "one setup failure the journal remembers: allocated again",
        cluster(setups=(setup_record("9", final_health=Health.FAILED, exit_code=1),)),
        [("submit", (), Cause.NONE_HELD, "none held; setup failed in job 9, 1 try left")],
        of=SET_UP,
    ),
    Case(
        "as many failures as tries: allocating the same spec again is blocked",
        cluster(
            setups=(
                setup_record("9", final_health=Health.FAILED, exit_code=1),
                setup_record("10", final_health=Health.FAILED, exit_code=1),
            )
        ),
        [
            (
                "blocked",
                (),
                Cause.SETUP_FAILED,
                "setup failed in allocation job 10: failed (exit 1), 2 of 2 tries",
            )
        ],
        of=SET_UP,
        blocked=True,
    ),
    Case(
        "a setup cancelled with its allocation is no failure",
        cluster(setups=(setup_record("9", final_health=Health.CANCELLED),)),
        [("submit", (), Cause.NONE_HELD, "none held")],
        of=SET_UP,
    ),
    Case(
        "the local backend cannot hold one",
        cluster(backend="local"),
        [
            (
                "blocked",
                (),
                Cause.UNSUPPORTED,
                "skipped on the local backend, which holds no allocations",
            )
        ],
        blocked=True,
    ),
    Case(
        "a container without pyxis is refused",
        cluster(containers=frozenset()),
        [("blocked", (), Cause.UNSUPPORTED, "container ubuntu:22.04 needs pyxis")],
        of=allocation(container={"image": "ubuntu:22.04"}),
        blocked=True,
    ),
    Case(
        "container options this pyxis does not offer are refused",
        cluster(containers=frozenset({"image", "workdir"})),
        [
            (
                "blocked",
                (),
                Cause.UNSUPPORTED,
                "container writable needs pyxis's --container-writable, which "
                "this cluster's srun does not offer (srun --help)",
            )
        ],
        of=allocation(container={"image": "ubuntu:22.04", "writable": True, "workdir": "/w"}),
        blocked=True,
    ),
    Case(
        "container options this pyxis offers are allocated",
        cluster(containers=frozenset({"image", "writable", "workdir"})),
        [("submit", (), Cause.NONE_HELD, "none held")],
        of=allocation(container={"image": "ubuntu:22.04", "writable": True, "workdir": "/w"}),
    ),
    Case(
        "a container where pyxis is, or was not looked for, is allocated",
        cluster(containers=None),
        [("submit", (), Cause.NONE_HELD, "none held")],
        of=allocation(container={"image": "ubuntu:22.04"}),
    ),
    Case(
        "made a moment ago and not listed yet: not made again",
        cluster(records=(alloc_record("12"),)),
        [
            (
                "no-op",
                (),
                Cause.NOT_SEEN_YET,
                "allocation job 12 was made but Slurm does not list it yet",
            )
        ],
    ),
    Case(
        "made long ago and not listed: made again",
        cluster(records=(alloc_record("12", created_at=NOW - timedelta(hours=1)),)),
        [("submit", (), Cause.NONE_HELD, "none held")],
    ),
    Case(
        "an incomplete observation releases nothing",
        cluster(held("12", spec=OTHER_HASH), held("13"), complete=False),
        [
            ("reuse", (), Cause.READY, "job 13"),
            ("no-op", (), Cause.SPEC_CHANGED, "released once the cluster can be fully"),
        ],
        ready="13",
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_allocation_decisions(case: Case) -> None:
    jobs = tuple(
        job if job.tag.name != "warm" or case.of is WARM else _as(job, case.of)
        for job in case.cluster.jobs
    )
    actions, states = plan_allocations(replace(case.cluster, jobs=jobs).inputs(), [case.of])
    got = decided(actions)
    assert [what[:3] for what in got] == [what[:3] for what in case.expected], got
    for (*_, reason), (*_, part) in zip(got, case.expected, strict=True):
        assert part in reason, (reason, part)
    assert all(a.target == case.of.name and a.target_kind == "alloc" for a in actions)
    state = states[case.of.name]
    assert (state.ready.job_id if state.ready else None) == case.ready
    assert (state.blocked is not None) == case.blocked


def _as(job: ObservedJob, of: DesiredAllocation) -> ObservedJob:
    """The job under another allocation's current hash (cases built on WARM's)."""
    if job.tag.spec_hash != WARM.spec_hash:
        return job
    own = tag(of)
    rows = tuple(replace(row, tag=own) if not row.is_step else row for row in job.rows)
    return ObservedJob(job_id=job.job_id, tag=own, rows=rows)


# -- orphans and allocations that left the repo ----------------------------------------


@pytest.mark.parametrize(
    ("known", "prune", "complete", "expected"),
    [
        (True, True, True, [("cancel", ("12",), Cause.PRUNE)]),
        (True, False, True, []),
        (False, False, True, [("cancel", ("12",), Cause.ORPHAN)]),
        (False, True, False, []),
    ],
)
def test_undeclared_allocations_are_released(
    known: bool, prune: bool, complete: bool, expected: list[tuple[str, tuple[str, ...], Cause]]
) -> None:
    records = (alloc_record("12"),) if known else ()
    seen = cluster(held("12"), records=records, prune=prune, complete=complete)
    found = prunes(seen.inputs(), declared=set())
    assert [what[:3] for what in decided(found)] == expected


def test_an_undeclared_allocation_with_a_running_step_waits_for_it() -> None:
    (action,) = prunes(cluster(held("12", steps=(RUN_STEP,))).inputs(), declared=set())
    assert (action.kind, action.cause) == (ActionKind.NOOP, Cause.ORPHAN)
    assert "released once step 12.3 (run train) ends" in action.reason


def _guard(state: Desired, *jobs: ObservedJob) -> PruneGuard | None:
    observation = Observation(taken_at=NOW, jobs=jobs, complete=True)
    records = [_known(job) for job in jobs]
    return plan(state, observation, records, NOW, scheduler="slurm").prune_guard


def test_an_allocation_that_left_counts_for_the_prune_guard() -> None:
    """Releasing the project's only live job, an allocation, of a commit that declares
    nothing is held; one waiting for its step to end is not released yet; an orphan
    released with prune off is no prune."""
    assert _guard(desired(allocations=()), held("12")) == PruneGuard(
        cause=PruneCause.EMPTY, cancels=1, live=1, limit="50%", allowed=0, runs=("warm",)
    )
    assert _guard(desired(allocations=()), held("12", steps=(RUN_STEP,))) is None
    # An orphaned allocation found with no journal record, runs still declared: released.
    orphan = held("12")
    observation = Observation(taken_at=NOW, jobs=(orphan,), complete=True)
    result = plan(desired(run("a"), allocations=()), observation, [], NOW, scheduler="slurm")
    assert result.count(ActionKind.CANCEL) == 1 and not result.held
    without_prune = planning.desired(prune=False)
    observation = Observation(taken_at=NOW, jobs=(held("12"),), complete=True)
    result = plan(without_prune, observation, [], NOW, scheduler="slurm")
    assert result.count(ActionKind.CANCEL) == 1 and result.prune_guard is None


def test_declared_and_ended_allocations_are_not_pruned() -> None:
    ended = held("13", SlurmState.TIMEOUT)
    assert prunes(cluster(held("12"), ended).inputs(), declared={"warm"}) == []
    assert prunes(cluster(ended).inputs(), declared=set()) == []


def test_the_inputs_index_allocations_once_and_keep_the_indexes_with_their_states() -> None:
    """The project's allocation jobs and the journal's records are grouped once per plan,
    beside the runs' (another project's job and a run's record stay out); adding the
    allocations' states builds nothing again."""
    others = Tag(project="q", deployment="0123456789ab", kind="alloc", name="warm",
                 spec_hash=WARM.spec_hash)  # fmt: skip
    theirs = ObservedJob(job_id="14", tag=others, rows=(replace(held("14").rows[0], tag=others),))
    step_record = replace(alloc_record("12"), id=99, kind="run", name="train", job_id="12.3")
    seen = cluster(held("12"), held("13"), theirs, records=(alloc_record("12"), step_record))
    planned = seen.inputs()
    assert [job.job_id for job in planned.allocation_jobs("warm")] == ["12", "13"]
    assert [r.job_id for r in planned.allocation_history("warm")] == ["12"]
    assert [r.name for r in planned.step_records("12")] == ["train"]
    _, states = plan_allocations(planned, [WARM])
    with_states = planned.with_allocations(states)
    assert with_states.allocation_states == states
    assert with_states.jobs_by_allocation is planned.jobs_by_allocation
    assert with_states.history_by_run is planned.history_by_run


# -- where a run starts ------------------------------------------------------------------

HOUR = timedelta(hours=1)
READY = AllocationState(name="warm", time_limit=HOUR, ready=Ready("12", timedelta(minutes=12)))


@pytest.mark.parametrize(
    ("state", "needs", "expected"),
    [
        (READY, timedelta(minutes=10), Placement(job_id="12")),
        (READY, None, Placement(job_id="12")),
        (
            READY,
            timedelta(minutes=30),
            Placement(
                wait="waits for allocation warm's renewal: needs 30m, 12m left in job 12",
                renew=True,
            ),
        ),
        (
            replace(READY, coming=True),
            timedelta(minutes=30),
            Placement(wait="waits for allocation warm's renewal: needs 30m, 12m left in job 12"),
        ),
        (
            READY,
            timedelta(hours=2),
            Placement(blocked="needs 2h, but allocation warm lives 1h (time_limit)"),
        ),
        (
            AllocationState(name="warm", time_limit=HOUR, waiting="allocation job 13 is queued"),
            None,
            Placement(wait="waits for allocation warm: allocation job 13 is queued"),
        ),
        (
            AllocationState(name="warm", time_limit=HOUR, blocked="setup failed"),
            None,
            Placement(blocked="allocation warm is blocked: setup failed"),
        ),
    ],
)
def test_place(state: AllocationState, needs: timedelta | None, expected: Placement) -> None:
    assert place(state, needs, RunResources()) == expected


def test_renewals_only_where_runs_wait_and_nothing_is_on_its_way() -> None:
    states = {
        "warm": READY,
        "busy": replace(READY, name="busy", coming=True),
        "idle": replace(READY, name="idle"),
    }
    desired = {"warm": WARM, "busy": allocation("busy"), "idle": allocation("idle")}
    needs = {"warm": [("a", timedelta(minutes=20)), ("b", timedelta(minutes=30))], "busy": [
        ("c", timedelta(minutes=30))
    ]}  # fmt: skip
    (action,) = renewals(states, needs, desired)
    assert (action.kind, action.target, action.target_kind) == (ActionKind.REPLACE, "warm", "alloc")
    assert action.reason == "allocation renewed early: run b needs 30m, job 12 has 12m left"
    assert action.spec_hash == WARM.spec_hash


# -- runs inside allocations, through the whole planner ----------------------------------


def desired(*runs: Run, allocations: tuple[DesiredAllocation, ...] = (WARM,)) -> Desired:
    return planning.desired(*runs, allocations=allocations)


def step_job(state: Desired, name: str, job_id: str, slurm: SlurmState) -> ObservedJob:
    own = Tag(
        project=PROJECT,
        deployment="0123456789ab",
        kind="run",
        name=name,
        spec_hash=state.runs[name].spec_hash,
    )
    row = JobRecord(job_id=job_id, top_id=job_id.split(".")[0], tag=own, state=slurm,
                    source="sacct")  # fmt: skip
    return ObservedJob(job_id=job_id, tag=own, rows=(row,))


def planned(state: Desired, *jobs: ObservedJob, **kw: Any) -> dict[str, list[Action]]:
    """The plan's actions by target; the journal knows every job given unless told."""
    observation = Observation(taken_at=NOW, jobs=jobs, complete=True)
    records = kw.pop("records", [_known(job) for job in jobs])
    result = plan(state, observation, records, NOW, scheduler=kw.pop("scheduler", "slurm"), **kw)
    by_target: dict[str, list[Action]] = {}
    for action in result.actions:
        by_target.setdefault(action.target, []).append(action)
    return by_target


def _known(job: ObservedJob) -> SubmissionRecord:
    return SubmissionRecord(
        id=len(job.job_id), project=PROJECT, kind=job.tag.kind, name=job.tag.name,
        spec_hash=job.tag.spec_hash, commit=None, job_id=job.job_id,
        status=SubmissionStatus.SUBMITTED, created_at=NOW, updated_at=NOW,
    )  # fmt: skip


def test_a_run_starts_as_a_step_in_the_ready_job() -> None:
    state = desired(run("a", allocation="warm", resources={"time": "10m"}))
    (action,) = planned(state, held("12"), fit=None)["a"]
    assert (action.kind, action.allocation_job, action.outcome) == (
        ActionKind.SUBMIT, "12", "inflight",
    )  # fmt: skip


def test_a_run_in_an_allocation_is_not_checked_against_partitions() -> None:
    state = desired(run("a", allocation="warm"))
    held_fit = _AllocationFit()
    (action,) = planned(state, held("12"), fit=held_fit)["a"]
    assert action.allocation_job == "12" and held_fit.asked == 1  # the allocation only


@dataclass
class _AllocationFit:
    asked: int = 0

    def why_not(self, resources: object) -> str | None:
        self.asked += 1
        return None


def test_a_downstream_waits_for_a_step_to_finish() -> None:
    state = desired(run("a", allocation="warm"), run("b", "a", allocation="warm"))
    actions = planned(state, held("12"), step_job(state, "a", "12.3", RUNNING))
    (upstream,) = actions["a"]
    (downstream,) = actions["b"]
    assert (upstream.kind, upstream.cause) == (ActionKind.NOOP, Cause.IN_PROGRESS)
    assert (downstream.kind, downstream.cause) == (ActionKind.NOOP, Cause.WAITING_UPSTREAM)
    assert downstream.outcome == "waiting"
    assert "cannot wait through afterok" in downstream.reason


def test_a_batch_run_waits_for_a_step_upstream_too() -> None:
    state = desired(run("a", allocation="warm"), run("b", "a"))
    (downstream,) = planned(state, held("12"), step_job(state, "a", "12.3", RUNNING))["b"]
    assert (downstream.kind, downstream.cause) == (ActionKind.NOOP, Cause.WAITING_UPSTREAM)


def test_a_step_that_succeeded_makes_its_downstream_start_in_the_same_job() -> None:
    state = desired(run("a", allocation="warm"), run("b", "a", allocation="warm"))
    done = step_job(state, "a", "12.3", SlurmState.COMPLETED)
    actions = planned(state, held("12"), done)
    assert actions["a"][0].reason == "current (job 12.3 succeeded)"
    assert (actions["b"][0].kind, actions["b"][0].allocation_job) == (ActionKind.SUBMIT, "12")


def test_a_run_too_long_for_the_time_left_waits_and_renews_the_allocation() -> None:
    state = desired(run("a", allocation="warm", resources={"time": "30m"}))
    actions = planned(state, held("12", left=12))
    (waiting,) = actions["a"]
    assert waiting.kind is ActionKind.NOOP and waiting.outcome == "waiting"
    assert waiting.reason == "waits for allocation warm's renewal: needs 30m, 12m left in job 12"
    assert [(a.kind, a.reason[:26]) for a in actions["warm"]] == [
        (ActionKind.REUSE, "allocation job 12 on cpu1,"),
        (ActionKind.REPLACE, "allocation renewed early: "),
    ]


def test_runs_in_an_allocation_the_local_backend_cannot_hold_are_blocked() -> None:
    state = desired(run("a", allocation="warm"), run("b", "a"))
    actions = planned(state, scheduler="local")
    assert actions["warm"][0].kind is ActionKind.BLOCKED
    assert (actions["warm"][0].cause, actions["a"][0].cause) == (
        Cause.UNSUPPORTED,
        Cause.DOES_NOT_FIT,
    )
    assert actions["a"][0].kind is ActionKind.BLOCKED
    assert actions["a"][0].reason.startswith(
        "allocation warm is blocked: skipped on the local backend"
    )
    assert actions["b"][0].reason == "upstream a is blocked"


def shape(**fields: Any) -> NodeShape:
    return NodeShape.model_validate(fields)


def asks(**fields: Any) -> RunResources:
    return RunResources.model_validate(fields)


@pytest.mark.parametrize(
    ("holds", "asks", "beyond"),
    [
        (shape(cpus=4, memory="2GiB", gpus="a100:2"), asks(cpus=4, memory="2GiB", gpus=2), []),
        (shape(gpus=2), asks(gpus=4), ["gpus 4 > 2 per node"]),
        (shape(gpus="a100:2"), asks(gpus="A100:1"), []),  # gres types are case-blind here
        (shape(gpus="a100:2"), asks(gpus="h100:1"), ["gpus h100:1, but it holds a100:2"]),
        (shape(gpus=2), asks(gpus="h100:1"), []),  # untyped: any type may be held
        (shape(), asks(gpus=1), ["gpus 1, but it holds no GPUs"]),
        (shape(sbatch_extra=["--exclusive"]), asks(gpus=1), []),  # whole nodes, every GPU
        (shape(cpus=2), asks(cpus="4+"), ["cpus 4+ > 2 per node"]),
        (shape(memory="1GiB"), asks(memory="2GiB"), ["memory 2GiB > 1GiB per node"]),
        (shape(), asks(cpus=64, memory="1TiB"), []),  # unstated: the cluster decides
        (
            shape(cpus=2, gpus=2),
            asks(cpus=3, gpus=3),
            ["cpus 3 > 2 per node", "gpus 3 > 2 per node"],
        ),
        # Several tasks or nodes: more nodes than held; CPUs of all tasks on one node
        (shape(cpus=4), asks(nodes=2, ntasks_per_node=1), ["nodes 2 > 1"]),
        (shape(nodes=2, cpus=4), asks(nodes=2, ntasks_per_node=1, cpus=4), []),
        (shape(nodes=2, cpus=4), asks(nodes=2, ntasks=8, cpus=1), []),
        (
            shape(nodes=2, cpus=4),
            asks(nodes=2, ntasks=6, cpus=2),
            ["cpus 3 tasks x 2 > 4 per node"],
        ),
        (shape(cpus=2), asks(ntasks=3), ["cpus 3 tasks x 1 > 2 per node"]),
        (shape(), asks(nodes=1, ntasks=64), []),  # unstated CPUs: the cluster decides
    ],
)
def test_what_a_step_asks_beyond_its_allocation(
    holds: NodeShape, asks: RunResources, beyond: list[str]
) -> None:
    assert beyond_allocation(holds, asks) == beyond


def test_a_run_asking_more_than_its_allocation_holds_is_blocked_before_anything_starts() -> None:
    gpus = allocation(resources={"partition": "gpu", "gpus": "a100:2"})
    state = desired(
        run("big", allocation="warm", resources={"gpus": 4}),
        run("after", "big"),
        run("fits", allocation="warm", resources={"gpus": 2}),
        allocations=(gpus,),
    )
    # Judged whether or not a job of the allocation is ready: none is here.
    for jobs in ((), (_as(held("12"), gpus),)):
        actions = planned(state, *jobs)
        (big,) = actions["big"]
        assert big.kind is ActionKind.BLOCKED and big.allocation_job is None
        assert big.reason == (
            "asks for more than allocation warm holds: gpus 4 > a100:2 per node; "
            "ask for less, or for more in allocation warm"
        )
        assert actions["after"][0].reason == "upstream big is blocked"
        assert actions["fits"][0].kind in (ActionKind.SUBMIT, ActionKind.NOOP)
    assert actions["fits"][0].allocation_job == "12"


def _started(state: Desired, name: str, ago: timedelta = timedelta()) -> SubmissionRecord:
    """The journal's record of a step started ``ago`` whose id Slurm has not told."""
    return SubmissionRecord(
        id=1, project=PROJECT, name=name, spec_hash=state.runs[name].spec_hash, commit=None,
        job_id=None, status=SubmissionStatus.INTENT, created_at=NOW - ago, updated_at=NOW - ago,
    )  # fmt: skip


def _launch(state: Desired, name: str, allocation_id: str = "12") -> Launch:
    own = run_tag(name).model_copy(update={"spec_hash": state.runs[name].spec_hash})
    return Launch(allocation_id=allocation_id, tag=own)


def test_a_step_started_but_not_listed_is_not_started_again() -> None:
    state = desired(run("a", allocation="warm"))
    (action,) = planned(state, held("12"), records=[_started(state, "a")])["a"]
    assert (action.kind, action.cause) == (ActionKind.NOOP, Cause.STEP_NOT_LISTED)


@pytest.mark.parametrize(
    ("srun_of", "expected"),
    [
        # srun still holds it back (GPUs in use): waiting, however long ago it started
        ("a", "srun holds its step back until allocation warm (job 12) has room for it"),
        # the processes could not be looked at: its srun may still wait
        ("unknown", "its srun could not be looked for; not starting it again"),
        # another run's srun, or none: lost after the grace, started again
        ("b", None),
        ("nobody", None),
    ],
)
def test_a_step_srun_holds_back_is_waited_for_while_its_srun_runs(
    srun_of: str, expected: str | None
) -> None:
    state = desired(run("a", allocation="warm", resources={"gpus": 1}), run("b"),
                    allocations=(allocation(resources={"gpus": 2}),))  # fmt: skip
    launches = {
        "a": (_launch(state, "a"),),
        "b": (_launch(state, "b"),),
        "nobody": (),
        "unknown": None,
    }[srun_of]
    job = _as(held("12"), state.allocations["warm"])
    observation = Observation(taken_at=NOW, jobs=(job,), complete=True, launches=launches)
    records = [_known(job), _started(state, "a", ago=timedelta(hours=1))]
    result = plan(state, observation, records, NOW, scheduler="slurm")
    (action,) = [a for a in result.actions if a.target == "a"]
    if expected is None:
        assert (action.kind, action.allocation_job) == (ActionKind.SUBMIT, "12")
    else:
        assert (action.kind, action.cause) == (ActionKind.NOOP, Cause.STEP_NOT_LISTED)
        assert expected in action.reason  # which of the two it waits for, in words
        assert action.allocation_job is None


def test_an_old_allocation_is_not_released_under_a_step_srun_holds_back() -> None:
    state = desired(run("a", allocation="warm"))
    old = held("11", spec=OTHER_HASH)
    observation = Observation(
        taken_at=NOW, jobs=(old, held("12")), complete=True,
        launches=(_launch(state, "a", "11"),),
    )  # fmt: skip
    records = [_known(old), _known(held("12")), _started(state, "a")]
    result = plan(state, observation, records, NOW, scheduler="slurm")
    waits = [a for a in result.actions if a.target == "warm" and a.kind is ActionKind.NOOP]
    assert [a.reason for a in waits] == [
        "old allocation 11 (allocation spec changed) released once step 11.? (run a, held "
        "back by srun) ends"
    ]


def test_a_lost_journal_adopts_the_allocation_and_reuses_it() -> None:
    state = desired(run("a", allocation="warm"))
    actions = planned(state, held("12"), step_job(state, "a", "12.3", RUNNING), records=[])
    assert [a.kind for a in actions["warm"]] == [ActionKind.ADOPT, ActionKind.REUSE]
    assert [a.kind for a in actions["a"]] == [ActionKind.ADOPT, ActionKind.NOOP]
    assert actions["a"][0].job_ids == ("12.3",)


def test_with_targets_only_the_allocations_of_the_chosen_runs_are_planned() -> None:
    other = allocation("other")
    state = desired(run("a", allocation="warm"), run("b"), allocations=(WARM, other))
    observation = Observation(taken_at=NOW, jobs=(), complete=True)
    result = plan(state, observation, [], NOW, scheduler="slurm", targets=["a"])
    assert {a.target for a in result.actions} == {"a", "warm"}
    result = plan(state, observation, [], NOW, scheduler="slurm", targets=["b"])
    assert {a.target for a in result.actions} == {"b"}


# -- status ------------------------------------------------------------------------------


def test_status_shows_the_held_job_its_steps_and_its_history() -> None:
    state = desired(run("a", allocation="warm"))
    job = held("13", left=42, steps=(step("13.3", RUNNING, run_tag("a")),))
    records = [
        alloc_record("12", final_health=Health.CANCELLED),
        alloc_record("13"),
        _known(step_job(state, "a", "12.1", SlurmState.COMPLETED)),
        _known(step_job(state, "a", "12.2", SlurmState.COMPLETED)),
        _known(step_job(state, "a", "13.3", RUNNING)),
    ]
    observation = Observation(taken_at=NOW, jobs=(job,), complete=True)
    result = plan(state, observation, records, NOW, scheduler="slurm")
    (row,) = allocation_statuses(state, result, observation, records)
    assert (row.name, row.job_id, row.health, row.nodes) == ("warm", "13", Health.RUNNING, "cpu1")
    assert row.time_left == timedelta(minutes=42)
    assert [str(step) for step in row.steps_running] == ["13.3 (a)"]
    history = [str(job) for job in row.history]
    assert [line.split(" 20")[0] for line in history] == [
        f"job 13 (spec {WARM.spec_hash[:8]}) submitted",
        f"job 12 (spec {WARM.spec_hash[:8]}) submitted",
    ]
    assert history[0].endswith("1 run, running")
    assert history[1].endswith("2 runs, cancelled")
    # The JSON form: the same facts, as data.
    data = row.model_dump(mode="json")
    assert data["time_left"] == 42 * 60
    assert data["steps_running"] == [{"step_id": "13.3", "run": "a"}]
    assert [(job["job_id"], job["runs"], job["health"]) for job in data["history"]] == [
        ("13", 1, "running"),
        ("12", 2, "cancelled"),
    ]
    assert row.reason.startswith("reuse: allocation job 13 on cpu1, 42m left")


# -- idle_release ------------------------------------------------------------------------

IDLE = allocation(idle_release="30m")


def used(
    job_id: str = "12",
    started: int = 120,
    ended: int | None = None,
    running: bool = False,
    of: DesiredAllocation = IDLE,
) -> ObservedJob:
    """A running job of the allocation that started ``started`` minutes ago, with one run
    step that ended ``ended`` minutes ago (none when None), or still runs."""
    job = held(job_id, of=of)
    own = replace(job.rows[0], start=NOW - timedelta(minutes=started))
    rows = [own]
    if ended is not None or running:
        end = None if running else NOW - timedelta(minutes=ended or 0)
        state = RUNNING if running else SlurmState.COMPLETED
        rows.append(replace(step(f"{job_id}.0", state, run_tag("old")), end=end))
    return ObservedJob(job_id=job_id, tag=job.tag, rows=tuple(rows))


@pytest.mark.parametrize(
    ("job", "kind", "reason"),
    [
        (
            used(ended=31),
            ActionKind.CANCEL,
            "release allocation job 12: idle 31m (idle_release: 30m)",
        ),
        (used(ended=10), ActionKind.REUSE, ", idle 10m (reused while"),
        (used(started=45), ActionKind.CANCEL, "idle 45m"),  # never used: since it started
        (used(running=True), ActionKind.REUSE, "50m left (reused while"),
    ],
)
def test_an_idle_allocation_is_released_after_idle_release(
    job: ObservedJob, kind: ActionKind, reason: str
) -> None:
    state = desired(run("a"), allocations=(IDLE,))
    (action,) = planned(state, job)["warm"]
    assert action.kind is kind and reason in action.reason, action.reason
    if kind is ActionKind.CANCEL:
        assert (action.cause, action.job_ids) == (Cause.IDLE, ("12",))
        assert action.reason.endswith("no step runs in it; allocated again when a run needs it")


def test_an_idle_allocation_a_run_starts_in_now_is_kept() -> None:
    state = desired(run("a", allocation="warm"), allocations=(IDLE,))
    actions = planned(state, used(ended=31))
    assert [a.kind for a in actions["warm"]] == [ActionKind.REUSE]
    assert actions["a"][0].allocation_job == "12"


def test_an_idle_allocation_is_not_released_on_half_a_picture() -> None:
    state = desired(run("a"), allocations=(IDLE,))
    job = used(ended=31)
    observation = Observation(taken_at=NOW, jobs=(job,), complete=False)
    result = plan(state, observation, [_known(job)], NOW, scheduler="slurm")
    assert [a.kind for a in result.actions if a.target == "warm"] == [ActionKind.REUSE]


def test_an_idle_allocation_with_a_step_srun_holds_back_is_kept() -> None:
    state = desired(run("a"), allocations=(IDLE,))
    job = used(ended=31)
    held_back = Launch(allocation_id="12", tag=run_tag("b"))
    observation = Observation(taken_at=NOW, jobs=(job,), complete=True, launches=(held_back,))
    result = plan(state, observation, [_known(job)], NOW, scheduler="slurm")
    assert [a.kind for a in result.actions if a.target == "warm"] == [ActionKind.REUSE]


def test_with_idle_release_a_job_is_made_only_when_a_run_needs_it() -> None:
    nobody = planned(desired(run("a"), allocations=(IDLE,)))
    assert [(a.kind, a.reason) for a in nobody["warm"]] == [
        (ActionKind.NOOP, "no job ready; allocated when a run needs it (idle_release: 30m)")
    ]
    needed = planned(desired(run("a", allocation="warm"), allocations=(IDLE,)))
    assert [(a.kind, a.reason) for a in needed["warm"]] == [
        (ActionKind.NOOP, "no job ready; allocated when a run needs it (idle_release: 30m)"),
        (ActionKind.SUBMIT, "allocation: none held; run a needs it"),
    ]
    (waits,) = needed["a"]
    assert waits.reason == "waits for allocation warm: allocated for it in this apply"


def test_idle_release_is_not_part_of_the_spec_hash() -> None:
    # A held allocation is not replaced when idle_release is added or changed.
    assert IDLE.spec_hash == WARM.spec_hash


# -- GPUs a run has to itself: counted before its step is started ------------------------

TWO_GPUS = allocation(resources={"gpus": 2, "memory": "500MiB"})


def gpu_run(name: str, **resources: Any) -> Run:
    return run(name, allocation="warm", resources={"gpus": 1, **resources})


def in_job(state: Desired, running: dict[str, SlurmState], *, of: DesiredAllocation = TWO_GPUS
           ) -> tuple[ObservedJob, ...]:  # fmt: skip
    """Allocation job 12 with a step of each run given (12.0, 12.1, ... in that state), and
    each step as a job of its run, as the Slurm adapter presents them."""
    jobs = []
    rows = []
    for number, (name, slurm) in enumerate(running.items()):
        jobs.append(step_job(state, name, f"12.{number}", slurm))
        rows.append(step(f"12.{number}", slurm, jobs[-1].tag))
    return (_as(held("12", steps=tuple(rows)), of), *jobs)


def gpu_plan(
    state: Desired, jobs: tuple[ObservedJob, ...], *, complete: bool = True, **kw: Any
) -> dict[str, Action]:
    """The plan's one action for each run."""
    observation = Observation(taken_at=NOW, jobs=jobs, complete=complete,
                              launches=kw.pop("launches", ()))  # fmt: skip
    records = [_known(job) for job in jobs] + kw.pop("records", [])
    result = plan(state, observation, records, NOW, scheduler="slurm")
    return {a.target: a for a in result.actions if a.target_kind == "run"}


def test_a_gpu_run_waits_while_the_allocations_gpus_are_in_use() -> None:
    state = desired(gpu_run("a"), gpu_run("b"), gpu_run("c"), allocations=(TWO_GPUS,))
    actions = gpu_plan(state, in_job(state, {"a": RUNNING, "b": RUNNING}))
    waits = actions["c"]
    assert (waits.kind, waits.allocation_job, waits.outcome) == (
        ActionKind.NOOP, None, "waiting",
    )  # fmt: skip
    assert (
        waits.reason
        == "waits for 1 free GPU in allocation warm (job 12): 2 of 2 in use by runs a, b"
    )


def test_gpu_runs_started_in_one_pass_count_against_each_other() -> None:
    state = desired(gpu_run("a"), gpu_run("b"), gpu_run("c"), allocations=(TWO_GPUS,))
    actions = gpu_plan(state, in_job(state, {}))
    assert [(n, actions[n].kind, actions[n].allocation_job) for n in "abc"] == [
        ("a", ActionKind.SUBMIT, "12"),
        ("b", ActionKind.SUBMIT, "12"),
        ("c", ActionKind.NOOP, None),
    ]
    assert actions["c"].reason.endswith("2 of 2 in use by runs a, b")


def test_a_waiting_gpu_run_starts_in_a_later_pass_once_a_gpu_is_free() -> None:
    state = desired(gpu_run("a"), gpu_run("b"), gpu_run("c"), allocations=(TWO_GPUS,))
    ended = {"a": SlurmState.COMPLETED, "b": RUNNING}
    actions = gpu_plan(state, in_job(state, ended))
    assert (actions["c"].kind, actions["c"].allocation_job) == (ActionKind.SUBMIT, "12")


def test_a_run_asking_two_gpus_per_node_on_two_nodes_counts_four() -> None:
    four = allocation(resources={"gpus": 2, "nodes": 2})
    state = desired(gpu_run("a", gpus=2, nodes=2), gpu_run("b"), allocations=(four,))
    actions = gpu_plan(state, in_job(state, {"a": RUNNING}, of=four))
    assert actions["b"].reason == (
        "waits for 1 free GPU in allocation warm (job 12): 4 of 4 in use by run a"
    )


def test_steps_started_or_held_back_but_not_listed_hold_their_gpus() -> None:
    state = desired(gpu_run("a"), gpu_run("b"), gpu_run("c"), allocations=(TWO_GPUS,))
    # a: srun holds its step back (its launcher runs here); b: started a moment ago, not
    # listed yet. Both wait for their steps, and c for a GPU they leave none of.
    actions = gpu_plan(
        state,
        in_job(state, {}),
        launches=(_launch(state, "a"),),
        records=[_started(state, "a", ago=timedelta(hours=1)), _started(state, "b")],
    )
    assert actions["a"].cause is actions["b"].cause is Cause.STEP_NOT_LISTED
    assert "srun holds its step back" in actions["a"].reason
    assert actions["c"].reason.endswith("2 of 2 in use by runs a, b")
    assert actions["c"].allocation_job is None


def test_a_step_listed_as_ended_holds_no_gpu_before_its_intent_is_closed() -> None:
    # Its srun let it go and it ran to its end before a pass adopted it: the journal's
    # intent is still open, but the step is listed, ended.
    state = desired(gpu_run("a"), gpu_run("b"), gpu_run("c"), allocations=(TWO_GPUS,))
    jobs = in_job(state, {"a": SlurmState.COMPLETED, "b": RUNNING})
    actions = gpu_plan(state, jobs, records=[_started(state, "a")])
    assert actions["c"].allocation_job == "12"


def test_a_step_lost_past_the_grace_holds_no_gpu() -> None:
    state = desired(gpu_run("a"), gpu_run("c"), allocations=(TWO_GPUS,))
    lost = _started(state, "a", ago=timedelta(hours=1))
    actions = gpu_plan(state, in_job(state, {}), records=[lost])
    assert [actions[n].allocation_job for n in "ac"] == ["12", "12"]
    # When the launchers could not be looked at, its srun may still wait: it counts.
    actions = gpu_plan(state, in_job(state, {}), records=[lost], launches=None)
    assert actions["a"].allocation_job is None
    assert actions["c"].allocation_job == "12"  # one of two GPUs is a's: one is free
    # An open intent of an older spec is not waited for (unlisted_step): it holds none.
    older = replace(lost, spec_hash=OTHER_HASH)
    both = desired(gpu_run("a"), gpu_run("b"), gpu_run("c"), allocations=(TWO_GPUS,))
    actions = gpu_plan(both, in_job(both, {}), records=[older], launches=None)
    assert [actions[n].allocation_job for n in "abc"] == ["12", "12", None]


def test_an_incomplete_observation_never_starts_a_gpu_run() -> None:
    state = desired(gpu_run("a"), run("cpu", allocation="warm"), allocations=(TWO_GPUS,))
    actions = gpu_plan(state, in_job(state, {}), complete=False)
    assert actions["a"].kind is ActionKind.NOOP and actions["a"].allocation_job is None
    assert actions["a"].reason == (
        "waits for allocation warm (job 12) to be fully observed: a GPU step the "
        "observation missed may hold its GPUs"
    )
    assert actions["cpu"].allocation_job == "12"  # a CPU run shares: as before


def test_cpu_runs_start_whatever_the_gpu_runs_hold() -> None:
    state = desired(gpu_run("a"), gpu_run("b"), run("cpu", allocation="warm"),
                    allocations=(TWO_GPUS,))  # fmt: skip
    actions = gpu_plan(state, in_job(state, {"a": RUNNING, "b": RUNNING}))
    assert (actions["cpu"].kind, actions["cpu"].allocation_job) == (ActionKind.SUBMIT, "12")


def test_a_gpu_run_waits_for_the_memory_gpu_steps_reserve() -> None:
    state = desired(gpu_run("a", memory="300MiB"), gpu_run("b", memory="300MiB"),
                    gpu_run("c"), allocations=(TWO_GPUS,))  # fmt: skip
    actions = gpu_plan(state, in_job(state, {"a": RUNNING}))
    assert actions["b"].reason == (
        "waits for 300 MiB free memory in allocation warm (job 12): 300 of 500 MiB "
        "reserved by GPU run a"
    )
    assert actions["c"].allocation_job == "12"  # states no memory: reserves none here


def test_an_outdated_steps_gpus_are_read_from_the_journal() -> None:
    state = desired(gpu_run("a"), gpu_run("c"), allocations=(TWO_GPUS,))
    old = run_tag("a").model_copy(update={"spec_hash": OTHER_HASH})
    job = _as(held("12", steps=(step("12.0", RUNNING, old),)), TWO_GPUS)
    started = SubmissionRecord(
        id=9, project=PROJECT, name="a", spec_hash=OTHER_HASH, commit=None, job_id="12.0",
        status=SubmissionStatus.SUBMITTED, created_at=NOW, updated_at=NOW,
        spec_fields={"resources.gpus": "2"},
    )  # fmt: skip
    old_job = ObservedJob(job_id="12.0", tag=old, rows=(replace(
        step("12.0", RUNNING, old), step=None, tag=old),))  # fmt: skip
    observation = Observation(taken_at=NOW, jobs=(job, old_job), complete=True)
    result = plan(state, observation, [_known(job), started], NOW, scheduler="slurm")
    (waits,) = [a for a in result.actions if a.target == "c"]
    assert waits.reason.endswith("2 of 2 in use by run a")
    # Adopted after a lost journal, its record holds no spec: its share is not known,
    # and srun holds back what finds no room.
    adopted = replace(started, spec_fields={})
    result = plan(state, observation, [_known(job), adopted], NOW, scheduler="slurm")
    (starts,) = [a for a in result.actions if a.target == "c"]
    assert starts.allocation_job == "12"


def test_a_refused_allocation_is_blocked_and_its_runs_with_it_until_the_commit_changes() -> None:
    """salloc refused it (a QOS it does not know, say): allocated again it would be
    refused again, and its runs would wait for ever (`apply --wait` never ended)."""
    state = desired(run("a", allocation="warm", resources={"time": "10m"}))
    why = "salloc: error: Invalid qos specification"
    refused = replace(
        alloc_record("1", status=SubmissionStatus.REFUSED, reason=why, commit=state.commit),
        job_id=None,
    )
    actions = planned(state, records=[refused], fit=None)
    (warm,) = actions["warm"]
    assert (warm.kind, warm.cause) == (ActionKind.BLOCKED, Cause.REFUSED)
    assert warm.reason == f"refused at submission: {why}. Fix it and commit to try again"
    (inside,) = actions["a"]
    assert inside.kind is ActionKind.BLOCKED
    earlier = replace(refused, commit="0ld" * 13 + "0")  # a later commit tries again
    assert planned(state, records=[earlier], fit=None)["warm"][0].kind is ActionKind.SUBMIT
