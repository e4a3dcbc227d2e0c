"""The outputs the docs show that recon's pure parts produce: plans on a constructed
cluster state, batch scripts, the salloc and srun command lines, spec errors, and the
lines apply prints.

Each test fetches its block by the key tests/unit/test_doc_blocks.py lists it under and
compares it with what recon's own code makes. Commit ids are masked everywhere (a doc's
example commit is not the test's), and the project folder is the doc's
(`/home/ana/cartpole`) in place of the test's temporary one; anything else masked is said
where it is.
"""

from __future__ import annotations

import dataclasses
import shutil
from datetime import timedelta
from pathlib import Path

from reconciler.engine.actions import Plan
from reconciler.engine.fit import FitChecker
from reconciler.engine.plan import plan
from reconciler.report.plan import as_text
from reconciler.scheduler.base import JobRecord, Observation, ObservedJob
from reconciler.scheduler.slurm.combine import combine
from reconciler.scheduler.slurm.parse import Parsed
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.spec.desired import Desired, flat_fields
from reconciler.spec.loader import load_desired
from reconciler.spec.source import WorktreeSource
from reconciler.state.records import SubmissionRecord, SubmissionStatus
from tests.docs import EXAMPLE, PIPELINE, TWO_GPUS, matches, shown_block
from tests.planning import DEV, NOW

DEPLOYMENT = "a912d092faab"  # any: the planner is handed this deployment's jobs only


def example_desired(tmp_path: Path, pipeline: str = PIPELINE, name: str = "cartpole") -> Desired:
    """The example project with ``pipeline`` as its specs/pipeline.yaml, read from disk,
    as if at a commit (the plans name one)."""
    root = tmp_path / name
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    (root / "specs" / "pipeline.yaml").write_text(pipeline)
    desired = load_desired(WorktreeSource(root))
    return dataclasses.replace(desired, commit="dfb3ee034c2a" + "0" * 28)


def slurm_job(
    name: str,
    spec_hash: str,
    job_id: str,
    state: SlurmState,
    exit_code: int | None = None,
    steps: tuple[JobRecord, ...] = (),
    components: int = 1,
) -> ObservedJob:
    """A job of the example project as squeue (alive) or sacct (ended) shows it; a het
    job has one row per component."""
    tag = Tag(project="cartpole", deployment=DEPLOYMENT, kind="run", name=name, spec_hash=spec_hash)
    source = "squeue" if state in (SlurmState.PENDING, SlurmState.RUNNING) else "sacct"
    rows = tuple(
        JobRecord(
            job_id=f"{job_id}+{offset}" if components > 1 else job_id,
            top_id=job_id,
            het_offset=offset if components > 1 else None,
            tag=tag,
            state=state,
            exit_code=exit_code,
            source=source,
        )
        for offset in range(components)
    )
    return ObservedJob(job_id=job_id, tag=tag, rows=rows + steps)


def journal_record(
    desired: Desired, name: str, job_id: str, final: Health | None, exit_code: int | None = None
) -> SubmissionRecord:
    """The journal's record of a job of ``desired``'s spec of ``name``."""
    run = desired.runs[name]
    return SubmissionRecord(
        id=int(job_id),
        project="cartpole",
        name=name,
        spec_hash=run.spec_hash,
        commit=desired.commit,
        job_id=job_id,
        status=SubmissionStatus.SUBMITTED,
        final_health=final,
        exit_code=exit_code,
        spec_fields=flat_fields(run.spec),
        created_at=NOW - timedelta(hours=1),
        updated_at=NOW - timedelta(hours=1),
    )


