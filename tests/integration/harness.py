"""A temporary recon project on the real dev cluster, driven through the `recon` command."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from reconciler.scheduler.tag import Tag
from tests.gitrepo import GitRepo
from tests.projects import new_project_name

TIMEOUT = 90.0
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "repo"


class Project:
    def __init__(self, repo: GitRepo, name: str) -> None:
        self.repo = repo
        self.name = name

    @property
    def root(self) -> Path:
        return self.repo.root

    def recon(
        self, *args: str, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "reconciler", *args],
            cwd=self.root,
            env={**os.environ, **(env or {})},
            capture_output=True,
            text=True,
            timeout=120,
        )

    def apply(self, *args: str) -> subprocess.CompletedProcess[str]:
        result = self.recon("apply", ".", "--auto-approve", *args)
        assert result.returncode == 0, result.stdout + result.stderr
        return result

    def jobs(self) -> list[dict[str, str]]:
        """Every job of this project Slurm knows, live or finished: id, name, hash, state."""
        listing = subprocess.run(
            ["sacct", "-X", "-n", "-P", "-S", "now-1hours", "-E", "now",
             "-s", "BF,CA,CD,DL,F,NF,OOM,PD,PR,R,RQ,RS,RV,S,TO",
             "-o", "JobID,Comment,State"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        live = subprocess.run(
            ["squeue", "-h", "-o", "%i|%k|%T"], capture_output=True, text=True, check=True
        ).stdout
        found: dict[str, dict[str, str]] = {}
        for line in (listing + live).splitlines():
            job_id, comment, state = [*line.split("|"), "", ""][:3]
            tag = Tag.parse(comment)
            job_id, _, offset = job_id.partition("+")  # a het job counts once, by its leader
            if tag is not None and tag.project == self.name and offset in ("", "0"):
                found[job_id] = {
                    "id": job_id,
                    "run": tag.name,
                    "hash": tag.spec_hash,
                    "state": state,
                    "deployment": tag.deployment,
                }
        return list(found.values())

    def runs(self) -> list[tuple[str, str]]:
        """(run, spec hash) of every job, sorted: a duplicate submission shows twice."""
        return sorted((job["run"], job["hash"]) for job in self.jobs())

    def queued(self, prefix: str) -> bool:
        """Whether squeue lists a job of this project whose run's name starts with
        ``prefix``: squeue alone, cheap enough to poll in a tight loop."""
        listing = subprocess.run(
            ["squeue", "-h", "-o", "%k"], capture_output=True, text=True, check=True
        ).stdout
        tags = [Tag.parse(comment) for comment in listing.splitlines()]
        return any(
            tag is not None and tag.project == self.name and tag.name.startswith(prefix)
            for tag in tags
        )

    def job_of(self, run: str) -> list[dict[str, str]]:
        return [job for job in self.jobs() if job["run"] == run]

    def listed_job_of(self, run: str) -> dict[str, str]:
        """The run's one job, once Slurm lists it: a job that ends within seconds leaves
        squeue before slurmctld's accounting pass (every ~5 s) puts it in sacct's window,
        and for those seconds neither lists it."""
        listed: list[dict[str, str]] = []

        def one_listed() -> bool:
            listed[:] = self.job_of(run)
            return len(listed) == 1

        self.wait_for(f"Slurm to list {run}'s job", one_listed)
        return listed[0]

    def wait_for(self, what: str, condition: Callable[[], bool]) -> None:
        deadline = time.monotonic() + TIMEOUT
        while not condition():
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}: {self.jobs()}")
            time.sleep(0.5)

    def cancel_all(self) -> None:
        for job in self.jobs():
            subprocess.run(["scancel", job["id"]], capture_output=True, check=False)


def run_spec(name: str, command: str, *, extra: str = "", inputs: str = "") -> str:
    return (
        f"kind: Run\nname: {name}\ncommand: '{command}'\nresources:\n  cpus: 1\n  memory: 100MiB\n"
        f"{extra}{inputs}outputs:\n  out: out.txt\n"
    )


def example_project(where: Path, prefix: str) -> Project:
    """The example project, committed in a repo of its own under `where/example`, its
    project named afresh (``new_project_name(prefix)``) so its jobs are its own, on Slurm
    (`scheduler: slurm`: the example itself says `local`, safe on a login node)."""
    name = new_project_name(prefix)
    root = where / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    text = (root / "recon.yaml").read_text().replace("project: cartpole", f"project: {name}")
    text, found = re.subn(r"^scheduler: local\b.*$", "scheduler: slurm", text, flags=re.MULTILINE)
    assert found == 1, text
    (root / "recon.yaml").write_text(text)
    repo = GitRepo(root)
    repo.commit(message="example")
    return Project(repo, name)
