"""A prune can never empty a project by accident, and a rename is no accident, on the
real dev cluster.

Running jobs, then a commit that empties the specs pattern: `recon apply` and a pass of
`recon watch` cancel nothing, exit (apply) non-zero and say why; `--allow-prune-all`
confirms it and the jobs are cancelled. A `specs:` pattern written in recon.yaml that
matches no file is refused before anything is planned. Each test has a project of its
own, whose jobs the harness cancels at the end.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.integration.harness import Project, run_spec
from tests.integration.test_watch import Watch

pytestmark = pytest.mark.slurm

SLEEPERS = {f"specs/s{i}.yaml": run_spec(f"s{i}", "sleep 300") for i in range(3)}


def running(project: Project) -> set[str]:
    return {job["id"] for job in project.jobs() if job["state"] in ("RUNNING", "PENDING")}


def three_running(project: Project) -> set[str]:
    """Commit three sleeping runs, apply, and wait for their jobs to run."""
    project.repo.commit(SLEEPERS, message="three sleepers")
    project.apply()
    project.wait_for("the three jobs to run", lambda: len(running(project)) == 3)
    return running(project)


def move_specs_out_of_the_pattern(project: Project) -> None:
    """The default patterns (specs/**/*.yaml) now match nothing: every run left."""
    for name, text in SLEEPERS.items():
        project.repo.remove(name)
        project.repo.write({name.replace("specs/", "experiments/"): text})
    project.repo.commit(message="move the specs")


def all_cancelled(project: Project, jobs: set[str]) -> bool:
    states = {job["id"]: job["state"] for job in project.jobs()}
    return all(states.get(job, "").startswith("CANCELLED") for job in jobs)


def test_apply_refuses_to_empty_the_project_until_confirmed(
    project: Project, tmp_path: Path
) -> None:
    jobs = three_running(project)
    move_specs_out_of_the_pattern(project)

    planned = project.recon("plan", ".")
    assert planned.returncode == 0, planned.stderr
    assert "Plan: 0 to submit, 0 to replace, 3 to cancel." in planned.stdout
    assert "Held: the commit declares no run or allocation, and the plan's prunes would " in (
        planned.stdout
    )

    refused = project.recon("apply", ".", "--auto-approve")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "cancelled job" not in refused.stdout
    assert (
        "\nerror: refused to apply: the commit declares no run or allocation, and the plan's "
        "prunes would cancel 3 jobs of the project (s0, s1, s2 left the specs). Nothing of it "
        "is carried out"
    ) in refused.stderr, refused.stderr
    assert "`recon apply --allow-prune-all`" in refused.stderr

    # A saved plan is held the same way.
    saved = tmp_path / "empty.plan"
    assert project.recon("plan", ".", "--out", str(saved)).returncode == 0
    again = project.recon("apply", str(saved), "--auto-approve")
    assert again.returncode == 1 and "refused to apply" in again.stderr, again.stderr
    time.sleep(2)  # had anything been cancelled, squeue would say so by now
    assert running(project) == jobs

    confirmed = project.recon("apply", str(saved), "--auto-approve", "--allow-prune-all")
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    cancelled = set(confirmed.stdout.split("cancelled job ")[1:])
    assert {line.split()[0] for line in cancelled} == jobs, confirmed.stdout
    project.wait_for("the cancels", lambda: all_cancelled(project, jobs))


def test_a_watch_pass_cancels_nothing_logs_and_notifies_once(
    project: Project, tmp_path: Path
) -> None:
    jobs = three_running(project)
    move_specs_out_of_the_pattern(project)
    told = tmp_path / "told.jsonl"
    notifier = tmp_path / "notify.sh"
    notifier.write_text(f'#!/bin/sh\ncat >> "{told}"\n')
    notifier.chmod(0o755)

    watch = Watch(project, "--notify", str(notifier))
    try:
        refused = watch.wait_for("prune-refused")
        assert refused["level"] == "warning"
        assert refused["message"].startswith(
            "the commit declares no run or allocation, and the plan's prunes would cancel 3 "
        )
        for _ in range(3):  # three more passes, every 2 s: held, and neither logged again
            watch.wait_for("pass")
    finally:
        watch.stop()
    assert [line["event"] for line in watch.seen].count("prune-refused") == 1
    assert not [line for line in watch.seen if line["event"] == "cancelled"]
    events = [json.loads(line)["event"] for line in told.read_text().splitlines()]
    assert events == ["prune-refused"], events
    assert running(project) == jobs

    confirmed = Watch(project, "--allow-prune-all")
    try:
        for _ in jobs:
            confirmed.wait_for("cancelled")
    finally:
        confirmed.stop()
    project.wait_for("the cancels", lambda: all_cancelled(project, jobs))


def test_a_pattern_that_matches_nothing_is_refused_before_any_plan(project: Project) -> None:
    jobs = three_running(project)
    name = project.name
    project.repo.commit(
        {"recon.yaml": f"project: {name}\ndefaults:\n  partition: cpu\n  time: 10\n"
         "specs:\n  - spec/*.yaml\n"},
        message="a typo in the pattern",
    )  # fmt: skip
    for command in (("validate", "."), ("plan", "."), ("apply", ".", "--auto-approve")):
        result = project.recon(*command)
        assert result.returncode == 1, result.stdout + result.stderr
        assert "recon.yaml:6: specs: the pattern 'spec/*.yaml' matches no file at commit" in (
            result.stderr
        ), result.stderr
        assert "cancelled job" not in result.stdout
    time.sleep(2)
    assert running(project) == jobs


def test_a_watch_carries_out_a_rename_holds_an_emptied_commit_and_recovers(
    project: Project, tmp_path: Path
) -> None:
    """The only live run renamed: the watch cancels its job and submits the new name.
    Then a commit that declares nothing is held (notified), a second such commit is
    notified again, and the commit that brings the run back ends the hold."""
    project.repo.commit({"specs/s0.yaml": SLEEPERS["specs/s0.yaml"]}, message="one sleeper")
    project.apply()
    project.wait_for("the job to run", lambda: len(running(project)) == 1)
    (old,) = running(project)
    told = tmp_path / "told.jsonl"
    notifier = tmp_path / "notify.sh"
    notifier.write_text(f'#!/bin/sh\ncat >> "{told}"\n')
    notifier.chmod(0o755)
    watch = Watch(project, "--notify", str(notifier))
    try:
        watch.wait_for("pass")
        renamed = project.repo.commit({"specs/s0.yaml": run_spec("renamed", "sleep 300")})
        watch.wait_for("pass", lambda line: line["commit"] == renamed)
        done = {(line["event"], line.get("job_id"), line.get("run")) for line in watch.seen}
        assert ("cancelled", old, None) in done, watch.seen
        assert any(what[0] == "submitted" and what[2] == "renamed" for what in done)
        project.wait_for("the new job", lambda: len(running(project) - {old}) == 1)
        (new,) = running(project) - {old}
        project.repo.remove("specs/s0.yaml")
        project.repo.commit(message="the specs are gone")
        first = watch.wait_for("prune-refused")
        project.repo.commit({"notes.txt": "still empty"}, message="still nothing declared")
        second = watch.wait_for("prune-refused", lambda line: line["commit"] != first["commit"])
        fixed = project.repo.commit({"specs/s0.yaml": run_spec("renamed", "sleep 300")})
        watch.wait_for("pass", lambda line: line["commit"] == fixed)
    finally:
        watch.stop()
    assert second["message"] == first["message"]
    assert not [line for line in watch.seen if line["event"] == "cancelled"][1:]
    events = [json.loads(line)["event"] for line in told.read_text().splitlines()]
    assert events.count("prune-refused") == 2, events
    assert running(project) == {new}