# docs/cli.md's illustration: at the commit "train on two GPUs; evaluate gets 2GiB", a
# Slurm cluster where prepare succeeded, train's old job is pending, evaluate's old spec
# succeeded, actor-learner failed, and a job of a run `old-sweep`, deleted from the repo,
# runs and is missing from the journal.
def illustration(tmp_path: Path, complete: bool) -> Plan:
    before = example_desired(tmp_path / "before")
    now = example_desired(tmp_path / "now", TWO_GPUS)
    old = {name: before.runs[name].spec_hash for name in before.runs}
    records = [
        journal_record(before, "evaluate", "4090", Health.SUCCEEDED),
        journal_record(before, "actor-learner", "4100", Health.FAILED, exit_code=1),
        journal_record(before, "prepare", "4101", Health.SUCCEEDED),
        journal_record(before, "train", "4102", None),
    ]
    live = (
        slurm_job("old-sweep", "0123456789abcdef", "4099", SlurmState.RUNNING),
        slurm_job("train", old["train"], "4102", SlurmState.PENDING),
    )
    ended = (
        slurm_job("evaluate", old["evaluate"], "4090", SlurmState.COMPLETED, exit_code=0),
        slurm_job(
            "actor-learner", old["actor-learner"], "4100", SlurmState.FAILED, 1, components=2
        ),
        slurm_job("prepare", old["prepare"], "4101", SlurmState.COMPLETED, exit_code=0),
    )
    if complete:
        observation = Observation(taken_at=NOW, jobs=live + ended, complete=True)
    else:  # as the Slurm adapter folds squeue's rows when sacct fails
        squeue = Parsed(records=tuple(row for job in live for row in job.rows), rejected=())
        observation = combine(squeue, None, NOW, SACCT_DOWN)
    return plan(now, observation, records, NOW, scheduler="slurm")


SACCT_DOWN = "sacct: error: Problem talking to the database: Connection refused"


def test_the_illustration_with_more_action_kinds(tmp_path: Path) -> None:
    shown = shown_block("docs/cli.md: recon plan for project cartpole at commit dfb3ee034c2a (sche")
    printed = as_text(illustration(tmp_path, complete=True))
    assert matches(printed, shown.body), f"{shown.where}: the planner prints\n{printed}"


def test_the_illustration_with_sacct_failing(tmp_path: Path) -> None:
    shown = shown_block(
        "docs/cli.md: recon plan for project cartpole at commit dfb3ee034c2a (sche #2"
    )
    printed = as_text(illustration(tmp_path, complete=False))
    assert matches(printed, shown.body), f"{shown.where}: the planner prints\n{printed}"


EIGHT_GPUS = PIPELINE.replace("  gpus: a100:1\n", "  gpus: a100:8\n")


def test_the_fit_check_in_a_plan(tmp_path: Path) -> None:
    """docs/cli.md's plan on the dev cluster's partitions at a commit giving train eight
    GPUs, and the two lines of it docs/het.md shows."""
    printed = as_text(
        plan(
            example_desired(tmp_path, EIGHT_GPUS),
            Observation(taken_at=NOW, jobs=(), complete=True),
            [],
            NOW,
            scheduler="slurm",
            fit=FitChecker(DEV),
        )
    )
    whole = shown_block("docs/cli.md: recon plan for project cartpole at commit 3244295f3508 (sche")
    assert matches(printed, whole.body), f"{whole.where}: the planner prints\n{printed}"
    lines = shown_block("docs/het.md: ! blocked   train          does not fit the cluster: partiti")
    assert lines.body in printed, f"{lines.where}: the planner prints\n{printed}"


def test_a_teardown_in_a_plan(tmp_path: Path) -> None:
    """docs/het.md's: job 4200 of actor-learner, whose step 4200+0.0 (the environment
    server) failed while the learner on component 1 still runs."""
    desired = example_desired(tmp_path)
    spec_hash = desired.runs["actor-learner"].spec_hash
    failed_step = JobRecord(
        job_id="4200+0.0",
        top_id="4200",
        het_offset=0,
        step="0",
        state=SlurmState.FAILED,
        exit_code=1,
        source="sacct",
    )
    job = slurm_job(
        "actor-learner", spec_hash, "4200", SlurmState.RUNNING, steps=(failed_step,), components=2
    )
    records = [journal_record(desired, "actor-learner", "4200", None)]
    observation = Observation(taken_at=NOW, jobs=(job,), complete=True)
    made = plan(desired, observation, records, NOW, scheduler="slurm", targets=["actor-learner"])
    printed = as_text(made)
    shown = shown_block("docs/het.md: recon plan for project cartpole at commit 209efed50411 (sche")
    assert matches(printed, shown.body), f"{shown.where}: the planner prints\n{printed}"
