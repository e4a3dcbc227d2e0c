"""Applying allocation actions against a recording scheduler and a real journal: intent
first, then the call; what each call is asked; what is recorded of its answer."""

from __future__ import annotations

import hashlib
from datetime import timedelta
from pathlib import Path

import pytest

from reconciler.desired.desired import (
    Desired,
    DesiredAllocation,
    DesiredRun,
    Location,
    effective_allocation,
    effective_run,
    spec_hash,
)
from reconciler.desired.models import Allocation, Project, Run
from reconciler.engine.apply.applier import Applier
from reconciler.engine.apply.settle import record_setups
from reconciler.engine.observe.endings import judge_setups
from reconciler.engine.plan.actions import Action, ActionKind, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.errors import PermanentSchedulerError
from reconciler.scheduler.base import (
    AllocateRequest,
    JobRecord,
    Observation,
    ObservedJob,
    StepRequest,
    StepScheduler,
)
from reconciler.scheduler.runfolder import step_script
from reconciler.scheduler.slurm.argv import salloc
from reconciler.scheduler.slurm.steps import srun
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.scheduler.testing import Answer, ScriptedScheduler, ScriptedStepScheduler
from reconciler.state.journal import Journal
from reconciler.state.paths import deployment, run_dir
from reconciler.state.records import SubmissionStatus
from tests.planning import NOW, PROJECT


def recorder(steps: Answer[[StepRequest], str | None]) -> ScriptedStepScheduler:
    """A scheduler that can hold allocations (job 12) and run steps (``start_step``
    answering ``steps``), recording every request; a run inside an allocation is no batch
    job, so nothing may be submitted."""
    return ScriptedStepScheduler(allocate="12", cancel=None, release=None, start_step=steps)


def desired(root: Path) -> Desired:
    project = Project.model_validate({"project": PROJECT})
    alloc = effective_allocation(
        Allocation.model_validate(
            {
                "kind": "Allocation",
                "name": "warm",
                "time_limit": "1h",
                "resources": {"partition": "cpu", "cpus": 2},
                "setup": ["pip install x", "echo ready"],
                "container": {"image": "ubuntu:22.04"},
            }
        ),
        project,
    )
    run = effective_run(
        Run.model_validate(
            {
                "kind": "Run",
                "name": "a",
                "command": "echo hi > {outputs.out.path}",
                "allocation": "warm",
                "resources": {"cpus": 1, "time": "5m"},
                "outputs": {"out": "out.txt"},
            }
        ),
        project,
    )
    return Desired(
        project,
        root,
        "c0ffee" * 6 + "abcd",
        {"a": DesiredRun(run, location=Location("specs/a.yaml", 1), spec_hash=spec_hash(run))},
        {"warm": DesiredAllocation(alloc, Location("specs/w.yaml", 1), spec_hash(alloc))},
        {"a": ()},
    )


def apply(
    state: Desired, scheduler: ScriptedScheduler, journal: Journal, *actions: Action
) -> Applier:
    plan = Plan(
        project=PROJECT,
        root=str(state.root),
        commit=state.commit,
        scheduler="slurm",
        created_at=NOW,
        observation_complete=True,
        fingerprint="0" * 16,
        actions=actions,
    )
    applier = Applier(plan, state, scheduler, journal, state.root / "code", lambda: NOW)
    applier.run()
    return applier


def alloc_action(state: Desired, kind: ActionKind, job_ids: tuple[str, ...] = ()) -> Action:
    return Action(
        kind=kind,
        target="warm",
        target_kind="alloc",
        cause=Cause.NONE_HELD,
        reason="test",
        spec_hash=state.allocations["warm"].spec_hash,
        job_ids=job_ids,
    )


@pytest.fixture
def journal(tmp_path: Path) -> Journal:
    return Journal(tmp_path / "journal.sqlite")


