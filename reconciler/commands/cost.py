"""`recon cost`: GPU-hours and CPU-hours per run, sweep, allocation and commit, from the
journal (and the cluster, for jobs still running or settled before recon read usage), and
what recon saved."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from reconciler.commands.common import (
    Format,
    RevisionOption,
    SchedulerOption,
    TargetsArgument,
    WorktreeOption,
    chosen,
    split_arguments,
    warn,
    width,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

    from reconciler.desired.desired import Desired
    from reconciler.scheduler.select import Choice
    from reconciler.state.records import SubmissionRecord

_PERIOD = re.compile(r"^(\d+(?:\.\d+)?)(h|d|w)$")
_PERIOD_HOURS = {"h": 1.0, "d": 24.0, "w": 24.0 * 7}


def cost(
    arguments: TargetsArgument = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    output_format: Annotated[Format, typer.Option("--format", help="Output format.")] = Format.text,
    since: Annotated[
        str | None,
        typer.Option(
            "--since",
            metavar="PERIOD|COMMIT",
            help="Only jobs submitted in the last PERIOD (12h, 7d, 2w), or for COMMIT and the "
            "commits after it.",
        ),
    ] = None,
    unit: Annotated[
        str,
        typer.Option(
            "--by",
            metavar="gpu|cpu",
            help="Split the runs', sweeps', allocations' and commits' hours by way of spending "
            "in GPU-hours (default) or CPU-hours. (JSON has both.)",
        ),
    ] = "gpu",
    offline: Annotated[
        bool,
        typer.Option(
            "--offline",
            help="Never ask the cluster: the journal alone (jobs still running, and jobs "
            "settled before recon read usage, are then said, not counted).",
        ),
    ] = False,
    scheduler: SchedulerOption = None,
) -> None:
    """GPU-hours and CPU-hours the project's jobs held, by how they were spent.

    PROJECT is the folder holding recon.yaml (default: the current folder); RUN names a
    run, sweep or allocation to count (default: all). Read from the journal: what each
    job held (sacct's AllocTRES for its ElapsedRaw), recorded when it ended. The cluster
    is asked only when the journal has jobs still running (their usage so far, from one
    squeue and sacct over the journal's window) or jobs settled before recon read usage
    (back-filled from sacct by id, once, into the journal); never once per job, never
    with --offline. Split into current successes, superseded ones, failed attempts,
    cancelled and torn-down jobs, allocations' idle and working time, jobs still running
    and queue wait; per run, sweep, allocation and commit; and what recon saved, each
    figure explained. Then the sizes the last successes of each run and sweep needed
    (1.5 x their peak memory, longest time and busiest CPUs, rounded up) and what asking
    so would have saved; the specs are never edited.

    \b
    Examples:
      recon cost                         the whole project in this folder
      recon cost . train --format json
      recon cost --since 7d --format markdown
      recon cost --since v1.2            jobs for commit v1.2 and later ones
    """
    from dataclasses import replace

    from reconciler.desired.desired import spec_hash_of
    from reconciler.desired.matrix import sweep_of
    from reconciler.engine.accounting import account
    from reconciler.engine.ledger.cost import in_scope, ledger
    from reconciler.engine.observe.journal import read_cancel_causes
    from reconciler.engine.plan.inputs import coupled_partners
    from reconciler.engine.plan.sizes import suggest
    from reconciler.engine.reconcile import Request, load
    from reconciler.errors import UnknownTarget
    from reconciler.report import cost as cost_report

    if unit not in ("gpu", "cpu"):
        raise typer.BadParameter(f"{unit!r} is no unit: write gpu or cpu", param_hint="--by")
    repo, targets = split_arguments(arguments)
    desired = warn(load(Request(repo, rev, worktree)))
    known = set(desired.runs) | set(desired.allocations) | set(desired.sweeps)
    now = datetime.now(UTC)
    accounted = account(desired, now, offline=offline, choice=chosen(scheduler))
    recorded = {record.name for record in accounted.records}
    recorded |= {sweep for name in recorded if (sweep := sweep_of(name)) is not None}
    for name in targets:
        if name not in known and name not in recorded:
            raise UnknownTarget(
                f"no run, sweep or allocation named {name} in {desired.project.project}, now "
                "or in its journal: name one `recon status` lists"
            )
    after, commits = _since(since, desired.root, rev)
    ratio, unvalued = _shards_per_gpu(desired, accounted.records, offline, chosen(scheduler))
    book = ledger(
        accounted.records,
        {name: spec_hash_of(desired.runs, name) for name in desired.runs},
        cancel_causes=read_cancel_causes(desired),
        since=after,
        commits=commits,
        names=targets,
        live=accounted.live,
        partners=coupled_partners(desired),
        now=now,
        shards_per_gpu=ratio,
    )
    in_period = [r for r in accounted.records if in_scope(r, after, commits, ())]
    memory = {
        name: float(run.resources.memory.mebibytes)
        for name, run in desired.runs.items()
        if run.resources.memory is not None
    }
    book = replace(
        book,
        looked_at=accounted.looked_at,
        not_reached=accounted.not_reached,
        backfilled=accounted.backfilled,
        sizes=suggest(in_period, names=targets, asked_memory=memory),
        shards_unvalued=unvalued,
    )
    render = cost_report.RENDERERS[output_format.value]
    sys.stdout.write(render(book, desired.project.project, cost_report.Unit(unit), width()))


def _since(
    since: str | None, root: Path, rev: str | None
) -> tuple[datetime | None, list[str] | None]:
    """--since as a time (a period back from now) or a list of commits."""
    from reconciler.desired.source import commits_since

    if since is None:
        return None, None
    period = _PERIOD.match(since.strip())
    if period is not None:
        hours = float(period[1]) * _PERIOD_HOURS[period[2]]
        return datetime.now(UTC) - timedelta(hours=hours), None
    commits = commits_since(root, since, rev or "HEAD")
    if commits is None:
        raise typer.BadParameter(
            f"{since!r} is neither a period (12h, 7d, 2w) nor a commit of the repository:"
            " write e.g. --since 7d or --since <commit>",
            param_hint="--since",
        )
    return None, commits


def _shards_per_gpu(
    desired: Desired, records: Sequence[SubmissionRecord], offline: bool, choice: Choice | None
) -> tuple[float | None, str | None]:
    """The cluster's shards per GPU (one sinfo), asked only when a job held shards."""
    from reconciler.engine.observe.observation import scheduler_for
    from reconciler.errors import ReconError
    from reconciler.scheduler.partitions import shards_per_gpu

    if not any((usage := record.usage) is not None and usage.shard_s for record in records):
        return None, None
    if offline:
        return None, "--offline: the cluster's shards per GPU were not read"
    try:
        return shards_per_gpu(scheduler_for(desired, choice).partitions())
    except ReconError as error:
        return None, f"the cluster's shards per GPU could not be read: {error}"
