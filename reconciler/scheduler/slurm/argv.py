"""The command lines recon runs against Slurm, built from typed requests. No I/O here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo

from reconciler.scheduler.arrays import array_spec
from reconciler.scheduler.base import AllocateRequest, SubmitRequest
from reconciler.scheduler.render import allocation_options
from reconciler.scheduler.slurm.parse import SACCT_FIELDS, SQUEUE_FORMAT

# Every state sacct accepts as a filter on 22.05. Without an explicit list, ``sacct -S``
# leaves out jobs that never became eligible (held, cancelled while pending, dependents
# cancelled because their dependency failed). CF is refused as a filter ("not accounted").
SACCT_STATES: tuple[str, ...] = (
    "BF", "CA", "CD", "DL", "F", "NF", "OOM", "PD", "PR", "R", "RQ", "RS", "RV", "S", "TO",
)  # fmt: skip


def sacct(
    since: datetime,
    tz: tzinfo,
    user: str,
    *,
    jobs_only: bool = False,
    of: Sequence[str] = (),
    until: datetime | None = None,
) -> list[str]:
    """Every job and step of ``user``'s seen in [since, now], in every state.

    The user is always named: run by root (as in containers and CI) sacct otherwise lists
    every user's jobs, and a job someone else tagged like recon's must never be taken for one.

    Without ``--duplicates``: a requeued job then shows once, as its latest run, which is
    the one that decides its health (the earlier runs' failures are history).

    ``jobs_only``: the jobs' own rows, no steps (``-X``): slurmdbd's cost is in the steps
    (7,400 rows of two days' history: 1.5-2.8 s with steps, 0.15 s without). ``of``: only
    these jobs (``--jobs``), in the same window. ``until``: the window's end (now unless
    told).
    """
    start = since.astimezone(tz) if since.tzinfo else since
    end = "now" if until is None else _local(until, tz).strftime("%Y-%m-%dT%H:%M:%S")
    return [
        "sacct",
        "--parsable2",
        "--noheader",
        *(["--allocations"] if jobs_only else []),
        f"--format={','.join(SACCT_FIELDS)}",
        f"--starttime={start.strftime('%Y-%m-%dT%H:%M:%S')}",
        f"--endtime={end}",
        f"--state={','.join(SACCT_STATES)}",
        f"--user={user}",
        *([f"--jobs={','.join(of)}"] if of else []),
    ]


def _local(moment: datetime, tz: tzinfo) -> datetime:
    return moment.astimezone(tz) if moment.tzinfo else moment


def squeue() -> list[str]:
    """Every job of this user slurmctld still holds, finished ones included (``--states=all``),
    so that a job which ends between two passes is seen with its final state."""
    return ["squeue", "--noheader", "--me", "--states=all", f"--format={SQUEUE_FORMAT}"]


def sbatch(request: SubmitRequest) -> list[str]:
    """``sbatch`` reading the script from stdin: nothing to write, clean up or race over."""
    argv = ["sbatch", "--parsable", f"--chdir={request.workdir}", *request.tag.options]
    if request.array is not None:
        argv.append(f"--array={array_spec(request.array.indices, request.array.max_parallel)}")
    if request.dependencies:
        argv += [
            f"--dependency=afterok:{':'.join(request.dependencies)}",
            # Slurm otherwise leaves a dependent pending forever once an upstream fails.
            "--kill-on-invalid-dep=yes",
        ]
    return argv


def salloc(request: AllocateRequest) -> list[str]:
    return [
        "salloc",
        "--no-shell",
        *request.tag.options,
        *allocation_options(request.allocation),
    ]


def scancel(job_id: str) -> list[str]:
    """``scancel 123`` ends the whole job (every array task); ``scancel 123_4`` one task."""
    return ["scancel", job_id]


def show_config() -> list[str]:
    """slurmctld's configuration, ``Key = value`` per line (MaxArraySize is read from it)."""
    return ["scontrol", "show", "config"]
