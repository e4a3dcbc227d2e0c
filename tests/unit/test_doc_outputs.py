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
import itertools
import json
import re
import shutil
from datetime import timedelta
from pathlib import Path
from typing import Any, Literal

import pytest
import typer

from reconciler.cli import app
from reconciler.desired.desired import Desired, flat_fields
from reconciler.desired.loader import load_desired
from reconciler.desired.models import Allocation, RunResources
from reconciler.desired.source import WorktreeSource
from reconciler.engine.apply.applier import Applier, Done
from reconciler.engine.apply.scripts import render_context
from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import Action, ActionKind, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.engine.plan.fit import FitChecker
from reconciler.errors import PermanentSchedulerError, SpecError
from reconciler.report.plan import as_text
from reconciler.scheduler.base import (
    AllocateRequest,
    JobRecord,
    Observation,
    ObservedJob,
    StepRequest,
)
from reconciler.scheduler.render import render_batch_script
from reconciler.scheduler.slurm.argv import salloc
from reconciler.scheduler.slurm.combine import combine
from reconciler.scheduler.slurm.parse import Parsed
from reconciler.scheduler.slurm.steps import srun
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.scheduler.usage import JobUsage
from reconciler.state.journal import Journal
from reconciler.state.paths import state_dir
from reconciler.state.records import EndingKind, SubmissionRecord, SubmissionStatus
from tests.cli import recon
from tests.docs import (
    COMMIT,
    DOC_FOLDER,
    EXAMPLE,
    PIPELINE,
    ROOT,
    SWEEP_WITH_A_BAD_TOKEN,
    TWO_GPUS,
    shown_block,
)
from tests.planning import DEV, NOW, PROJECT, desired, hash_of, run

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
    source: Literal["sacct", "squeue"] = (
        "squeue" if state in (SlurmState.PENDING, SlurmState.RUNNING) else "sacct"
    )
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


# The width of a terminal the docs' plans are shown at (COLUMNS=80, as the CLI's).
WIDTH = 80
SACCT_DOWN = "sacct: error: Problem talking to the database: Connection refused"


def test_the_illustration_with_more_action_kinds(tmp_path: Path) -> None:
    shown = shown_block("docs/cli.md: recon plan for project cartpole at commit dfb3ee034c2a (sche")
    printed = as_text(illustration(tmp_path, complete=True), width=WIDTH)
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: the planner prints\n{printed}"
    )


def test_the_illustration_with_sacct_failing(tmp_path: Path) -> None:
    shown = shown_block(
        "docs/cli.md: recon plan for project cartpole at commit dfb3ee034c2a (sche #2"
    )
    printed = as_text(illustration(tmp_path, complete=False), width=WIDTH)
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: the planner prints\n{printed}"
    )


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
        ),
        width=WIDTH,
    )
    whole = shown_block("docs/cli.md: recon plan for project cartpole at commit 3244295f3508 (sche")
    assert but_commits(printed) == but_commits(whole.body), (
        f"{whole.where}: the planner prints\n{printed}"
    )
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
    printed = as_text(made, width=WIDTH)
    shown = shown_block("docs/het.md: recon plan for project cartpole at commit 209efed50411 (sche")
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: the planner prints\n{printed}"
    )


def test_a_retry_by_kind_in_a_plan(tmp_path: Path) -> None:
    """docs/specs.md's: train, with budgets per kind, whose job 4102 timed out after
    20 minutes 34 seconds, as the journal settled it."""
    budgets = "retries: {failure: 1, timeout: 3, preemption: unlimited}\n"
    desired = example_desired(tmp_path, PIPELINE.replace("retries: 1\n", budgets))
    usage = json.dumps(JobUsage(elapsed_s=1234.0).to_json())
    timed_out = dataclasses.replace(
        journal_record(desired, "train", "4102", Health.FAILED),
        ending=EndingKind.TIMEOUT,
        reason="timed out",
        usage_json=usage,
    )
    records = [journal_record(desired, "prepare", "4101", Health.SUCCEEDED), timed_out]
    observation = Observation(taken_at=NOW, jobs=(), complete=True)
    made = plan(desired, observation, records, NOW, scheduler="slurm", targets=["train"])
    printed = as_text(made, width=WIDTH)
    key = "docs/specs.md: recon plan for project cartpole at commit 7a1c3e9f0b42 (sche"
    shown = shown_block(key)
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: the planner prints\n{printed}"
    )


