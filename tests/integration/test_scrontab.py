"""`recon cron install --scrontab` on a real Slurm.

On any cluster: the job the entry describes (its `#SCRON` options, its command line) is
submitted as Slurm would submit it from scrontab, as a batch job, and converges the
project from a compute node with no recon process on the login node.

On a cluster with `scrontab` (Slurm 20.11 or later, built with it, and
`ScronParameters=enable` in slurm.conf): the entry itself, installed with a period of one
minute, converges the project to each new commit, and `recon cron remove --scrontab`
takes it out again. Debian 12's Slurm 22.05 packages ship no `scrontab` command, so on
such a cluster that test is skipped, saying so; CI runs it on the 24.11 dev cluster.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo
from tests.integration.harness import Project
from tests.launcher import checkout_venv
from tests.projects import new_project_name
from tests.slurmrelease import SLURM_24_11, slurm_release

pytestmark = pytest.mark.slurm

ROOT = Path(__file__).resolve().parents[2]
CONVERGES_WITHIN = 240.0  # two or three cron minutes, each a job to schedule and run


def scrontab_usable() -> str | None:
    """Why scrontab cannot be used here, or None."""
    if shutil.which("scrontab") is None:
        return "no scrontab command (Slurm's packages here ship none)"
    listed = subprocess.run(["scrontab", "-l"], capture_output=True, text=True, timeout=30)
    said = (listed.stdout + listed.stderr).lower()
    if listed.returncode != 0 and "no crontab" not in said:
        return f"scrontab -l failed: {said.strip()} (ScronParameters=enable in slurm.conf?)"
    return None


@pytest.fixture
def launcher(tmp_path: Path) -> Path:
    """A bin folder whose python3 runs this checkout's recon, and its `recon`: the entry
    names that recon, as it would a venv's."""
    bin_dir = checkout_venv(tmp_path / "venv")
    recon = bin_dir / "recon"
    recon.write_text(f'#!/bin/sh\nexec {bin_dir}/python3 -m reconciler "$@"\n')
    recon.chmod(0o755)
    return bin_dir


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    name = new_project_name("scron")
    repo = GitRepo(tmp_path / "repo")
    repo.commit(
        {
            "recon.yaml": f"project: {name}\nscheduler: slurm\nspecs: ['*.yaml']\n"
            "defaults: {partition: cpu, time: '00:02:00', environment: {}}\n",
            "stamp.yaml": stamp("v1"),
        }
    )
    made = Project(repo, name)
    yield made
    made.cancel_all()


def stamp(value: str) -> str:
    return (
        f"kind: Run\nname: stamp\ncommand: echo {value} > {{outputs.out.path}}\n"
        "resources: {cpus: 1, memory: 100MiB}\noutputs:\n  out: out.txt\n"
    )


def recon(launcher: Path, project: Project, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(launcher / "python3"), "-m", "reconciler", *args],
        cwd=project.root,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
    )


def wait_for_output(project: Project, value: str) -> None:
    out = project.root / "runs" / "stamp" / "out.txt"
    deadline = time.monotonic() + CONVERGES_WITHIN
    while not (out.exists() and out.read_text() == f"{value}\n"):
        if time.monotonic() > deadline:
            log = project.root / ".recon" / "scrontab.log"
            raise AssertionError(
                f"stamp never wrote {value}; scrontab.log:\n"
                + (log.read_text() if log.exists() else "(none)")
            )
        time.sleep(2)


def test_the_entry_s_job_converges_the_project_from_a_compute_node(
    launcher: Path, project: Project
) -> None:
    printed = recon(launcher, project, "cron", "install", "--scrontab", "--partition", "cpu",
                    "--every", "1m", "--time", "00:05:00", "--print")  # fmt: skip
    assert printed.returncode == 0, printed.stdout + printed.stderr
    lines = printed.stdout.splitlines()
    options = [line.removeprefix("#SCRON ") for line in lines if line.startswith("#SCRON ")]
    (schedule,) = [line for line in lines if not line.startswith("#")]
    command = schedule.split(" ", 5)[5]
    (project.root / ".recon").mkdir()  # what install makes for the job's log
    submitted = subprocess.run(
        ["sbatch", "--parsable", *options, "--wrap", command],
        cwd="/", capture_output=True, text=True, check=True,
    )  # fmt: skip
    job = submitted.stdout.strip().split(";")[0]
    try:
        wait_for_output(project, "v1")  # the job's apply submitted stamp, which ran
    finally:
        subprocess.run(["scancel", job], check=False)
    # The apply ran inside that job: its --quiet output is in the entry's log.
    assert "submitted" in (project.root / ".recon" / "scrontab.log").read_text()
    assert accounted_name(job) == f"recon-cron.{project.name}"


def accounted_name(job: str, within: float = 60) -> str:
    """The job's name in accounting, once slurmdbd has the job itself: until then sacct
    can name it `allocation`, learnt from its step (docs: the shared Slurm facts)."""
    deadline = time.monotonic() + within
    while True:
        listed = subprocess.run(
            ["sacct", "-j", job, "-X", "-n", "-P", "-o", "JobName"],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        named = listed.stdout.split()
        if named not in ([], ["allocation"]) or time.monotonic() > deadline:
            return " ".join(named)
        time.sleep(2)


def test_a_scrontab_entry_converges_each_commit(launcher: Path, project: Project) -> None:
    why_not = scrontab_usable()
    if why_not is not None and slurm_release() < SLURM_24_11:
        # Debian 12's Slurm has no scrontab; CI runs this test on its 24.11 cluster.
        pytest.skip(f"scrontab cannot run here: {why_not}; it runs on the 24.11 dev cluster")
    assert why_not is None, f"scrontab cannot run on this Slurm: {why_not}"
    installed = recon(launcher, project, "cron", "install", "--scrontab", "--partition", "cpu",
                      "--every", "1m", "--time", "00:05:00")  # fmt: skip
    assert installed.returncode == 0, installed.stdout + installed.stderr
    try:
        listed = subprocess.run(["scrontab", "-l"], capture_output=True, text=True, check=True)
        assert f"# recon cron: {project.root} " in listed.stdout
        assert "#SCRON --partition=cpu" in listed.stdout
        wait_for_output(project, "v1")
        project.repo.commit({"stamp.yaml": stamp("v2")}, message="stamp v2")
        wait_for_output(project, "v2")
    finally:
        removed = recon(launcher, project, "cron", "remove", "--scrontab")
        assert removed.returncode == 0, removed.stdout + removed.stderr
        subprocess.run(["scancel", "--name", f"recon-cron.{project.name}"], check=False)
    after = subprocess.run(["scrontab", "-l"], capture_output=True, text=True)
    assert f"# recon cron: {project.root} " not in after.stdout
