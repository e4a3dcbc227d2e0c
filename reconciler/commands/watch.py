"""`recon watch`: keep the cluster converged to a branch, on every commit and every interval."""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from reconciler.commands.common import (
    LogFormat,
    LogFormatOption,
    NotifyOption,
    RepoArgument,
    SchedulerOption,
    chosen,
    parse_duration,
    uncommitted_note,
)
from reconciler.errors import ReconError

if TYPE_CHECKING:  # the engine is imported when watch runs: `recon --help` stays quick
    from reconciler.engine.reconcile import PassOutcome


def watch(
    repo: RepoArgument = Path("."),
    branch: Annotated[
        str | None,
        typer.Option(
            "--branch", metavar="BRANCH", help="Reconcile this branch's tip (default: HEAD)."
        ),
    ] = None,
    interval: Annotated[
        str,
        typer.Option(
            "--interval",
            metavar="DURATION",
            help="Also pass this often, to follow job states (30s, 5m); sooner when the "
            "plan knows something is due (an allocation's renewal, a job's time limit).",
        ),
    ] = "30s",
    pull: Annotated[
        bool,
        typer.Option(
            "--pull",
            help="Each interval, fetch and fast-forward the branch from its remote "
            "(never a merge; never a work tree with changes).",
        ),
    ] = False,
    log_format: LogFormatOption = LogFormat.text,
    notify: NotifyOption = None,
    metrics_addr: Annotated[
        str | None,
        typer.Option(
            "--metrics-addr",
            metavar="HOST:PORT",
            help="Serve Prometheus metrics at http://HOST:PORT/metrics (e.g. 127.0.0.1:9464).",
        ),
    ] = None,
    scheduler: SchedulerOption = None,
    allow_prune_all: Annotated[
        bool,
        typer.Option(
            "--allow-prune-all",
            help="Carry out, in every pass, prunes that look like an accident (a commit that "
            "declares nothing, or more than one job and more than prune_limit allows; without "
            "it such a pass does nothing, logs why and notifies once per commit; confirm one "
            "with `recon apply --allow-prune-all`).",
        ),
    ] = False,
) -> None:
    """Keep the cluster converged: apply each new commit within seconds.

    PROJECT is the folder holding recon.yaml (default: the current folder). Also passes
    every --interval, to follow job states, or sooner when the last plan says something
    is due then (its next look). Applies without asking. Ctrl-C or SIGTERM stops it once
    the current pass is done (exit 0).

    \b
    Examples:
      recon watch . --branch main --interval 30s
      recon watch . --branch main --pull --log-format json     as a service
      recon watch . --metrics-addr 127.0.0.1:9464               with Prometheus metrics
    """
    from reconciler.commands.watchlog import LineLog, Puller
    from reconciler.engine.reconcile import Request, reconcile_once
    from reconciler.engine.steady import SteadyPasses
    from reconciler.engine.wakeups import RefWatcher, WakeQueue
    from reconciler.engine.watch import Level, Schedule, WatchLoop
    from reconciler.notify import Notifier
    from reconciler.repository.refs import BranchRefs

    schedule = Schedule(parse_duration(interval))
    listen = parse_address(metrics_addr) if metrics_addr is not None else None
    refs = BranchRefs(repo, branch)
    clock = _now
    log = LineLog(sys.stdout, log_format, clock)
    wakeups = WakeQueue()
    wakeups.stop_on_signals([signal.SIGINT, signal.SIGTERM])
    watcher = RefWatcher(
        refs.watched_dirs(),
        refs.is_ref_change,
        wakeups,
        on_error=lambda error: log(Level.WARNING, "ref-watch-failed", message=str(error)),
    )

    noted_edits = False
    # A timer pass that finds nothing changed reuses the last pass (engine/steady.py).
    passes = SteadyPasses(
        # The resolved commit, not the branch name: the pass, its log lines and the
        # memory of a bad commit all name one commit even if the branch moves meanwhile.
        request=lambda commit: Request(
            repo, commit, scheduler=chosen(scheduler), allow_prune_all=allow_prune_all
        ),
        full=lambda request: reconcile_once(request, lock_timeout=0, clock=clock),
        clock=clock,
        log=lambda level, event, **fields: log(Level(level), event, **fields),
    )

    def reconcile(commit: str) -> PassOutcome:
        outcome = passes(commit)
        nonlocal noted_edits
        if not noted_edits:  # once: the folder's edits are the user's, not news each pass
            noted_edits = True
            note = uncommitted_note(outcome.desired, "watch")
            if note is not None:
                log(Level.WARNING, "uncommitted", commit=commit, message=note)
        return outcome

    loop = WatchLoop(schedule, refs.tip, reconcile, wakeups, log, clock)
    if pull:
        loop.pull = Puller(refs, log)
    if notify:
        notifier = Notifier(
            notify,
            on_failure=lambda event, problem: log(
                Level.WARNING, "notify-failed", message=f"{event}: {problem}"
            ),
            clock=clock,
        )
        loop.after_pass = notifier.after_pass
        project = _project_name(repo, refs.tip)
        loop.on_crash_loop = lambda commit, crashes, error: notifier.watch_failing(
            project(), commit, crashes, error
        )
    stop_metrics: Callable[[], None] = _nothing
    if listen is not None:
        from reconciler.metrics import WatchMetrics  # prometheus_client: only when asked

        metrics = WatchMetrics()
        try:
            stop_metrics = metrics.serve(*listen)
        except OSError as error:
            raise ReconError(
                f"--metrics-addr {metrics_addr}: cannot listen there: {error.strerror or error}"
            ) from None
        loop.on_pass = metrics.record
    log(
        Level.INFO,
        "started",
        commit=refs.tip(),
        message=f"watching {refs.branch or 'HEAD'} in {repo.resolve()} every {interval}",
    )
    watcher.start()
    try:
        loop.run()
    finally:
        watcher.stop()
        stop_metrics()


def _nothing() -> None:
    return None


def parse_address(text: str) -> tuple[str, int]:
    """`HOST:PORT`, `[::1]:PORT`, or `:PORT` (127.0.0.1)."""
    host, colon, port = text.rpartition(":")
    if not colon or not port.isdigit() or not 0 < int(port) < 65536:
        raise typer.BadParameter(
            f"{text!r} is not HOST:PORT: write e.g. 127.0.0.1:9464", param_hint="--metrics-addr"
        )
    return host.strip("[]") or "127.0.0.1", int(port)


def _project_name(repo: Path, tip: Callable[[], str]) -> Callable[[], str]:
    """The project's name for a notification, read when one is sent: from recon.yaml at
    the tip, else the folder's name (what fails may be the reading itself)."""

    def name() -> str:
        from reconciler.desired.loader import load_project, open_source

        try:
            return load_project(open_source(repo, tip(), worktree=False)).project
        except Exception:  # whatever it is, the notification goes out
            return repo.resolve().name

    return name


def _now() -> datetime:
    return datetime.now(UTC)
