"""`recon apply`: converge the cluster to the specs, or carry out a saved plan."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from reconciler.commands.common import (
    EXIT_ERROR,
    AllowOverBudgetOption,
    AllowPruneAllOption,
    DownstreamOption,
    NotifyOption,
    ReplaceOption,
    RevisionOption,
    SchedulerOption,
    WorktreeOption,
    chosen,
    console,
    err_console,
    note_uncommitted,
    print_plan,
    say,
    split_arguments,
    warn,
    width,
    with_file_notes,
)
from reconciler.words import listed, plural

if TYPE_CHECKING:  # the engine is imported when a command runs: `recon --help` stays quick
    from reconciler.desired.desired import Desired
    from reconciler.engine.apply.applier import ApplyResult, Done
    from reconciler.engine.plan.actions import Plan
    from reconciler.engine.reconcile import PassOutcome, Request
    from reconciler.engine.wait import Progress
    from reconciler.state.records import SubmissionRecord


def apply(
    arguments: Annotated[
        list[str] | None,
        # Usage: `[PROJECT] [RUN]... | PLANFILE` (see TargetsArgument).
        typer.Argument(metavar="PROJECT] [RUN]... | [PLANFILE", hidden=True, show_default=False),
    ] = None,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    scheduler: SchedulerOption = None,
    downstream: DownstreamOption = False,
    replace: ReplaceOption = None,
    allow_prune_all: AllowPruneAllOption = False,
    allow_over_budget: AllowOverBudgetOption = False,
    auto_approve: Annotated[
        bool, typer.Option("--auto-approve", help="Apply without asking (cron, CI, scripts).")
    ] = False,
    lock_timeout: Annotated[
        float,
        typer.Option(
            "--lock-timeout", metavar="SECONDS", help="Seconds to wait for another apply to finish."
        ),
    ] = 0.0,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", help="Print only what changed: nothing when nothing did (for cron)."
        ),
    ] = False,
    notify: NotifyOption = None,
    wait: Annotated[
        bool,
        typer.Option(
            "--wait",
            help="Then keep reconciling until every targeted run is done, failed or blocked; "
            "exit 1 if any failed.",
        ),
    ] = False,
) -> None:
    """Do what `recon plan` shows: submit, replace, cancel, adopt.

    PROJECT is the folder holding recon.yaml (default: the current folder); RUN names a
    run to apply, with the runs it needs (default: all runs); PLANFILE is a plan saved by
    `recon plan --out`. Asks first at a terminal, unless given --auto-approve. Ctrl-C
    stops it with exit code 130; what was submitted stays submitted, and the next apply
    adopts it.

    \b
    Examples:
      recon apply --wait                 confirm, then follow the runs to the end
      recon apply . --auto-approve --quiet --lock-timeout 30     from cron
      recon apply eval.plan              carry out a plan saved by `recon plan --out`
    """
    from reconciler.engine.apply import planfile
    from reconciler.engine.reconcile import Request, reconcile_once
    from reconciler.notify import Notifier
    from reconciler.report import plan as plan_report
    from reconciler.report.plan import summary

    repo, rest = split_arguments(arguments)
    saved = None
    if len(rest) == 1 and Path(rest[0]).is_file():
        saved = planfile.load(Path(rest[0]))
        # Re-plan at HEAD (or the work tree) and compare: a commit since makes it stale.
        repo, rest, rev = Path(saved.root), list(saved.targets), None
        worktree, downstream, replace = saved.commit is None, saved.downstream, list(saved.replace)
        # Confirmed when the plan was made (`recon plan --allow-prune-all -out FILE`), or now.
        guard, budget = saved.prune_guard, saved.budget_guard
        allow_prune_all = allow_prune_all or (guard is not None and guard.confirmed)
        allow_over_budget = allow_over_budget or (budget is not None and budget.confirmed)
    interactive = sys.stdin.isatty() and sys.stdout.isatty()
    if not auto_approve and not interactive:
        raise typer.BadParameter(
            "not at a terminal, so there is no one to confirm: pass --auto-approve to apply "
            "(nothing was done)"
        )

    def approve(current: Plan) -> bool:
        if saved is None and not (quiet and auto_approve):
            print_plan(plan_report.as_text(current, width=width()))
        return auto_approve or _confirm()

    request = Request(
        repo,
        rev,
        worktree,
        tuple(rest),
        downstream,
        chosen(scheduler),
        tuple(replace or ()),
        allow_prune_all=allow_prune_all,
        allow_over_budget=allow_over_budget,
    )
    started = datetime.now(UTC)
    # Each action is printed as it completes: an apply that stops part-way (the controller
    # gone after 49 of 100 submissions) still shows every job it did submit.
    done: list[Done] = []
    try:
        outcome = reconcile_once(
            request,
            approve=approve,
            saved=saved,
            lock_timeout=lock_timeout,
            on_done=lambda line: _print_done(line, kept=done),
        )
    except KeyboardInterrupt:
        _say_interrupted(done)
        raise  # exit 130
    warn(outcome.desired)
    note_uncommitted(outcome.desired, rev, "apply")
    if outcome.applied is not None:  # what the plan shown would have noted, had it known
        for note in with_file_notes(outcome.desired, outcome.plan).notes[len(outcome.plan.notes) :]:
            say("warning", note, "yellow")
    if notify:
        Notifier(notify, _notify_failed, lambda: datetime.now(UTC)).after_pass(outcome, started)
    if outcome.held is not None:
        _refuse(outcome, show_plan=saved is None and not quiet)
    if outcome.applied is not None:
        _report_applied(outcome.applied, each=False)
    elif not quiet:
        console.print("Nothing applied." if outcome.plan.has_changes else summary(outcome.plan))
    if wait and (outcome.applied is not None or not outcome.plan.has_changes):
        # Replaced once: the passes that follow only follow the new job.
        try:
            code = _wait(
                dataclasses.replace(request, replace=()), lock_timeout, outcome.desired.commit
            )
        except KeyboardInterrupt:
            from rich.text import Text

            err_console.print(
                Text(
                    "interrupted (Ctrl-C): the jobs go on; `recon status` shows them, and "
                    "`recon apply --wait` follows them again"
                ),
                soft_wrap=True,
            )
            raise
        raise typer.Exit(code)
    if outcome.applied is not None and not outcome.applied.ok:
        raise typer.Exit(EXIT_ERROR)


def _confirm() -> bool:
    """The prompt's answer; Ctrl-C at it is an interruption (exit 130, as anywhere
    else), not click's `Abort` (Ctrl-D, no answer: `aborted`, exit 1)."""
    try:
        return typer.confirm("Apply this plan?", default=False)
    except typer.Abort as error:
        if isinstance(error.__context__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        raise


def _say_interrupted(done: Sequence[Done]) -> None:
    """After Ctrl-C: what was already done stays done, and what the next apply makes of
    it (each line was printed as it happened; this says it again in one place)."""
    from rich.text import Text

    submitted = [d.line.removeprefix("submitted ") for d in done if d.submitted is not None]
    if not done:
        said = "interrupted (Ctrl-C): nothing was submitted or cancelled"
    else:
        jobs = f": {'; '.join(submitted)}" if submitted else ""
        said = (
            f"interrupted (Ctrl-C) after {plural(len(submitted), 'submission')}{jobs}. What "
            "was submitted stays submitted; the next apply adopts it, and does the rest"
        )
    err_console.print(Text(said), soft_wrap=True)


def _refuse(outcome: PassOutcome, show_plan: bool) -> None:
    """A held plan: show it (as a prompt would have), then fail saying why."""
    from reconciler.engine.plan.holds import refusal
    from reconciler.report import plan as plan_report

    assert outcome.held is not None
    if show_plan:
        print_plan(plan_report.as_text(outcome.plan, width=width()))
    raise refusal(outcome.held)


def _wait(request: Request, lock_timeout: float, approved: str | None) -> int:
    """Follow the runs of the plan approved at commit ``approved`` to the end with a live
    view; the exit code says how they ended."""
    from rich.live import Live
    from rich.text import Text

    from reconciler.engine.plan.actions import FINAL
    from reconciler.engine.wait import wait_until_final
    from reconciler.report.plan import skipped_allocations
    from reconciler.report.progress import counts_line, live_view

    def show(progress: Progress, outcome: PassOutcome) -> None:
        if outcome.applied is not None and (outcome.applied.submitted or outcome.applied.cancelled):
            live.console.print(counts_line(progress))
            _report_applied(outcome.applied)
        live.update(live_view(progress))

    def moved(head: str) -> None:
        assert approved is not None  # told only when following a commit
        err_console.print(
            Text(
                f"HEAD moved to {head[:12]}: not applied; run `recon apply` again (this wait "
                f"follows {approved[:12]}, the plan it showed, and carries out nothing more)"
            ),
            soft_wrap=True,
        )

    with Live(console=console, auto_refresh=False, transient=not console.is_terminal) as live:
        last = wait_until_final(
            request,
            on_pass=show,
            lock_timeout=max(lock_timeout, 60.0),
            approved=approved,
            on_moved=moved,
        )
    console.print(counts_line(last))
    if last.moved_to is not None and not last.final:
        left = [a.target for a in last.runs if a.outcome not in FINAL]
        err_console.print(
            Text(
                f"not followed to the end: HEAD moved to {last.moved_to[:12]}, and "
                f"{listed(left)} wait for `recon apply`"
            ),
            soft_wrap=True,
        )
        return EXIT_ERROR
    if not last.failed:
        skipped = skipped_allocations(last.plan)
        tail = f" {skipped[0].upper()}{skipped[1:]}." if skipped else ""
        console.print(f"All runs done.{tail}")
        return 0
    desired, records = last.desired, last.records
    for action in last.failed:
        err_console.print(
            Text(f"{action.outcome} {action.target}: {action.reason}"), soft_wrap=True
        )
        log = _error_log(desired, records, action.target)
        if log is not None:
            err_console.print(Text(f"  log: {log}"), soft_wrap=True)
    return EXIT_ERROR


def _error_log(desired: Desired, records: Sequence[SubmissionRecord], name: str) -> Path | None:
    """The stderr file of the run's latest job, where Slurm (or the local backend) put it;
    None when there is none (a job cancelled before it started never wrote one)."""
    from reconciler.scheduler.runfolder import log_files
    from reconciler.state.paths import run_dir

    jobs = [r.job_id for r in records if r.name == name and r.job_id is not None]
    if not jobs or name not in desired.runs:
        return None
    _out, err = log_files(run_dir(desired, desired.runs[name]), jobs[-1])
    return err if err.exists() else None


def _notify_failed(event: str, problem: str) -> None:
    from rich.text import Text

    err_console.print(Text(f"notify {event}: {problem}"), soft_wrap=True)


def _print_done(done: Done, kept: list[Done] | None = None) -> None:
    """One action's line, as it is done (`kept`: where to keep it, for a later summary)."""
    from rich.text import Text  # here, not at the top: `recon --help` needs no rich

    if kept is not None:
        kept.append(done)
    if done.problem:
        err_console.print(Text(done.line), soft_wrap=True)
    else:
        console.print(Text(done.line), soft_wrap=True)


def _report_applied(result: ApplyResult, each: bool = True) -> None:
    """The summary, after each action's line unless they were printed as they happened."""
    for done in result.lines() if each else ():
        _print_done(done)
    set_up = f"{plural(len(result.set_up), 'setup')} started, " if result.set_up else ""
    moved = f"{len(result.moved)} moved, " if result.moved else ""
    console.print(
        f"Apply complete: {len(result.submitted)} submitted, {len(result.cancelled)} cancelled, "
        f"{len(result.adopted)} adopted, {set_up}{moved}"
        f"{len(result.refused) + len(result.skipped)} not done."
    )
