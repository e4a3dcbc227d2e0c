"""Submit rendered-looking scripts to any Scheduler and wait on what it observes.

A double's world moves only when told: ``Harness.wait`` moves the simcluster on once before
each look, each running job ending as its script ends (so a job is seen running for one
look, then ended)."""

from __future__ import annotations

import shlex
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reconciler.desired.models import Allocation
from reconciler.scheduler.base import (
    AllocateRequest,
    ArrayRequest,
    Observation,
    ObservedJob,
    Scheduler,
    SubmitRequest,
)
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag, TagKind
from reconciler.scheduler.testing import ScriptedStepScheduler
from tests.projects import new_project_name
from tests.simcluster import SimCluster, SimJob, SimStep, SimTask, one_node
from tests.slurmrelease import slurm_release

TIMEOUT = 45.0
SPEC_HASH = "0123456789abcdef"

# What the simcluster does not do at all, for ``@pytest.mark.beyond(simcluster=...)``: the
# fault histories drive the engine through what it does, and pick each ending themselves.
SIM_RUNS_AT_ITS_END = (
    "it runs a job's script only when the job ends, all at once: a running job does nothing"
)
SIM_NO_HET = "it has no het jobs: a script with `hetjob` blocks is one job of one component"
SIM_NO_ACCOUNTING = (
    "it has no `accounting` to ask ended jobs by id: the histories never back-fill usage"
)
SIM_NO_LIMITS = "it enforces no --mem or --time: the histories pick each ending themselves"
LOCAL_NO_STEPS = (
    "the local backend runs no steps in allocations: `srun --jobid` has no local meaning"
)


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


def simulated() -> SimCluster:
    """The fault histories' cluster, on the wall clock, listing its one partition (the
    histories leave it unlisted: fit unknown)."""
    return SimCluster(clock=lambda: datetime.now(UTC), sinfo=one_node())


def scripted_over(cluster: SimCluster) -> ScriptedStepScheduler:
    """The shipped double, every method of the protocol scripted with the cluster's."""
    return ScriptedStepScheduler(
        observe=cluster.observe,
        submit=cluster.submit,
        cancel=cluster.cancel,
        max_array_size=cluster.max_array_size,
        allocate=cluster.allocate,
        release=cluster.release,
        partitions=cluster.partitions,
        containers=cluster.containers,
        start_step=cluster.start_step,
    )


def _runs_to_its_end(_job: SimJob, _task: SimTask | SimStep) -> SlurmState:
    return SlurmState.COMPLETED  # the sim runs the script: one that fails ends FAILED


class Harness:
    def __init__(
        self,
        scheduler: Scheduler,
        workdir: Path,
        *,
        kind: str | None = None,
        cluster: SimCluster | None = None,
    ) -> None:
        # local, slurm, simcluster, scripted: the contract's backends (a double is named
        # by what it is, not by the scheduler it poses as)
        self.kind = kind or scheduler.name
        self.scheduler = scheduler
        self.workdir = workdir
        self.cluster = cluster  # the world a double answers from, moved on by ``wait``
        self.project = new_project_name("ct")
        # Slurm's times have whole seconds; the window starts a little before the test.
        self.since = datetime.now(UTC) - timedelta(seconds=5)
        self.job_ids: list[str] = []

    def tag(self, name: str, project: str | None = None, kind: TagKind = "run") -> Tag:
        return Tag(
            project=project or self.project,
            deployment="0123456789ab",
            kind=kind,
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

    def allocate(self, name: str, cpus: int = 1) -> str:
        """Hold an allocation of one node (``cpus`` CPUs, 100 MiB, 10 minutes) on the
        default partition, tagged ``alloc``; released when the test ends."""
        spec = Allocation.model_validate(
            {"kind": "Allocation", "name": name, "time_limit": 10,
             "resources": {"cpus": cpus, "memory": "100MiB"}}
        )  # fmt: skip
        request = AllocateRequest(allocation=spec, tag=self.tag(name, kind="alloc"))
        job_id = self.scheduler.allocate(request)
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
            if self.cluster is not None:
                self.cluster.step(_runs_to_its_end)
            job = self.job(name)
            if job is not None and until(job):
                return job
            time.sleep(0.25 if self.cluster is None else 0.01)
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
