"""Sweeps above the scheduler: arrays split per member, the plan and the spec diff per
sweep, and apply grouping members into job arrays (one sbatch per MaxArraySize)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.desired.desired import Desired
from reconciler.desired.loader import load_desired, open_source
from reconciler.engine.apply.applier import Applier
from reconciler.engine.observe.arrays import map_file, read_maps
from reconciler.engine.plan import plan as make_plan
from reconciler.engine.plan.actions import ActionKind
from reconciler.engine.plan.arrays import ArrayMap
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.identity import split_by_owner
from reconciler.errors import TransientSchedulerError
from reconciler.report import plan as plan_report
from reconciler.report import specdiff as specdiff_report
from reconciler.repository.specdiff import diff
from reconciler.scheduler.base import JobRecord, Observation, ObservedJob
from reconciler.scheduler.states import SlurmState
from reconciler.scheduler.testing import ScriptedScheduler, job_ids
from reconciler.state.journal import Journal
from reconciler.state.paths import deployment, tag_for
from tests.gitrepo import GitRepo
from tests.planning import NOW

TRAIN = """\
kind: Run
name: train
matrix:
  lr: [0.1, 0.2]
  seed: [0, 1, 2]
max_parallel: 4
command: echo {matrix.lr} > {outputs.model.path}
outputs:
  model: model.txt
