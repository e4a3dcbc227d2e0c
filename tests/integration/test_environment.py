"""The commit decides a job's environment, not whoever ran apply: checked inside the jobs,
on the dev cluster and on the local backend.

- The same commit applied from two shells with different PATH, PYTHONPATH and a conda
  env active gives its jobs byte-identical environments.
- A changed environment file reruns exactly the runs that declare it.
- A variable passed by name reaches the job, and its value is nowhere on disk outside
  the job's own output: not in the state directory (journal, local jobs, caches), the run
  folders (logs, manifests, environment records), nor in what recon prints; a new value
  reruns nothing.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.integration.harness import Project
from tests.projects import new_project_name

BACKENDS = [pytest.param("slurm", marks=pytest.mark.slurm), "local"]
# Variables Slurm (or the local backend) sets per job and per node: they differ between
# any two jobs, whoever submits them.
PER_JOB = ("SLURM_", "SLURMD_", "HOSTNAME=", "OLDPWD=")
DUMP = (
    "env | LC_ALL=C sort > {outputs.env.path}; "
    'python3 -c "import sys; print(sys.executable, sys.path)" >> {outputs.env.path}'
)


@pytest.fixture(params=BACKENDS)
def project(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Project]:
    backend = request.param
    name = new_project_name("env")
    repo = GitRepo(tmp_path / "repo")
    settings = "  partition: cpu\n" if backend == "slurm" else ""
    repo.write(
        {"recon.yaml": f"project: {name}\nscheduler: {backend}\ndefaults:\n{settings}  time: 10\n"}
    )
    made = Project(repo, name)
    yield made
    if backend == "slurm":
        made.cancel_all()


def run(name: str, command: str, environment: str = "") -> str:
    return (
        f"kind: Run\nname: {name}\ncommand: '{command}'\n"
        "resources:\n  cpus: 1\n  memory: 100MiB\n"
        f"{environment}outputs:\n  env: env.txt\n"
    )


def shell(**variables: str) -> dict[str, str]:
    """An applier's environment: this process's, with some variables changed."""
    return {**os.environ, **variables}


def apply(project: Project, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    done = project.recon("apply", ".", "--auto-approve", "--wait", *args, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def job_environment(project: Project, run_name: str) -> str:
    text = (project.root / "runs" / run_name / "env.txt").read_text()
    return "".join(line for line in text.splitlines(True) if not line.startswith(PER_JOB))


def test_two_shells_give_byte_identical_job_environments(project: Project) -> None:
    project.repo.commit({"specs/dump.yaml": run("dump", DUMP)})
    conda = shell(
        PATH=f"/opt/conda/envs/lab/bin:{os.environ['PATH']}",
        # recon itself must be this tree's: the shells differ in what follows it
        PYTHONPATH=os.pathsep.join([os.environ.get("PYTHONPATH", ""), "/home/someone/src"]),
        CONDA_PREFIX="/opt/conda/envs/lab",
        CONDA_DEFAULT_ENV="lab",
        LANG="fr_FR.UTF-8",
    )
    cron = {"PATH": "/usr/bin:/bin", "HOME": os.environ.get("HOME", "/root")}
    cron["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")  # this worktree's recon
    apply(project, env=conda)
    first = job_environment(project, "dump")
    apply(project, "--replace", "dump", env=cron)
    second = job_environment(project, "dump")
    assert first == second
    variables = dict(line.split("=", 1) for line in first.splitlines() if "=" in line)
    assert variables["PATH"].endswith("/usr/local/bin:/usr/bin:/bin"), variables["PATH"]
    assert "PYTHONPATH" not in variables and "CONDA_PREFIX" not in variables
    assert variables["LANG"] == "C.UTF-8"
    manifest = json.loads((project.root / "runs/dump/.recon-run/manifest.json").read_text())
    had = manifest["environment"]["had"]
    assert had["python"].startswith("Python 3") and had["path"] == variables["PATH"]


def test_a_changed_environment_file_reruns_exactly_the_runs_that_declare_it(
    project: Project,
) -> None:
    declares = "environment:\n  files: [environment.yml]\n"
    specs = "---\n".join(
        [
            run("conda-a", "echo a > {outputs.env.path}", declares),
            run("conda-b", "echo b > {outputs.env.path}", declares),
            run("locked", "echo l > {outputs.env.path}", "environment:\n  files: [uv.lock]\n"),
            run("plain", "echo p > {outputs.env.path}"),
        ]
    )
    project.repo.commit(
        {
            "environment.yml": "dependencies: [python=3.11]\n",
            "uv.lock": "version = 1\n",
            "specs/runs.yaml": specs,
        }
    )
    apply(project, env=shell())
    before = jobs_by_run(project)
    project.repo.commit({"environment.yml": "dependencies: [python=3.11, numpy]\n"})
    planned = project.recon("plan", ".", "--format", "json")
    assert planned.returncode == 0, planned.stderr
    kinds = {a["target"]: a["kind"] for a in json.loads(planned.stdout)["actions"]}
    assert kinds == {
        "conda-a": "submit",
        "conda-b": "submit",
        "locked": "no-op",
        "plain": "no-op",
    }
    apply(project, env=shell())
    after = jobs_by_run(project)
    rerun = {name for name in after if after[name] != before[name]}
    assert rerun == {"conda-a", "conda-b"}


def jobs_by_run(project: Project) -> dict[str, str]:
    shown = project.recon("status", ".", "--format", "json")
    assert shown.returncode == 0, shown.stderr
    return {row["name"]: row["job_id"] for row in json.loads(shown.stdout)}


def test_a_passed_secret_reaches_the_job_and_nothing_on_disk_outside_it(
    project: Project,
) -> None:
    secret = f"tok-{uuid.uuid4().hex}"
    proof = 'printf %s "$ENVTEST_TOKEN" | sha256sum | cut -c1-64 > {outputs.env.path}'
    passes = "environment:\n  pass: [ENVTEST_TOKEN]\n"
    # `later` waits for `secret`: on the local backend it is started by secret's job's
    # supervisor, long after the apply that submitted it, and gets the value all the same.
    later = run("later", proof, passes + "inputs:\n  first: secret.env\n")
    project.repo.commit({"specs/secret.yaml": run("secret", proof, passes) + "---\n" + later})
    done = project.recon("apply", ".", "--auto-approve", env=shell(ENVTEST_TOKEN=secret))
    assert done.returncode == 0, done.stdout + done.stderr
    # Waited for and settled from a shell without the value: only the jobs had it.
    assert "ENVTEST_TOKEN" not in os.environ
    apply(project, env=shell())
    for name in ("secret", "later"):
        output = project.root / "runs" / name / "env.txt"
        assert output.read_text().strip() == hashlib.sha256(secret.encode()).hexdigest()
    assert secret not in done.stdout + done.stderr
    status = project.recon("status", ".", "--format", "json")
    assert secret not in status.stdout + status.stderr
    # Nowhere on disk: the repo, its state directory (journal, caches, local jobs,
    # snapshots) and the run folders (logs, manifests, environment records).
    holding = subprocess.run(
        ["grep", "-r", "-l", "-a", "-F", secret, str(project.root)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout.split()
    assert holding == [], holding
    manifest = json.loads((project.root / "runs/secret/.recon-run/manifest.json").read_text())
    assert manifest["environment"]["passed"] == ["ENVTEST_TOKEN"]
    # Another value reruns nothing: only the name is part of the run.
    again = project.recon(
        "plan", ".", "--detailed-exitcode", env=shell(ENVTEST_TOKEN=f"{secret}-rotated")
    )
    assert again.returncode == 0, again.stdout + again.stderr


def test_inherit_gives_the_appliers_environment_and_every_plan_says_so(
    project: Project,
) -> None:
    project.repo.commit({"specs/dump.yaml": run("dump", DUMP, "environment:\n  inherit: true\n")})
    # PYTHONPATH: the local backend hands an inheriting job only what programs need to
    # find their tools, as it always did (docs/specs.md, The local backend).
    marker = f"/applier-{uuid.uuid4().hex[:8]}"
    pythonpath = os.pathsep.join([os.environ.get("PYTHONPATH", ""), marker])
    done = apply(project, env=shell(PYTHONPATH=pythonpath))
    assert "Results depend on who applies: run dump takes" in done.stdout, done.stdout
    assert f"PYTHONPATH={pythonpath}\n" in job_environment(project, "dump")
    # Current now, and the plan still says it.
    again = project.recon("plan", ".", "--detailed-exitcode")
    assert again.returncode == 0 and "Results depend on who applies" in again.stdout
