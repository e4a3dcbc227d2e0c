"""A run's shape and hash are known before its model is built, and match the model.

A pass over 10,000 current runs reads where each writes, what it reads and its hash; the
loader answers those from the document summaries, so no model is built (1 CPU second and
28 MiB at 10,000 runs). These tests hold the summary-made shape to the model it stands for,
and count the models a plan of current runs builds.
"""

from __future__ import annotations

from reconciler.desired.desired import Desired, DesiredRun, RunShape, spec_hash
from reconciler.desired.loader import load_desired, open_source
from reconciler.engine.ledger.status import run_statuses
from reconciler.engine.plan import plan as make_plan
from reconciler.engine.plan.actions import ActionKind
from reconciler.engine.plan.fit import FitChecker
from reconciler.engine.plan.inputs import FileState
from reconciler.scheduler.states import Health
from tests.gitrepo import GitRepo
from tests.planning import DEV, NOW, PROJECT, observed, record

SPECS = {
    "recon.yaml": f"project: {PROJECT}\nspecs:\n  - 'specs/*.yaml'\n",
    "specs/prepare.yaml": """\
kind: Run
name: prepare
command: fetch {inputs.raw.path} > {outputs.dataset.path}
inputs:
  raw: {path: /data/raw.csv}
outputs:
  dataset: {path: d.csv, marker: DONE, hash: content}
  log: prepare.log
""",
    "specs/train.yaml": """\
kind: Run
name: train
matrix:
  lr: [0.1, 0.2]
  seed: [0, 1]
command: train {inputs.data.path} {matrix.lr} > {outputs.model.path}
inputs:
  data: prepare.dataset
outputs:
  model: model.txt
""",
    "specs/best.yaml": """\
kind: Run
name: best
script: best.sh
workdir: results/best
inputs:
  first: train[lr=0.1,seed=0].model
  all: train.model
outputs:
  table: table.csv
""",
    "specs/pool.yaml": """\
kind: Allocation
name: pool
time_limit: "01:00:00"
resources:
  cpus: 2
---
kind: Run
name: serve
command: serve
allocation: pool
coupled_with: [prepare]
""",
    "best.sh": "#!/bin/sh\necho best > table.csv\n",
}


def loaded(repo: GitRepo) -> Desired:
    repo.commit(SPECS)
    return load_desired(open_source(repo.root))


def test_every_run_shape_and_hash_are_known_without_its_model_and_match_it(
    repo: GitRepo,
) -> None:
    desired = loaded(repo)
    names = list(desired.runs)
    assert len(names) == 7  # prepare, four members, best, serve
    before = {}
    for name in names:
        run = desired.runs[name]
        before[name] = (run.shape, run.spec_hash if run.script_text is None else None)
        # The script run's hash joins its script's content: only that one builds.
        assert not run.built or run.script_text is not None, name
    for name in names:
        run = desired.runs[name]
        shape, digest = before[name]
        assert shape == RunShape.of(run.spec), name
        if digest is not None:
            assert digest == spec_hash(run.spec, run.script_text), name


def test_the_shape_says_what_the_summary_knows(repo: GitRepo) -> None:
    desired = loaded(repo)
    prepare, best = desired.runs["prepare"], desired.runs["best"]
    assert prepare.outputs["dataset"].marker == "DONE"
    assert prepare.outputs["dataset"].hash == "content"
    assert prepare.outputs["log"].hash == "fingerprint"
    assert prepare.inputs["raw"].path == "/data/raw.csv"
    assert best.inputs["first"].upstream == ("train[lr=0.1,seed=0]", "model")
    assert best.inputs["all"].from_ == "train.model"
    assert best.workdir == "results/best"
    assert desired.runs["train[lr=0.2,seed=1]"].workdir == "runs/train/lr=0.2,seed=1"
    assert desired.runs["serve"].allocation == "pool"
    assert desired.runs["serve"].coupled_with == ("prepare",)
    assert not prepare.built and not desired.runs["serve"].built


