"""Pause by commit and the GPU-hour budget on the local backend, by apply, status and a
real `recon watch` (the dev cluster's half is tests/integration/test_holds.py): a
suspended or held pass carries out nothing, says so, and the next commit that fixes it
goes on."""

from __future__ import annotations

from pathlib import Path

from tests.docs import Watched
from tests.gitrepo import GitRepo
from tests.local.serving import recon
from tests.projects import new_project_name


def spec(name: str, *upstreams: str, extra: str = "") -> str:
    inputs = "".join(f"  in_{up}: {up}.out\n" for up in upstreams)
    return (
        f"kind: Run\nname: {name}\ncommand: echo {name} > {{outputs.out.path}}\n"
        f"outputs:\n  out: out.txt\n{extra}" + (f"inputs:\n{inputs}" if inputs else "")
    )


def project(tmp_path: Path, settings: str = "", **specs: str) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    head = f"project: {new_project_name('hd')}\nscheduler: local\n"
    repo.commit({"recon.yaml": head + settings, **{f"specs/{n}.yaml": t for n, t in specs.items()}})
    return repo


def test_a_suspended_run_and_its_downstream_wait_and_go_on_when_resumed(tmp_path: Path) -> None:
    repo = project(
        tmp_path,
        prep=spec("prep", extra="suspend: true\n"),
        train=spec("train", "prep"),
        other=spec("other"),
    )
    planned = recon(repo.root, "plan", ".", "--detailed-exitcode")
    assert planned.returncode == 2, planned.stdout + planned.stderr  # `other` still to run
    assert "(suspended) not yet run" in planned.stdout
    applied = recon(repo.root, "apply", ".", "--auto-approve")
    assert applied.returncode == 0, applied.stdout + applied.stderr
    assert "submitted other" in applied.stdout
    assert "submitted prep" not in applied.stdout and "submitted train" not in applied.stdout
    status = recon(repo.root, "status", ".")
    assert status.stdout.splitlines()[1].startswith("SUSPENDED: prep, train (`suspend: true`")
    assert "submit: (suspended) not yet run" in status.stdout
    waited = recon(repo.root, "apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert "error: not waiting: suspended: prep, train" in waited.stderr

    repo.commit({"specs/prep.yaml": spec("prep")}, message="resume")
    resumed = recon(repo.root, "apply", ".", "--auto-approve", "--wait")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "submitted prep" in resumed.stdout and "submitted other" not in resumed.stdout
    assert (repo.root / "runs" / "train" / "out.txt").read_text() == "train\n"


def test_a_watch_does_nothing_while_the_project_is_suspended_and_resumes(tmp_path: Path) -> None:
    repo = project(tmp_path, "suspend: true\n", a=spec("a"), b=spec("b", "a"))
    with Watched(repo.root, ".", "--interval", "1s") as watch:
        said = watch.until(lambda line: " suspended " in line)
        watch.until(lambda line: " pass " in line)
        watch.until(lambda line: " pass " in line)  # a second pass: still nothing done
        settings = (repo.root / "recon.yaml").read_text().replace("suspend: true\n", "")
        resumed = repo.commit({"recon.yaml": settings}, message="resume")
        watch.until(lambda line: " submitted " in line and "run=b" in line)
        assert watch.stop() == 0
    before = between(watch.lines, None, resumed)
    assert not [line for line in before if " INFO    submitted " in line], watch.lines
    assert "message='suspended: a, b (`suspend: true` in recon.yaml" in said


def between(lines: list[str], first: str | None, until: str) -> list[str]:
    """The log lines from the first of commit `first` (the start: None) to the first of
    commit `until`."""
    start = (
        0
        if first is None
        else next(i for i, line in enumerate(lines) if f"commit={first[:12]}" in line)
    )
    rest = lines[start:]
    end = next(i for i, line in enumerate(rest) if f"commit={until[:12]}" in line)
    return rest[:end]


GPU = "resources: {gpus: 1, time: 2h}\n"  # never run: its time limit, 2 GPU-hours


def test_a_plan_over_budget_is_held_until_confirmed(tmp_path: Path) -> None:
    repo = project(tmp_path, "budget: {gpu_hours: 3}\nlocal: {gpus: 2}\n", g1=spec("g1", extra=GPU),
                   g2=spec("g2", extra=GPU), cpu=spec("cpu"))  # fmt: skip
    refused = recon(repo.root, "apply", ".", "--auto-approve")
    assert refused.returncode == 1, refused.stdout + refused.stderr
    assert "submitted" not in refused.stdout
    assert (
        "error: refused to apply: the plan's 2 GPU runs (g1, g2) are forecast to take 4 "
        "GPU-hours: more than budget 3 GPU-hours per commit. Nothing of it is carried out"
    ) in refused.stderr
    status = recon(repo.root, "status", ".")
    assert status.stdout.splitlines()[1].startswith("HELD: the plan's 2 GPU runs (g1, g2)")
    assert "`recon apply --allow-over-budget`" in status.stdout.splitlines()[1]
    waited = recon(repo.root, "apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 1 and "refused to apply: the plan's 2 GPU" in waited.stderr
    confirmed = recon(repo.root, "apply", ".", "--auto-approve", "--allow-over-budget")
    assert confirmed.returncode == 0, confirmed.stdout + confirmed.stderr
    assert "submitted g1" in confirmed.stdout and "submitted g2" in confirmed.stdout


def test_a_watch_holds_a_commit_over_budget_and_goes_on_after_the_fix(tmp_path: Path) -> None:
    repo = project(tmp_path, "budget: {gpu_hours: 1}\nlocal: {gpus: 1}\n", cpu=spec("cpu"))
    with Watched(repo.root, ".", "--interval", "1s") as watch:
        watch.until(lambda line: " submitted " in line and "run=cpu" in line)
        over = repo.commit({"specs/g.yaml": spec("g", extra=GPU)}, message="a GPU run")
        refused = watch.until(lambda line: " budget-refused " in line)
        watch.until(lambda line: " pass " in line and f"commit={over[:12]}" in line)
        watch.until(lambda line: " pass " in line)  # held again, not told again
        settings = (repo.root / "recon.yaml").read_text().replace("gpu_hours: 1", "gpu_hours: 5")
        fixed = repo.commit({"recon.yaml": settings}, message="raise the budget")
        watch.until(lambda line: " submitted " in line and "run=g" in line)
        assert watch.stop() == 0
    log = "".join(watch.lines)
    assert f"commit={over[:12]}" in refused and "forecast to take 2 GPU-hours" in refused
    assert log.count(" budget-refused ") == 1, log
    held = between(watch.lines, over, fixed)
    assert not [line for line in held if " INFO    submitted " in line], log