"""


def load(repo: GitRepo, text: str = TRAIN) -> Desired:
    repo.commit({"specs/train.yaml": text})
    return load_desired(open_source(repo.root))


def apply_fresh(
    desired: Desired, tmp_path: Path, size: int = 1001
) -> tuple[ScriptedScheduler, dict[str, str]]:
    """Plan and apply on a scheduler that takes job arrays of ``size`` tasks at most, each
    submission given the next id from 101; the scheduler, and what apply submitted."""
    scheduler = ScriptedScheduler(submit=job_ids(101), max_array_size=size)
    plan = make_plan(desired, Observation(taken_at=NOW, jobs=(), complete=True), [], NOW,
                     scheduler="slurm", max_array_size=size)  # fmt: skip
    journal = Journal(tmp_path / "journal.sqlite")
    code = tmp_path / "code"
    applier = Applier(plan, desired, scheduler, journal, code, lambda: NOW)
    return scheduler, applier.run().submitted


def test_members_a_pass_submits_go_in_one_array_with_its_map_written_first(
    repo: GitRepo, tmp_path: Path
) -> None:
    desired = load(repo)
    scheduler, submitted = apply_fresh(desired, tmp_path)
    (request,) = scheduler.submitted
    assert request.array is not None
    assert request.array.indices == tuple(range(6)) and request.array.max_parallel == 4
    assert sorted(submitted.values()) == [f"101_{index}" for index in range(6)]
    assert request.tag.name == "train" and request.workdir == repo.root / "runs" / "train"
    members = ArrayMap.from_json(map_file(request.workdir, request.tag.spec_hash).read_text())
    assert members.digest == request.tag.spec_hash
    assert {name for name, _ in members.members.values()} == set(desired.sweeps["train"].members)
    assert "SLURM_ARRAY_TASK_ID" in request.script


def test_an_array_larger_than_max_array_size_is_split(repo: GitRepo, tmp_path: Path) -> None:
    text = TRAIN.replace("seed: [0, 1, 2]", f"seed: {list(range(10))}")
    scheduler, submitted = apply_fresh(load(repo, text), tmp_path, size=7)
    assert len(submitted) == 20
    assert [len(r.array.indices) for r in scheduler.submitted if r.array] == [7, 7, 6]
    assert scheduler.methods("max_array_size") == []  # the plan split them: apply carries it out


def test_a_plan_made_without_max_array_size_has_apply_ask_before_an_array(
    repo: GitRepo, tmp_path: Path
) -> None:
    desired = load(repo)
    plan = make_plan(desired, Observation(taken_at=NOW, jobs=(), complete=True), [], NOW,
                     scheduler="slurm")  # fmt: skip
    assert {a.array.number for a in plan.actions if a.array} == {1}  # not split
    journal = Journal(tmp_path / "journal.sqlite")
    small = ScriptedScheduler(max_array_size=4)  # may not submit
    with pytest.raises(TransientSchedulerError, match="MaxArraySize"):
        Applier(plan, desired, small, journal, tmp_path / "code", lambda: NOW).run()
    assert small.methods() == ["max_array_size"]
    assert journal.records("demo") == []  # its intents withdrawn: nothing was sent
    roomy = ScriptedScheduler(submit=job_ids(101), max_array_size=6)
    result = Applier(plan, desired, roomy, journal, tmp_path / "code", lambda: NOW).run()
    assert len(result.submitted) == 6 and roomy.methods() == ["max_array_size", "submit"]


def test_a_downstream_waits_for_the_whole_array_by_its_id(repo: GitRepo, tmp_path: Path) -> None:
    aggregate = (
        "kind: Run\nname: aggregate\ninputs:\n  models: train.model\n"
        "command: cat {inputs.models.paths}\n"
    )
    repo.write({"specs/aggregate.yaml": aggregate})
    scheduler, _ = apply_fresh(load(repo), tmp_path)
    assert scheduler.submitted[1].dependencies == ("101",)
    listed = (repo.root / "runs" / "aggregate" / "inputs" / "models.list").read_text()
    assert len(listed.splitlines()) == 6 and "lr=0.1,seed=0/model.txt" in listed


def test_arrays_that_may_go_together_go_at_the_first_of_their_members(
    repo: GitRepo, tmp_path: Path
) -> None:
    """Each member of e reads its own member of t, so each goes in an array of its own;
    all of e's arrays go at e[0]'s turn, before f, which reads e[0] and comes next."""
    sweep = (
        "kind: Run\nname: {0}\nmatrix:\n  seed: [0, 1, 2]\n{1}"
        "command: echo > {{outputs.out.path}}\noutputs:\n  out: o\n"
    )
    files = {
        "specs/t.yaml": sweep.format("t", ""),
        "specs/e.yaml": sweep.format("e", "inputs:\n  m: t.out\n"),
        "specs/f.yaml": "kind: Run\nname: f\ninputs:\n  m: e[seed=0].out\ncommand: 'true'\n",
    }
    repo.commit(files)
    desired = load_desired(open_source(repo.root))
    plan = make_plan(desired, Observation(taken_at=NOW, jobs=(), complete=True), [], NOW,
                     scheduler="slurm", max_array_size=1001)  # fmt: skip
    assert [action.target for action in plan.actions][:3] == ["t[seed=0]", "e[seed=0]", "f"]
    scheduler, submitted = apply_fresh(desired, tmp_path)
    assert len(submitted) == 7
    assert [request.tag.name for request in scheduler.submitted] == ["t", "e", "e", "e", "f"]
    assert [request.dependencies for request in scheduler.submitted] == [
        (), ("101_0",), ("101_1",), ("101_2",), ("102",)  # an array of one task: by its id
    ]  # fmt: skip


def array_job(desired: Desired, members: ArrayMap, top: str) -> ObservedJob:
    tag = tag_for(desired, "run", "train", members.digest)
    rows = [
        JobRecord(job_id=f"{top}_{i}", top_id=top, array_task=str(i), tag=tag,
                  state=SlurmState.COMPLETED, source="sacct")
        for i in range(2)
    ] + [
        JobRecord(job_id=f"{top}_[2-5%4]", top_id=top, array_task="[2-5%4]", tag=tag,
                  state=SlurmState.PENDING, source="squeue")
    ]  # fmt: skip
    return ObservedJob(job_id=top, tag=tag, rows=tuple(rows))


def test_an_observed_array_is_one_job_per_member(repo: GitRepo) -> None:
    desired = load(repo)
    runs = [desired.runs[name] for name in desired.sweeps["train"].members]
    members = ArrayMap("train", {i: (run.name, run.spec_hash) for i, run in enumerate(runs)})
    found = Observation(taken_at=NOW, jobs=(array_job(desired, members, "55"),), complete=True)
    project = desired.project.project
    own = split_by_owner(found, project, deployment(desired), (), {"55": members}).own
    assert [(job.job_id, job.tag.name) for job in own.jobs] == [
        (f"55_{i}", run.name) for i, run in enumerate(runs)
    ]
    assert own.jobs[0].health.value == "succeeded" and own.jobs[5].health.value == "pending"
    plan = make_plan(desired, own, [], NOW, scheduler="slurm")
    assert {action.kind for action in plan.actions} == {ActionKind.ADOPT, ActionKind.NOOP}
    assert not plan.has_changes  # nothing submitted twice


def test_an_array_whose_map_is_missing_makes_the_observation_incomplete(repo: GitRepo) -> None:
    desired = load(repo)
    members = ArrayMap("train", {0: ("train[lr=0.1,seed=0]", "0" * 16)})
    found = Observation(taken_at=NOW, jobs=(array_job(desired, members, "55"),), complete=True)
    own = split_by_owner(found, desired.project.project, deployment(desired), (), {}).own
    assert not own.complete and [job.job_id for job in own.jobs] == ["55"]
    assert "member map" in own.problems[0]
    plan = make_plan(desired, own, [], NOW, scheduler="slurm")
    assert {a.kind for a in plan.actions} == {ActionKind.NOOP}  # nothing on half a picture
    assert plan.actions[0].cause is Cause.ARRAY_UNREAD


def test_a_plan_shows_a_sweep_as_one_line_and_lists_members_on_request(repo: GitRepo) -> None:
    desired = load(repo)
    observation = Observation(taken_at=NOW, jobs=(), complete=True)
    plan = make_plan(desired, observation, [], NOW, scheduler="slurm", max_array_size=4)
    text = plan_report.as_text(plan)
    assert (
        "  + submit    train          6 of 6 members (2 arrays, at most 4 at once): not yet run"
        in text
    )
    assert "train[lr=0.1,seed=0]" not in text
    listed = plan_report.as_text(plan, members=True)
    assert "train[lr=0.1,seed=0]" in listed
    member_lines = [line for line in listed.splitlines() if "train[" in line]
    assert [line.rsplit("; ", 1)[1] for line in member_lines] == [
        *(f"array 1, index {index}" for index in range(4)),
        *(f"array 2, index {index}" for index in range(2)),
    ]


def test_the_spec_diff_shows_a_sweep_once(repo: GitRepo) -> None:
    base = load(repo)
    grown = TRAIN.replace("seed: [0, 1, 2]", "seed: [0, 1, 2, 3]").replace("echo", "printf")
    head = load(repo, grown)
    result = diff(base, head)
    (entry,) = result.entries
    assert entry.kind == "Sweep" and entry.members is not None
    assert entry.members.added == ("train[lr=0.1,seed=3]", "train[lr=0.2,seed=3]")
    assert len(entry.members.changed) == 6
    assert [change.field for change in entry.fields] == ["command"]
    text = specdiff_report.as_text(result)
    assert "members added (2): train[lr=0.1,seed=3], train[lr=0.2,seed=3]" in text
    assert "members changed: 6 of 8" in text


def test_an_aggregate_waits_for_an_array_in_flight_by_its_id(repo: GitRepo) -> None:
    aggregate = (
        "kind: Run\nname: aggregate\ninputs:\n  models: train.model\n"
        "command: cat {inputs.models.paths}\n"
    )
    repo.write({"specs/aggregate.yaml": aggregate})
    desired = load(repo)
    runs = [desired.runs[name] for name in desired.sweeps["train"].members]
    members = ArrayMap("train", {i: (run.name, run.spec_hash) for i, run in enumerate(runs)})
    found = Observation(taken_at=NOW, jobs=(array_job(desired, members, "55"),), complete=True)
    own = split_by_owner(
        found, desired.project.project, deployment(desired), (), {"55": members}
    ).own
    plan = make_plan(desired, own, [], NOW, scheduler="slurm")
    (action,) = [a for a in plan.actions if a.target == "aggregate"]
    # Two tasks succeeded, four are pending: afterok on the array waits for the same.
    assert action.kind is ActionKind.SUBMIT and action.after_jobs == ("55",)


def test_an_array_map_is_read_where_this_release_or_an_earlier_one_wrote_it(
    repo: GitRepo, tmp_path: Path
) -> None:
    """Earlier releases wrote maps in <sweep dir>/.recon/arrays/: an array they submitted
    is still split per member after an upgrade. Where both are, this release's wins."""
    desired = load(repo)
    runs = [desired.runs[name] for name in desired.sweeps["train"].members]
    members = ArrayMap("train", {i: (run.name, run.spec_hash) for i, run in enumerate(runs)})
    job = array_job(desired, members, "55")
    sweep_dir = tmp_path / "runs" / "train"
    rows = tuple(replace(row, workdir=str(sweep_dir)) for row in job.rows)
    found = Observation(taken_at=NOW, jobs=(job.model_copy(update={"rows": rows}),), complete=True)

    def read() -> dict[str, ArrayMap]:
        return read_maps(found, desired.project.project, deployment(desired))

    assert read() == {}
    earlier = sweep_dir / ".recon" / "arrays" / f"{members.digest}.json"
    earlier.parent.mkdir(parents=True)
    earlier.write_text(members.to_json())
    assert read() == {"55": members}
    newer = map_file(sweep_dir, members.digest)
    assert newer.parent == sweep_dir / ".recon-run" / "arrays"
    newer.parent.mkdir(parents=True)
    newer.write_text(ArrayMap("train", {0: members.members[0]}).to_json())
    assert read() == {"55": ArrayMap("train", {0: members.members[0]})}
