"""Submit rendered-looking scripts to any Scheduler and wait on what it observes."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.scheduler.base import (
    ArrayRequest,
    Observation,
    ObservedJob,
    Scheduler,
    SubmitRequest,
)
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag
from tests.projects import new_project_name
from tests.slurmrelease import slurm_release

TIMEOUT = 45.0
SPEC_HASH = "0123456789abcdef"


def script(tag: Tag, log: Path, body: str, header: Sequence[str] = ()) -> str:
    """A batch script shaped like the ones recon renders: job-wide directives, the
    component's, then `set -euo pipefail` (the first command) and the body."""
    directives = [
        f"--job-name={tag.job_name}",
        f"--comment={tag.format()}",
        f"--output={log}",
        "--ignore-pbs",
        "--time=5",
        "--mem=100M",
        *header,
    ]
    lines = ["#!/bin/bash", *(f"#SBATCH {d}" for d in directives), "set -euo pipefail", body]
    return "\n".join(lines) + "\n"


class Harness:
    def __init__(self, scheduler: Scheduler, workdir: Path) -> None:
        self.scheduler = scheduler
        self.workdir = workdir
        self.project = new_project_name("ct")
        # Slurm's times have whole seconds; the window starts a little before the test.
        self.since = datetime.now(UTC) - timedelta(seconds=5)
        self.job_ids: list[str] = []

    def tag(self, name: str, project: str | None = None) -> Tag:
        return Tag(
            project=project or self.project,
            deployment="0123456789ab",
            kind="run",
            name=name,
            spec_hash=SPEC_HASH,
        )

    def log(self, name: str, job_id: str) -> Path:
        return self.workdir / f"{name}-{job_id}.out"

    def submit(
        self,
        name: str,
        body: str,
        *,
        dependencies: Sequence[str] = (),
        header: Sequence[str] = (),
        tag: Tag | None = None,
        array: ArrayRequest | None = None,
    ) -> str:
        """Submit a job (an array with ``array``: its tasks log to ``<name>-<id>_<index>``)."""
        tag = tag or self.tag(name)
        log = self.workdir / f"{name}-{'%j' if array is None else '%A_%a'}.out"
        request = SubmitRequest(
            script=script(tag, log, body, header),
            workdir=self.workdir,
            dependencies=tuple(dependencies),
            tag=tag,
            array=array,
        )
        job_id = self.scheduler.submit(request)
        self.job_ids.append(job_id)
        return job_id

    def observe(self) -> Observation:
        return self.scheduler.observe(self.since)

    def job(self, name: str, observation: Observation | None = None) -> ObservedJob | None:
        found = (observation or self.observe()).find(self.project, name)
        assert len(found) <= 1, found
        return found[0] if found else None

    def wait(
        self, name: str, until: Callable[[ObservedJob], bool], timeout: float = TIMEOUT
    ) -> ObservedJob:
        """Observe every quarter second until the job of ``name`` satisfies ``until``."""
        deadline = time.monotonic() + timeout
        job = None
        while time.monotonic() < deadline:
            job = self.job(name)
            if job is not None and until(job):
                return job
            time.sleep(0.25)
        raise AssertionError(f"{name} not as expected after {timeout} s: {job}")

    def slurm_release(self) -> tuple[int, int] | None:
        """The Slurm release this backend talks to, or None when it is not Slurm."""
        if not isinstance(self.scheduler, SlurmScheduler):
            return None
        return slurm_release()

    def cancel_all(self) -> None:
        for job_id in self.job_ids:
            self.scheduler.cancel(job_id)


def has(*healths: Health) -> Callable[[ObservedJob], bool]:
    return lambda job: job.health in healths


def final(job: ObservedJob) -> bool:
    """Every component over, with its exit code known (on Slurm: sacct has it)."""
    return job.finished and all(row.exit_code is not None for row in job.components)


def quoted(path: Path) -> str:
    return shlex.quote(str(path))