def test_allocate_setup_release_and_a_step_in_plan_order(tmp_path: Path, journal: Journal) -> None:
    state = desired(tmp_path)
    warm = state.allocations["warm"]
    scheduler = recorder(["12.0", "12.1"])
    run_action = Action(
        kind=ActionKind.SUBMIT,
        cause=Cause.NEVER_RUN,
        target="a",
        reason="not yet run",
        spec_hash=state.runs["a"].spec_hash,
        allocation_job="12",
    )
    applier = apply(
        state,
        scheduler,
        journal,
        alloc_action(state, ActionKind.SUBMIT),
        alloc_action(state, ActionKind.SETUP, ("12",)),
        alloc_action(state, ActionKind.CANCEL, ("11",)),
        run_action,
    )
    kinds = [kind for kind, _ in scheduler.calls]
    assert kinds == ["allocate", "start_step", "release", "start_step"]

    allocated = scheduler.calls[0][1]
    assert isinstance(allocated, AllocateRequest)
    assert allocated.allocation == warm.spec
    assert salloc(allocated)[-3:] == ["--time=01:00:00", "--partition=cpu", "--cpus-per-task=2"]
    assert allocated.tag == Tag(
        project=PROJECT, deployment=deployment(state), kind="alloc", name="warm",
        spec_hash=warm.spec_hash,
    )  # fmt: skip

    setup = scheduler.calls[1][1]
    assert isinstance(setup, StepRequest) and setup.allocation_id == "12"
    assert setup.tag == allocated.tag and setup.workdir == tmp_path / "code"
    assert (setup.shape, setup.container_name) == (None, "warm")
    assert srun(setup)[7:-2] == [
        "--ntasks-per-node=1",
        "--container-image=ubuntu:22.04",
        "--container-name=warm",
    ]
    assert setup.script.read_text() == "set -euo pipefail\npip install x\necho ready\n"
    assert setup.log_dir == tmp_path / ".recon" / "allocations" / "warm"

    step = scheduler.calls[3][1]
    assert isinstance(step, StepRequest) and step.allocation_id == "12"
    assert step.tag.kind == "run" and step.tag.name == "a"
    assert step.allocation_gpus is False  # a CPU allocation: no --gres=gpu:0
    assert srun(step)[7:-2] == [
        "--nodes=1",
        "--ntasks=1",
        "--cpus-per-task=1",
        "--container-image=ubuntu:22.04",
        "--container-name=warm",
    ]
    assert step.script.read_text().startswith("#!/bin/bash\n#SBATCH --job-name=p.a\n")
    assert step.workdir == (tmp_path / "runs" / "a").resolve()

    records = {r.job_id: r for r in journal.records(PROJECT)}
    assert records["12"].kind == "alloc" and records["12"].status is SubmissionStatus.SUBMITTED
    assert records["12.1"].kind == "run" and records["12.1"].status is SubmissionStatus.SUBMITTED
    (recorded_setup,) = journal.setups(PROJECT)
    assert (recorded_setup.allocation_job, recorded_setup.step_id) == ("12", "12.0")
    assert journal.pending_cancels(PROJECT) == []
    assert applier.result.submitted == {"warm": "12", "a": "12.1"}
    assert applier.result.cancelled == ["11"]
    assert applier.result.set_up == {"warm": "12.0"}  # counted in apply's summary line


def test_a_pass_that_only_starts_a_setup_says_so(
    tmp_path: Path, journal: Journal, capsys: pytest.CaptureFixture[str]
) -> None:
    from reconciler.commands.apply import _report_applied

    state = desired(tmp_path)
    applier = apply(
        state, recorder(["12.0"]), journal, alloc_action(state, ActionKind.SETUP, ("12",))
    )
    _report_applied(applier.result)
    assert capsys.readouterr().out.splitlines() == [
        "started the setup of warm: step 12.0",
        "Apply complete: 0 submitted, 0 cancelled, 0 adopted, 1 setup started, 0 not done.",
    ]