def test_the_plan_and_status_of_current_runs_build_no_model(repo: GitRepo) -> None:
    desired = loaded(repo)
    plain = [name for name in desired.runs if desired.runs[name].script_text is None]
    records = [
        record(name, desired.runs[name].spec_hash, str(100 + index), final=Health.SUCCEEDED)
        for index, name in enumerate(plain)
    ]
    made = make_plan(
        desired, observed(), records, NOW, scheduler="slurm", files=FileState(), fit=None
    )
    kinds = {action.target: action.kind for action in made.actions if action.target_kind == "run"}
    assert all(kinds[name] is ActionKind.NOOP for name in plain), kinds
    rows = run_statuses(desired, made, observed(), records)
    assert {row.name: row.outputs for row in rows}["prepare"] == {
        "dataset": "d.csv",
        "log": "prepare.log",
    }
    built = [name for name in plain if desired.runs[name].built]
    assert built == [], "a current run's model was built by its plan or status"
    # The script run is built: its script's content joins its hash.
    assert kinds["best"] is ActionKind.SUBMIT and desired.runs["best"].built


# Project defaults fill resources; a het run, a partition of its own and runs written
# alike (which share one resources object) are among them.
RESOURCES = {
    "recon.yaml": f"""\
project: {PROJECT}
defaults:
  time: "02:00:00"
  partition: cpu
  memory: 2GB
specs:
  - 'specs/*.yaml'
""",
    "specs/runs.yaml": """\
kind: Run
name: a
command: a
resources: {cpus: 2, memory: 4GB}
---
kind: Run
name: b
command: b
resources: {cpus: 2, memory: 4GB}
---
kind: Run
name: bare
command: bare
---
kind: Run
name: gpu
command: gpu
resources: {partition: gpu, gpus: "a100:2", time: "00:30:00", sbatch_extra: [--exclusive]}
---
kind: Run
name: het
command: het
resources:
  components:
    - {cpus: 4}
    - {partition: gpu, gpus: 1}
---
kind: Run
name: sweep
matrix: {seed: [0, 1, 2]}
command: sweep {matrix.seed}
resources: {cpus: 8+}
""",
}


def test_a_runs_resources_are_known_without_its_model_and_match_it(repo: GitRepo) -> None:
    repo.commit(RESOURCES)
    desired = load_desired(open_source(repo.root))
    names = list(desired.runs)
    before = {name: desired.runs[name].resources for name in names}
    assert not any(desired.runs[name].built for name in names)
    assert before["a"] is before["b"], "runs written alike share their resources"
    assert before["sweep[seed=0]"] is before["sweep[seed=2]"]
    assert before["bare"].time is not None and before["bare"].partition == "cpu"
    assert [c.partition for c in before["het"].components] == ["cpu", "gpu"]
    for name in names:
        model = desired.runs[name].spec.resources
        assert before[name] == model, name
        assert before[name].model_fields_set == model.model_fields_set, name
        for ours, theirs in zip(before[name].components, model.components, strict=True):
            assert ours.model_fields_set == theirs.model_fields_set, name
        assert desired.runs[name].resources is model, "once built, the model's own"


def test_a_plan_that_submits_every_run_builds_no_model(repo: GitRepo) -> None:
    """Deciding whether 10,000 new runs fit the cluster, and showing a het run's
    components, reads their resources, not their models (80 µs each)."""
    repo.commit(RESOURCES)
    desired = load_desired(open_source(repo.root))
    made = make_plan(
        desired, observed(), [], NOW, scheduler="slurm", files=FileState(), fit=FitChecker(DEV)
    )
    kinds = {action.target: action.kind for action in made.actions if action.target_kind == "run"}
    assert set(kinds.values()) == {ActionKind.SUBMIT}, kinds
    het = next(action for action in made.actions if action.target == "het")
    assert het.details == (
        "component 0: cpus 4, memory 2GB, partition cpu",
        "component 1: memory 2GB, gpus 1, partition gpu",
    )
    assert [name for name in desired.runs if desired.runs[name].built] == []
    unfit = RESOURCES | {
        "specs/runs.yaml": RESOURCES["specs/runs.yaml"].replace("a100:2", "a100:8")
    }
    repo.commit(unfit)
    desired = load_desired(open_source(repo.root))
    made = make_plan(
        desired, observed(), [], NOW, scheduler="slurm", files=FileState(), fit=FitChecker(DEV)
    )
    gpu = next(action for action in made.actions if action.target == "gpu")
    assert gpu.kind is ActionKind.BLOCKED and "does not fit the cluster" in gpu.reason


def test_a_run_built_eagerly_has_its_shape_from_its_model() -> None:
    from tests.planning import desired as eager
    from tests.planning import run

    state = eager(run("a"), run("b", "a"))
    b: DesiredRun = state.runs["b"]
    assert b.built and b.inputs["in_a"].upstream == ("a", "out")
    assert b.workdir == "runs/b"
