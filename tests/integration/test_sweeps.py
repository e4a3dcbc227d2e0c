"""Sweeps on the real dev cluster: a matrix of runs submitted as Slurm job arrays, each
member reconciled on its own (issue #16's acceptance list)."""

from __future__ import annotations

import re
import signal
import subprocess
from pathlib import Path

import pytest

from reconciler.scheduler.tag import Tag
from tests.integration.harness import Project

pytestmark = pytest.mark.slurm


def sweep(command: str, seeds: str = "[0, 1, 2]", extra: str = "") -> str:
    return (
        "kind: Run\nname: train\nmatrix:\n  lr: [0.1, 0.2]\n"
        f"  seed: {seeds}\n{extra}resources:\n  cpus: 1\n  memory: 100MiB\n"
        f"command: '{command}'\noutputs:\n  model: model.txt\n"
    )


WRITES = "echo lr={matrix.lr} seed=$RECON_MATRIX_SEED > {outputs.model.path}"


def tasks(project: Project) -> dict[str, str]:
    """Every array task of the project's sweep Slurm knows: task id -> state."""
    listing = subprocess.run(
        ["sacct", "-X", "-n", "-P", "-S", "now-1hours", "-E", "now", "-o", "JobID,Comment,State"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    live = subprocess.run(
        ["squeue", "-h", "-r", "-o", "%i|%k|%T"], capture_output=True, text=True, check=True
    ).stdout
    found: dict[str, str] = {}
    for line in (listing + live).splitlines():
        job_id, comment, state = [*line.split("|"), "", ""][:3]
        tag = Tag.parse(comment)
        if tag is None or tag.project != project.name or tag.name != "train":
            continue
        if re.fullmatch(r"[0-9]+_[0-9]+", job_id):
            found[job_id] = state.split()[0]
    return found


def arrays(project: Project) -> set[str]:
    return {task.partition("_")[0] for task in tasks(project)}


def submitted(output: str) -> dict[str, str]:
    """run -> job id, from apply's `submitted RUN: job ID` lines."""
    return dict(re.findall(r"^submitted (\S+): job (\S+)$", output, re.MULTILINE))


def settle(project: Project, count: int) -> None:
    project.wait_for(
        f"{count} tasks to end",
        lambda: (
            len(states := tasks(project)) == count
            and all(state not in ("PENDING", "RUNNING", "COMPLETING") for state in states.values())
        ),
    )


def test_a_2x3_sweep_is_one_array_then_adding_a_seed_submits_only_its_members(
    project: Project,
) -> None:
    project.repo.commit({"specs/train.yaml": sweep(WRITES)})
    plan = project.recon("plan", ".")
    assert "+ submit    train          6 of 6 members (1 array): not yet run" in plan.stdout
    first = submitted(project.apply().stdout)
    assert len(first) == 6 and len({job.partition("_")[0] for job in first.values()}) == 1
    settle(project, 6)
    assert set(tasks(project).values()) == {"COMPLETED"}
    model = project.root / "runs" / "train" / "lr=0.2,seed=1" / "model.txt"
    assert model.read_text() == "lr=0.2 seed=1\n"
    project.apply()  # records the endings
    again = project.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout + again.stderr
    status = project.recon("status", ".")
    assert re.search(r"train \(6 members\)\s+current\s+succeeded", status.stdout), status.stdout

    project.repo.commit({"specs/train.yaml": sweep(WRITES, seeds="[0, 1, 2, 3]")})
    second = submitted(project.apply().stdout)
    assert sorted(second) == ["train[lr=0.1,seed=3]", "train[lr=0.2,seed=3]"]
    assert len({job.partition("_")[0] for job in second.values()}) == 1
    settle(project, 8)
    project.apply()
    assert project.recon("plan", ".", "--detailed-exitcode").returncode == 0
    status = project.recon("status", ".", "train")
    for run, job in first.items():  # the first six untouched: their jobs as they were
        assert re.search(rf"^{re.escape(run)}\s+current\s+succeeded\s+{job}\s", status.stdout, re.M)


def test_a_failing_member_is_retried_alone_with_its_own_retries(project: Project) -> None:
    fails = "if [ {matrix.seed} = 2 ] && [ {matrix.lr} = 0.1 ]; then exit 1; fi; " + WRITES
    project.repo.commit({"specs/train.yaml": sweep(fails, extra="retries: 1\n")})
    project.apply()
    settle(project, 6)
    retried = project.apply()
    assert submitted(retried.stdout).keys() == {"train[lr=0.1,seed=2]"}, retried.stdout
    settle(project, 7)
    last = project.apply()
    assert not submitted(last.stdout), last.stdout
    plan = project.recon("plan", ".", "train", "--members")
    assert re.search(r"train\[lr=0\.1,seed=2\]\s+failed", plan.stdout), plan.stdout
    assert plan.stdout.count("current") >= 5


def test_removing_a_value_cancels_only_its_members_tasks_and_keeps_outputs(
    project: Project,
) -> None:
    project.repo.commit({"specs/train.yaml": sweep(WRITES + "; sleep 60")})
    first = submitted(project.apply().stdout)
    project.wait_for(
        "the members to write their outputs",
        # where a job writes them, until it ends and publishes them
        lambda: (
            len(list((project.root / "runs" / "train").glob("*/.recon-staging/model.txt"))) >= 2
        ),
    )
    text = sweep(WRITES + "; sleep 60").replace("lr: [0.1, 0.2]", "lr: [0.2]")
    project.repo.commit({"specs/train.yaml": text})
    pruned = project.apply().stdout
    gone = {run: job for run, job in first.items() if "lr=0.1" in run}
    cancelled = set(re.findall(r"^cancelled job (\S+)$", pruned, re.MULTILINE))
    assert cancelled == set(gone.values()), pruned
    assert not submitted(pruned)
    project.wait_for(
        "the cancels",
        lambda: all(tasks(project).get(job) == "CANCELLED" for job in gone.values()),
    )
    states = tasks(project)
    assert all(states[job] != "CANCELLED" for run, job in first.items() if run not in gone)
    written = list((project.root / "runs" / "train").glob("lr=0.1,*/.recon-staging/model.txt"))
    assert written and all(path.exists() for path in written)  # what they wrote stays
    assert not list((project.root / "runs" / "train").glob("lr=0.1,*/model.txt"))  # unpublished


AGGREGATE = """\
kind: Run
name: aggregate
resources: {cpus: 1, memory: 100MiB}
inputs:
  models: train.model
command: >-
  cat {inputs.models.paths} > {outputs.table.path};
  cat {inputs.models.list} >> {outputs.table.path}
outputs:
  table: table.txt
"""


def _lines(table: Path) -> int:
    """The lines the aggregate has written so far: its two commands write the table one
    after the other, so it exists with the first half before the job ends."""
    return len(table.read_text().splitlines()) if table.exists() else 0


def test_an_aggregate_waits_for_every_member_and_sees_every_path(project: Project) -> None:
    project.repo.commit(
        {"specs/train.yaml": sweep(WRITES + "; sleep 5"), "specs/aggregate.yaml": AGGREGATE}
    )
    applied = submitted(project.apply().stdout)
    array = applied["train[lr=0.1,seed=0]"].partition("_")[0]
    shown = subprocess.run(
        ["scontrol", "show", "job", applied["aggregate"]], capture_output=True, text=True
    ).stdout
    assert re.search(rf"Dependency=afterok:{array}(_\*)?\(", shown), shown
    table = project.root / "runs" / "aggregate" / "table.txt"
    project.wait_for("the aggregate's table", lambda: _lines(table) == 12)
    lines = table.read_text().splitlines()
    assert sorted(lines[:6]) == [f"lr={lr} seed={seed}" for lr in (0.1, 0.2) for seed in range(3)]
    paths = [Path(line) for line in lines[6:]]
    assert len(paths) == 6 and all(path.name == "model.txt" and path.exists() for path in paths)


def test_a_crash_between_sbatch_and_the_journal_adopts_the_array(project: Project) -> None:
    project.repo.commit({"specs/train.yaml": sweep(WRITES + "; sleep 30")})
    crashed = project.recon(
        "apply", ".", "--auto-approve", env={"RECON_FAULT_INJECT": "after-sbatch"}
    )
    assert crashed.returncode == -signal.SIGKILL
    project.wait_for("the array to be listed", lambda: len(tasks(project)) == 6)
    healed = project.apply().stdout
    assert healed.count("adopted job") == 6 and not submitted(healed), healed
    assert len(arrays(project)) == 1
    again = project.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0, again.stdout


def test_an_aggregate_added_while_the_array_runs_waits_for_it_by_its_id(
    project: Project,
) -> None:
    project.repo.commit({"specs/train.yaml": sweep(WRITES + "; sleep 15")})
    first = submitted(project.apply().stdout)
    array = next(iter(first.values())).partition("_")[0]
    project.repo.commit({"specs/aggregate.yaml": AGGREGATE})
    applied = submitted(project.apply().stdout)
    assert list(applied) == ["aggregate"], applied
    shown = subprocess.run(
        ["scontrol", "show", "job", applied["aggregate"]], capture_output=True, text=True
    ).stdout
    assert re.search(rf"Dependency=afterok:{array}(_\*)?\(", shown), shown
    table = project.root / "runs" / "aggregate" / "table.txt"
    project.wait_for("the aggregate's table", lambda: _lines(table) == 12)