def test_a_requeue_in_a_plan(tmp_path: Path) -> None:
    """docs/specs.md's: train, with a checkpoint, whose job 4102 saved it when warned
    after 18 minutes 34 seconds, as the journal settled it."""
    checkpoint = "checkpoint: {path: ckpt/, before_end: 2m}\n"
    desired = example_desired(tmp_path, PIPELINE.replace("retries: 1\n", checkpoint))
    usage = json.dumps(JobUsage(elapsed_s=1114.0).to_json())
    saved = dataclasses.replace(
        journal_record(desired, "train", "4102", Health.FAILED),
        ending=EndingKind.CHECKPOINTED,
        reason="saved its checkpoint when warned (failed)",
        usage_json=usage,
    )
    records = [journal_record(desired, "prepare", "4101", Health.SUCCEEDED), saved]
    observation = Observation(taken_at=NOW, jobs=(), complete=True)
    made = plan(desired, observation, records, NOW, scheduler="slurm", targets=["train"])
    printed = as_text(made, width=WIDTH)
    key = "docs/specs.md: recon plan for project cartpole at commit 7a1c3e9f0b42 (sche #2"
    shown = shown_block(key)
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: the planner prints\n{printed}"
    )


def but_commits(text: str) -> str:
    """The text with commit ids masked, and nothing else: what these tests make does not
    depend on the time (a plan's `now` is fixed), so times are compared as shown."""
    return COMMIT.sub("<commit>", text).strip("\n")


def rendered(desired: Desired, name: str) -> str:
    """The batch script apply hands sbatch for ``name``, with the project folder the
    doc's. The deployment id in the tag (a hash of where the state directory is) is
    masked with the commit ids: it is 12 hex digits too."""
    run = desired.runs[name]
    assert desired.commit is not None
    # The project is the repository's top folder, so its snapshot is the commit's.
    code = state_dir(desired) / "checkouts" / desired.commit
    script = render_batch_script(run, render_context(desired, run, code))
    return script.replace(str(desired.root), DOC_FOLDER)


def test_a_cascade_in_a_plan(tmp_path: Path) -> None:
    """docs/specs.md's plan of a change to prepare, every run having succeeded before."""
    before = example_desired(tmp_path / "before")
    now = example_desired(tmp_path / "now", PIPELINE.replace("--episodes 200", "--episodes 300"))
    records = [
        dataclasses.replace(
            journal_record(before, name, str(4200 + index), Health.SUCCEEDED),
            input_versions=dict.fromkeys(before.runs[name].inputs, "9f" * 32),
        )
        for index, name in enumerate(before.runs)
    ]
    observation = Observation(taken_at=NOW, jobs=(), complete=True)
    made = plan(
        now, observation, records, NOW, scheduler="slurm", targets=["prepare"], downstream=True
    )
    printed = as_text(made, width=WIDTH)
    shown = shown_block(
        "docs/specs.md: recon plan for project cartpole at commit dfb3ee034c2a (sche"
    )
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: the planner prints\n{printed}"
    )


def test_the_whole_batch_script(tmp_path: Path) -> None:
    shown = shown_block("docs/specs.md: #!/bin/bash")
    printed = rendered(example_desired(tmp_path), "train")
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: recon renders\n{printed}"
    )


def test_the_directives_of_a_het_job(tmp_path: Path) -> None:
    shown = shown_block("docs/specs.md: #SBATCH --job-name=cartpole.actor-learner")
    script = rendered(example_desired(tmp_path), "actor-learner")
    printed = "\n".join(line for line in script.splitlines() if line.startswith("#SBATCH"))
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: recon renders\n{printed}"
    )


def template(shown: str) -> re.Pattern[str]:
    """A command line as specs.md writes its form, as a pattern over the argv's words, one
    a line: `<...>`, `...` and a capital letter after `=` stand for any value, `[...]` for
    an optional word, `a|b` for either, and `sbatch_extra...` for any number of long
    options the form does not name."""
    words = re.findall(r"(?:<[^>]*>|[^\s<])+", shown.replace("\\\n", " "))
    named = [re.escape(word.strip("[]").split("=")[0]) for word in words if "--" in word]
    extra = rf"(?:(?!(?:{'|'.join(named)})[=\n])--\S+\n)*"
    pattern = ""
    for word in words:
        optional = word.startswith("[") and word.endswith("]")
        word = word.strip("[]")
        if word == "sbatch_extra...":
            pattern += extra
            continue
        either = "|".join(
            r"\S+".join(re.escape(part) for part in re.split(r"<[^>]*>|\.\.\.|(?<==)[A-Z]$", one))
            for one in word.split("|")
        )
        pattern += f"(?:(?:{either})\n)" + ("?" if optional else "")
    return re.compile(pattern)


