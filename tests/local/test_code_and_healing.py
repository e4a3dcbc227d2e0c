"""Code is part of a run, and failures heal when their cause is fixed, on the local
backend through the `recon` command: a real git repo, journal and processes.

- a committed script a command calls is the run's code: editing it reruns the run;
- a journal and jobs written by the release before code versions (commit f03e355, run
  from its own source) go on with no resubmission, and a changed script after the
  upgrade does rerun its run;
- a downstream that failed on its upstream's bad data, with no retries left, is tried
  again once the upstream is fixed, without --replace;
- a run whose jobs recon replaced and pruned is not `failed` when it comes back.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.projects import new_project_name

ROOT = Path(__file__).resolve().parents[2]
# The release before code versions: its journal has no code_versions column, and its
# failed records no input versions.
OLD_RELEASE = "f03e355"

PIPELINE = """\
kind: Run
name: prep
command: python3 scripts/prep.py {outputs.out.path}
resources: {cpus: 1}
outputs:
  out: data.txt
---
kind: Run
name: train
command: python3 scripts/train.py --data {inputs.data.path} --out {outputs.out.path}
resources: {cpus: 1}
inputs:
  data: prep.out
outputs:
  out: model.txt
---
kind: Run
name: shell
command: bash ./run.sh {outputs.out.path}
resources: {cpus: 1}
outputs:
  out: shell.txt
"""

SCRIPTS = {
    "scripts/prep.py": "import sys\nopen(sys.argv[1], 'w').write('good\\n')\n",
    # Fails on data that is not good: a downstream of a broken upstream.
    "scripts/train.py": (
        "import sys\n"
        "data = open(sys.argv[2]).read() if len(sys.argv) > 2 else ''\n"
        "if data != 'good\\n':\n"
        "    sys.exit(f'bad data: {data!r}')\n"
        "open(sys.argv[4], 'w').write('model\\n')\n"
    ),
    "run.sh": 'echo shell > "$1"\n',
}


def recon(
    repo: GitRepo, *args: str, source: Path | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`recon ARGS` in the project, run from this tree's code, or `source`'s (an earlier
    release, ``old_release``); ``env``: variables added, such as a fault to inject."""
    path = str(source) if source is not None else os.environ.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        cwd=repo.root, capture_output=True, text=True, timeout=180,
        env={"PATH": "/usr/bin:/bin", "HOME": str(repo.root), "RECON_LOCAL_CPUS": "2",
             "PYTHONPATH": path, **(env or {})},
    )  # fmt: skip


def ok(result: subprocess.CompletedProcess[str], code: int = 0) -> str:
    assert result.returncode == code, result.stdout + result.stderr
    return result.stdout


def status(repo: GitRepo) -> dict[str, dict[str, str]]:
    return {row["name"]: row for row in json.loads(ok(recon(repo, "status", "--format", "json")))}


PLAN_LINE = re.compile(r"^ +(?:[-+=~!/]+ +)?(\S+) +(\S+) +(.*)$")


def plan_lines(repo: GitRepo) -> dict[str, tuple[str, str]]:
    """Each run's (action, reason) in `recon plan`, by run."""
    lines = ok(recon(repo, "plan")).splitlines()
    return {m[2]: (m[1], m[3]) for line in lines if (m := PLAN_LINE.match(line))}


def web_view(repo: GitRepo, name: str) -> str:
    """The run's page as `recon serve`'s web view gives it (/api/runs/NAME), as text."""
    from reconciler.engine.reconcile import Request, look_once
    from reconciler.web.app import create_app
    from reconciler.web.poller import Poller
    from tests.local.serving import app_served

    poller = Poller(lambda: look_once(Request(repo.root)), 60, graph_limit=200)
    with app_served(create_app(poller, hosts=["127.0.0.1"])) as served:
        deadline = time.monotonic() + 30
        while (response := served.get(f"/api/runs/{name}"))[0] == 503:
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert response[0] == 200, response
    return response[2].decode()


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    name = new_project_name("cd")
    repo.commit({"recon.yaml": f"project: {name}\nscheduler: local\n", **SCRIPTS})
    return repo


def test_editing_a_script_the_command_calls_reruns_the_run(project: GitRepo) -> None:
    project.commit({"specs/p.yaml": PIPELINE})
    ok(recon(project, "apply", "--auto-approve", "--wait"))
    before = status(project)
    assert {name: row["sync"] for name, row in before.items()} == dict.fromkeys(
        ("prep", "train", "shell"), "current"
    )

    project.commit({"run.sh": 'echo changed > "$1"\n'}, "change the shell script")
    job = before["shell"]["job_id"]
    assert plan_lines(project)["shell"] == ("submit", f"code run.sh changed since job {job} ran it")
    assert status(project)["shell"]["sync"] == "outdated"
    assert f"code run.sh changed since job {job} ran it" in web_view(project, "shell")
    assert plan_lines(project)["prep"][0] == "no-op"  # nothing else is touched
    applied = ok(recon(project, "apply", "--auto-approve", "--wait"))
    assert "submitted shell" in applied and "submitted prep" not in applied
    assert (project.root / "runs/shell/shell.txt").read_text() == "changed\n"
    assert status(project)["shell"]["sync"] == "current"