def test_a_step_not_listed_yet_leaves_its_intent_open(tmp_path: Path, journal: Journal) -> None:
    state = desired(tmp_path)
    action = Action(
        kind=ActionKind.SUBMIT, cause=Cause.NEVER_RUN, target="a", reason="x",
        spec_hash=state.runs["a"].spec_hash, allocation_job="12",
    )  # fmt: skip
    applier = apply(state, recorder([None]), journal, action)
    (record,) = journal.records(PROJECT)
    assert (record.status, record.job_id) == (SubmissionStatus.INTENT, None)
    assert applier.result.submitted == {"a": "12 (step not listed yet)"}
    # the script the step runs, journalled with its intent; no options: srun reads none
    run = state.runs["a"]
    ran = step_script(run_dir(state, run), run.spec_hash).read_bytes()
    assert journal.script_sent(record.id) == (hashlib.sha256(ran).hexdigest(), None)


def test_refused_steps_and_setups_are_recorded_as_such(tmp_path: Path, journal: Journal) -> None:
    state = desired(tmp_path)
    no_room = PermanentSchedulerError("srun exited 1 and started no step in allocation 12")
    action = Action(
        kind=ActionKind.SUBMIT, cause=Cause.NEVER_RUN, target="a", reason="x",
        spec_hash=state.runs["a"].spec_hash, allocation_job="12",
    )  # fmt: skip
    applier = apply(
        state,
        recorder([no_room, no_room]),
        journal,
        alloc_action(state, ActionKind.SETUP, ("12",)),
        action,
    )
    (record,) = journal.records(PROJECT)
    assert record.status is SubmissionStatus.REFUSED and "started no step" in (record.reason or "")
    (setup,) = journal.setups(PROJECT)
    assert setup.final_health is Health.FAILED and "started no step" in (setup.reason or "")
    assert set(applier.result.refused) == {"warm", "a"}
    assert applier.result.set_up == {}


def test_the_recorder_is_a_step_scheduler() -> None:
    assert isinstance(recorder([]), StepScheduler)


def test_settle_setups_records_the_step_and_its_end(tmp_path: Path, journal: Journal) -> None:
    state = desired(tmp_path)
    warm = state.allocations["warm"]
    tag = Tag(
        project=PROJECT,
        deployment="0123456789ab",
        kind="alloc",
        name="warm",
        spec_hash=warm.spec_hash,
    )
    running = journal.record_setup(PROJECT, "warm", warm.spec_hash, "12", NOW)
    failed = journal.record_setup(PROJECT, "warm", warm.spec_hash, "13", NOW)
    gone = journal.record_setup(PROJECT, "warm", warm.spec_hash, "14", NOW)

    def job(
        job_id: str, state_: SlurmState, setup: SlurmState | None, code: int = 0
    ) -> ObservedJob:
        rows = [JobRecord(job_id=job_id, top_id=job_id, tag=tag, state=state_, source="sacct")]
        if setup is not None:
            rows.append(
                JobRecord(job_id=f"{job_id}.0", top_id=job_id, step="0", name=tag.format(),
                          state=setup, exit_code=code, source="sacct")
            )  # fmt: skip
        return ObservedJob(job_id=job_id, tag=tag, rows=tuple(rows))

    observation = Observation(
        taken_at=NOW,
        jobs=(
            job("12", SlurmState.RUNNING, SlurmState.RUNNING),
            job("13", SlurmState.RUNNING, SlurmState.FAILED, 2),
            job("14", SlurmState.CANCELLED, None),
        ),
        complete=True,
    )
    later = NOW + timedelta(minutes=1)
    changed = judge_setups(observation, journal.setups(PROJECT))
    assert {s.id for s in changed} == {running, failed, gone}
    assert journal.setups(PROJECT)[0].step_id is None  # judging writes nothing
    record_setups(journal, changed, later)
    by_id = {s.id: s for s in journal.setups(PROJECT)}
    assert (by_id[running].step_id, by_id[running].final_health) == ("12.0", None)
    assert (by_id[failed].step_id, by_id[failed].final_health, by_id[failed].exit_code) == (
        "13.0", Health.FAILED, 2,
    )  # fmt: skip
    assert by_id[gone].final_health is Health.CANCELLED
    assert "ended before its setup step was seen" in (by_id[gone].reason or "")