def fits(argv: list[str], form: re.Pattern[str]) -> bool:
    return form.fullmatch("".join(f"{word}\n" for word in argv)) is not None


TAG = Tag(project="cartpole", deployment=DEPLOYMENT, kind="alloc", name="warm", spec_hash="0" * 16)


def test_the_salloc_command_line() -> None:
    shown = shown_block(
        "docs/specs.md: salloc --no-shell --job-name=<project>.<name> --comment=<tag"
    )
    form = template(shown.body)
    shape = {"partition": "cpu", "nodes": 1, "cpus": 2, "memory": "1GiB", "gpus": "a100:1"}
    every = {**shape, "account": "a", "qos": "q", "constraint": "ib", "sbatch_extra": ["--x=1"]}
    for resources in ({}, shape, every):
        allocation = Allocation.model_validate(
            {"kind": "Allocation", "name": "warm", "time_limit": "1h", "resources": resources}
        )
        argv = salloc(AllocateRequest(allocation=allocation, tag=TAG))
        assert fits(argv, form), f"{shown.where}: recon runs {argv}"
    # The form is checked: without --comment, or with two options swapped, it fails.
    assert not fits([*argv[:3], *argv[4:]], form)
    assert not fits([*argv[:5], argv[6], argv[5], *argv[7:]], form)


def test_the_srun_command_line() -> None:
    shown = shown_block(
        "docs/specs.md: srun --jobid=<job> --overlap|--exact --job-name=recon2:<proj"
    )
    form = template(shown.body)
    run_tag = TAG.model_copy(update={"kind": "run", "name": "evaluate-quick"})
    shapes: tuple[dict[str, int | str], ...] = (
        {},
        {"cpus": 1, "memory": "200MiB"},
        {"nodes": 2, "ntasks": 4, "ntasks_per_node": 2, "cpus": 1},
        {"cpus": 2, "gpus": "a100:1"},
    )
    for shape, gpus in itertools.product(shapes, (False, True)):
        request = StepRequest(
            allocation_id="12",
            script=Path("/r/logs/step-0.sh"),
            workdir=Path("/r"),
            log_dir=Path("/r/logs"),
            shape=RunResources.model_validate(shape),
            allocation_gpus=gpus,
            tag=run_tag,
        )
        argv = srun(request)
        assert fits(argv, form), f"{shown.where}: recon runs {argv}"
    # The form is checked: without --overlap, or with two options swapped, it fails.
    assert not fits([*argv[:2], *argv[3:]], form)
    assert not fits([*argv[:9], argv[10], argv[9], *argv[11:]], form)


def spec_errors(tmp_path: Path, name: str, text: str) -> str:
    """What `recon validate` lists for the example project with a file ``name`` added."""
    root = tmp_path / "cartpole"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    (root / name).write_text(text)
    with pytest.raises(SpecError) as error:
        load_desired(WorktreeSource(root))
    return "\n".join(str(issue) for issue in error.value.issues)


def test_an_unknown_template_token(tmp_path: Path) -> None:
    """The sweep file of docs/cli.md's validate section, with its misspelt token."""
    shown = shown_block(
        "docs/specs.md: specs/sweep.yaml:3: command: unknown template token {output."
    )
    printed = spec_errors(tmp_path, "specs/sweep.yaml", SWEEP_WITH_A_BAD_TOKEN)
    assert printed == shown.body.strip(), f"{shown.where}: recon says\n{printed}"


HET_WITH_A_TIME = """\
kind: Run
name: het
command: "true"
resources:
  components:
    - cpus: 1
    - cpus: 1
      time: 1h
"""


def test_a_job_wide_setting_in_a_component(tmp_path: Path) -> None:
    shown = shown_block(
        "docs/specs.md: resources.components.1.time: is a job-wide setting: Slurm ta"
    )
    printed = spec_errors(tmp_path, "specs/het.yaml", HET_WITH_A_TIME)
    assert printed == f"specs/het.yaml:8: {shown.body.strip()}"