def test_a_downstream_failed_on_bad_data_heals_once_its_upstream_is_fixed(
    project: GitRepo,
) -> None:
    bad = PIPELINE.replace("scripts/prep.py {outputs", "scripts/prep.py --bad {outputs")
    project.commit(
        {
            "specs/p.yaml": bad,
            "scripts/prep.py": (
                "import sys\nbad = '--bad' in sys.argv\n"
                "open(sys.argv[-1], 'w').write('bad\\n' if bad else 'good\\n')\n"
            ),
        }
    )
    ok(recon(project, "apply", "--auto-approve", "--wait"), code=1)
    failed = status(project)["train"]
    assert failed["health"] == "failed"
    assert "no retries left" in failed["reason"]
    assert (
        "Change its spec or code and commit, or `recon apply --replace train`" in failed["reason"]
    )

    # The upstream is fixed (its spec); train itself does not change.
    project.commit({"specs/p.yaml": PIPELINE}, "prep writes good data")
    ok(recon(project, "apply", "--auto-approve", "--wait"))
    rows = status(project)
    assert rows["train"]["sync"] == "current" and rows["train"]["health"] == "succeeded"
    assert (project.root / "runs/train/model.txt").read_text() == "model\n"


def test_a_run_whose_jobs_recon_replaced_and_pruned_is_not_failed(project: GitRepo) -> None:
    long = "kind: Run\nname: long\ncommand: sleep 300\nresources: {cpus: 1}\n"
    project.commit({"specs/l.yaml": long})
    try:
        ok(recon(project, "apply", "--auto-approve"))
        ok(recon(project, "apply", "--auto-approve", "--replace", "long"))
        (project.root / "specs/l.yaml").unlink()
        project.commit(message="long leaves the repo")
        # Its job is the project's only live one: the prune guard asks for a confirmation.
        assert "cancelled job" in ok(recon(project, "apply", "--auto-approve", "--allow-prune-all"))
        project.commit({"specs/l.yaml": long}, "long comes back")
        action, reason = plan_lines(project)["long"]
        assert action == "submit" and "was cancelled by recon" in reason, reason
    finally:
        (project.root / "specs/l.yaml").unlink(missing_ok=True)
        project.commit(message="no long run")
        recon(project, "apply", "--auto-approve", "--allow-prune-all")


def old_release(tmp_path: Path, commit: str = OLD_RELEASE) -> Path:
    """The source of an earlier release (by default the one before code versions), from
    this repository's history."""
    known = subprocess.run(
        ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=ROOT, capture_output=True
    )
    if known.returncode != 0:
        why = f"this checkout lacks commit {commit} (a shallow clone?)"
        if os.environ.get("CI"):
            pytest.fail(f"{why}: CI must run the upgrade test, clone with history")
        pytest.skip(why)
    source = tmp_path / "old-release"
    source.mkdir()
    archive = subprocess.run(
        ["git", "archive", commit, "reconciler"], cwd=ROOT, capture_output=True, check=True
    )
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    return source


def test_an_upgrade_from_the_release_before_code_versions_resubmits_nothing(
    project: GitRepo, tmp_path: Path
) -> None:
    old = old_release(tmp_path)
    broken = (
        "---\nkind: Run\nname: broken\ncommand: python3 scripts/broken.py {inputs.data.path}\n"
        "resources: {cpus: 1}\ninputs:\n  data: prep.out\noutputs:\n  out: never.txt\n"
    )
    project.commit(
        {"specs/p.yaml": PIPELINE + broken, "scripts/broken.py": "raise SystemExit(3)\n"}
    )
    ok(recon(project, "apply", "--auto-approve", "--wait", source=old), code=1)
    journal = project.root / ".recon/journal.sqlite"
    version = subprocess.run(
        ["python3", "-c", f"import sqlite3; print(sqlite3.connect('{journal}')"
         ".execute('PRAGMA user_version').fetchone()[0])"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert version == "3"  # the old release's journal

    # The new recon: nothing to do, every run as the old release left it.
    planned = recon(project, "plan", "--detailed-exitcode")
    assert planned.returncode == 0, planned.stdout + planned.stderr
    rows = status(project)
    assert {name: row["sync"] for name, row in rows.items()} == {
        "prep": "current", "train": "current", "shell": "current", "broken": "never run",
    }  # fmt: skip
    assert "no retries left" in rows["broken"]["reason"]
    applied = ok(recon(project, "apply", "--auto-approve"))
    assert "submitted" not in applied, applied

    # After the upgrade a changed script reruns its run, and only that one.
    job = rows["train"]["job_id"]
    project.commit({"scripts/train.py": SCRIPTS["scripts/train.py"] + "# tuned\n"}, "tune")
    assert plan_lines(project)["train"] == (
        "submit",
        f"code scripts/train.py changed since job {job} ran it",
    )
    applied = ok(recon(project, "apply", "--auto-approve", "--wait"), code=1)  # broken stays
    assert "submitted train" in applied
    assert [line for line in applied.splitlines() if line.startswith("submitted")] == [
        line for line in applied.splitlines() if line.startswith("submitted train")
    ]
    assert status(project)["train"]["sync"] == "current"