def test_a_prefix_of_a_refused_flag(tmp_path: Path) -> None:
    shown = shown_block(
        "docs/specs.md: resources.sbatch_extra.0: --part (short for --partition) is"
    )
    text = 'kind: Run\nname: short\ncommand: "true"\nresources:\n  sbatch_extra: [--part=gpu]\n'
    printed = spec_errors(tmp_path, "specs/short.yaml", text)
    assert printed == f"specs/short.yaml:5: {shown.body.strip()}"


def test_the_other_lines_apply_prints(tmp_path: Path) -> None:
    """docs/cli.md's list of the lines apply may print besides `submitted`: an apply of
    a plan that cancels job 4099, adopts it, and submits evaluate, which Slurm
    refuses, and report, which waits for evaluate."""
    shown = shown_block("docs/cli.md: cancelled job 4099")
    state = dataclasses.replace(
        desired(run("evaluate"), run("report", "evaluate"), run("sweep")), root=tmp_path
    )
    actions = (
        Action(
            kind=ActionKind.CANCEL,
            cause=Cause.PRUNE,
            target="old-sweep",
            reason="left",
            job_ids=("4099",),
        ),
        Action(
            kind=ActionKind.ADOPT,
            cause=Cause.ADOPT,
            target="sweep",
            reason="not in the journal",
            spec_hash=hash_of(state, "sweep"),
            job_ids=("4099",),
        ),
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="evaluate",
            reason="not yet run",
            spec_hash=hash_of(state, "evaluate"),
        ),
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="report",
            reason="not yet run",
            spec_hash=hash_of(state, "report"),
            after=("evaluate",),
        ),
    )
    made = Plan(
        project=PROJECT,
        root=str(tmp_path),
        commit=state.commit,
        scheduler="slurm",
        created_at=NOW,
        observation_complete=True,
        fingerprint="0" * 16,
        actions=actions,
    )
    told: list[Done] = []
    # A Slurm that cancels and refuses every submission with its message.
    refusing = ScriptedScheduler(submit=PermanentSchedulerError("<Slurm's message>"), cancel=None)
    journal = Journal(tmp_path / "journal.sqlite")
    Applier(
        made, state, refusing, journal, tmp_path / "code", lambda: NOW, report=told.append
    ).run()
    assert refusing.cancelled == ["4099"]
    printed = "\n".join(done.line for done in told)
    assert printed == shown.body.strip(), f"{shown.where}: apply prints\n{printed}"
    on_stderr = [done.line.split()[0] for done in told if done.problem]
    assert on_stderr == ["refused", "skipped"]  # as the doc says under the block


def test_the_lines_the_examples_hold() -> None:
    """operations.md quotes the command examples/cron/recon-watch.service runs and the
    line of examples/cron/crontab: not outputs, but copies that must not drift."""
    service = shown_block(
        "docs/operations.md: recon watch . --branch main --interval 30s --pull --log-form"
    )
    unit = (ROOT / "examples" / "cron" / "recon-watch.service").read_text().splitlines()
    assert f"ExecStart=/opt/recon/bin/{service.body.strip()}" in unit, service.where
    cron = shown_block(
        "docs/operations.md: *   *  *   *   *     cd /srv/recon/my-project && /opt/recon/"
    )
    crontab = (ROOT / "examples" / "cron" / "crontab").read_text().splitlines()
    assert cron.body.strip() in crontab, cron.where


def synopsis(text: str) -> dict[str, list[str]]:
    """Each command a synopsis block names (`plan`, `export ro-crate`), with the words
    of its entries: an entry starts with `recon`, its indented lines go on."""
    entries: list[list[str]] = []
    for line in text.splitlines():
        if line.startswith("recon "):
            entries.append([])
        entries[-1].extend(line.split())
    found: dict[str, list[str]] = {}
    for words in entries:
        path = list(
            itertools.takewhile(lambda word: re.fullmatch(r"[a-z][a-z-]*", word), words[1:])
        )
        found.setdefault(" ".join(path), []).extend(words[1 + len(path) :])
    return found


def commands() -> dict[str, Any]:
    """Every command of recon's command line, by its path (`export ro-crate`)."""
    found: dict[str, Any] = {}

    def walk(command: Any, path: str) -> None:
        if hasattr(command, "commands"):  # a group (typer's click, which may be its own)
            for name, sub in command.commands.items():
                walk(sub, f"{path} {name}".strip())
        else:
            found[path] = command

    walk(typer.main.get_command(app), "")
    return found


def test_the_synopsis_is_the_command_line(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """cli.md's synopsis names every command and every option each takes, and only
    those; where it lists an option's values (`text|markdown|json`), the command's help
    lists them (status's help also lists markdown, which prints as text: the synopsis
    leaves that alias out). dev-cluster's synopsis likewise for its commands."""
    shown = {
        **synopsis(shown_block("docs/cli.md: recon version").body),
        **synopsis(shown_block("docs/cli.md: recon dev-cluster up [--timeout SECONDS]").body),
    }
    real = commands()
    assert set(shown) == set(real)
    monkeypatch.setenv("COLUMNS", "300")  # the help on one line per option
    for name, words in shown.items():
        text = " ".join(words)
        options = {option for param in real[name].params for option in param.opts}
        named = set(re.findall(r"--[a-z][a-z-]*", text))
        assert named == {o for o in options if o.startswith("--")}, (
            f"recon {name}: the synopsis names {sorted(named)}"
        )
        helped = recon(capsys, *name.split(), "--help").out
        listed = dict(re.findall(r"(--[a-z-]+) <?([a-z]+(?:\|[a-z]+)+)>?", helped))
        for option, values in re.findall(r"(--[a-z-]+) ([a-z]+(?:\|[a-z]+)+)", text):
            accepted = listed.get(option, "").split("|")
            assert set(values.split("|")) <= set(accepted), f"recon {name} {option}: {helped}"


def task(name: str, spec_hash: str, array: str, index: int, state: SlurmState) -> ObservedJob:
    """A sweep member's job: one task of the array job ``array``, as squeue shows it."""
    tag = Tag(project="cartpole", deployment=DEPLOYMENT, kind="run", name=name, spec_hash=spec_hash)
    row = JobRecord(
        job_id=f"{array}_{index}", top_id=array, array_task=str(index), tag=tag, state=state,
        source="squeue",
    )  # fmt: skip
    return ObservedJob(job_id=row.job_id, tag=tag, rows=(row,))


def held_plan(tmp_path: Path) -> Plan:
    """docs/cli.md's held plan: the example project at a commit that moved specs/seeds.yaml
    out of the `specs:` pattern, on a Slurm cluster where the sweep's six members (four
    running, two waiting for `max_parallel`), `compare`, `train` and `evaluate` are live."""
    before = example_desired(tmp_path / "before")
    root = tmp_path / "cartpole"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    (root / "specs" / "seeds.yaml").unlink()
    now = dataclasses.replace(load_desired(WorktreeSource(root)), commit="5e1d0c" + "0" * 34)
    members = sorted(name for name in before.runs if name.startswith("seeds["))
    states = [SlurmState.RUNNING] * 4 + [SlurmState.PENDING] * 2
    jobs = [
        task(name, before.runs[name].spec_hash, "4203", index, state)
        for index, (name, state) in enumerate(zip(members, states, strict=True))
    ]
    jobs += [
        slurm_job("compare", before.runs["compare"].spec_hash, "4209", SlurmState.PENDING),
        slurm_job("train", now.runs["train"].spec_hash, "4210", SlurmState.RUNNING),
        slurm_job("evaluate", now.runs["evaluate"].spec_hash, "4211", SlurmState.PENDING),
        slurm_job("prepare", now.runs["prepare"].spec_hash, "4202", SlurmState.COMPLETED, 0),
        slurm_job("actor-learner", now.runs["actor-learner"].spec_hash, "4200",
                  SlurmState.COMPLETED, 0, components=2),
    ]  # fmt: skip
    records = [
        dataclasses.replace(
            journal_record(before if job.tag.name in [*members, "compare"] else now,
                           job.tag.name, job.job_id.partition("_")[0], None),
            job_id=job.job_id,
            final_health=Health.SUCCEEDED if job.health is Health.SUCCEEDED else None,
        )
        for job in jobs
    ]  # fmt: skip
    observation = Observation(taken_at=NOW, jobs=tuple(jobs), complete=True)
    return plan(now, observation, records, NOW, scheduler="slurm")


def test_a_held_plan(tmp_path: Path) -> None:
    shown = shown_block("docs/cli.md: recon plan for project cartpole at commit 5e1d0c000000 (sche")
    printed = as_text(held_plan(tmp_path), width=WIDTH)
    assert but_commits(printed) == but_commits(shown.body), (
        f"{shown.where}: the planner prints\n{printed}"
    )
