"""What holds a plan back besides the prune guard (engine/plan/prune.py): suspension, and
the GPU-hour budget. Pure.

- ``suspend``: recon.yaml's `suspend: true` suspends the whole project; a run's, a
  sweep's (its members') or an allocation's own `suspend: true` suspends it, the runs
  that run in a suspended allocation, and every run downstream of a suspended one (they
  would wait for it anyway, and an upstream never submitted cannot be depended on). A
  suspended action stays in the plan, shown, with ``Action.suspended`` set: apply carries
  out none of them, the rest of the plan goes on. `suspend` is in no spec hash, so taking
  it out again goes on where the runs were.
- ``budget_guard``: recon.yaml's `budget` (GPU-hours per commit or per day) holds the
  whole plan, as the prune guard does, when the runs it submits as batch jobs are
  forecast to take more: each run's last successful duration times the GPUs it asks for
  (``forecast.last_durations``, what `recon plan` prints as the expected cost), or, for a run
  that never succeeded, its time limit times its GPUs. Per day, the GPU-hours the
  project's jobs that ended today (UTC, the journal's usage) held are added. It never
  cancels anything: a plan with no GPU submission is never held by it.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from reconciler.desired.desired import Desired
from reconciler.engine.plan.actions import CHANGING, SUBMITTING, Action
from reconciler.engine.plan.forecast import HOUR, Asks, last_durations
from reconciler.engine.plan.guards import BudgetGuard, PruneGuard
from reconciler.engine.plan.prune import explain
from reconciler.errors import OverBudgetError, PruneRefusedError, ReconError
from reconciler.state.records import SubmissionRecord
from reconciler.words import plural


def suspend(
    actions: Sequence[Action], desired: Desired, only: Collection[str] | None = None
) -> list[Action]:
    """The actions, those that would change the cluster for what is suspended marked
    ``suspended`` (prunes too, when the whole project is). ``only``: look at the actions
    of these targets alone (a re-plan of some runs), the others as they are."""
    everything = desired.project.suspend
    seen: dict[str, bool] = {}
    return [
        action.model_copy(update={"suspended": True})
        if action.kind in CHANGING
        and not action.suspended
        and (only is None or action.target in only)
        and (everything or _suspended(desired, action, seen))
        else action
        for action in actions
    ]


def _suspended(desired: Desired, action: Action, seen: dict[str, bool]) -> bool:
    if action.target_kind == "alloc":
        declared = desired.allocations.get(action.target)
        return declared is not None and declared.spec.suspend
    return action.target in desired.runs and _run_suspended(desired, action.target, seen)


def _run_suspended(desired: Desired, name: str, seen: dict[str, bool]) -> bool:
    """Its own `suspend`, its allocation's, or an upstream's (``seen``: those known)."""
    if name not in seen:
        run = desired.runs[name]
        where = desired.allocations.get(run.allocation) if run.allocation else None
        seen[name] = (
            run.shape.suspended
            or (where is not None and where.spec.suspend)
            or any(_run_suspended(desired, up, seen) for up in desired.upstreams.get(name, ()))
        )
    return seen[name]


def budget_guard(
    desired: Desired,
    actions: Sequence[Action],
    records: Sequence[SubmissionRecord],
    now: datetime,
    *,
    confirmed: bool,
) -> BudgetGuard | None:
    """The budget's guard over this plan, or None when there is no budget, the plan
    submits no GPU run, or the forecast stays within it."""
    budget = desired.project.budget
    if budget is None:
        return None
    asks = {
        action.target: Asks.of(desired.runs[action.target].resources)
        for action in actions
        if action.kind in SUBMITTING
        and action.changes_cluster
        and action.target_kind == "run"
        and desired.runs[action.target].allocation is None  # a step: its allocation's
    }
    gpu = {name: ask for name, ask in asks.items() if ask.gpus}
    if not gpu:
        return None
    durations = last_durations(records)
    forecast = 0.0
    unforecast = []
    for name, ask in gpu.items():
        seconds = durations.get(name, ask.limit_s)
        if seconds is None:
            unforecast.append(name)
        else:
            forecast += seconds * ask.gpu_equivalents / HOUR
    spent = _spent_today(records, now) if budget.per == "day" else 0.0
    if forecast + spent <= budget.gpu_hours:
        return None
    return BudgetGuard(
        gpu_hours=budget.gpu_hours,
        per=budget.per,
        forecast=round(forecast, 2),
        spent=round(spent, 2),
        runs=tuple(gpu),
        unforecast=tuple(unforecast),
        confirmed=confirmed,
    )


def _spent_today(records: Sequence[SubmissionRecord], now: datetime) -> float:
    """GPU-hours the project's jobs that ended on `now`'s day (UTC) held (a run's step
    in an allocation counts in its allocation's job)."""
    spent = 0.0
    for record in records:
        usage = record.usage if record.usage_json is not None else None
        if usage is None or usage.ended is None or "." in (record.job_id or ""):
            continue
        if usage.ended.date() == now.date():
            spent += usage.gpu_s / HOUR
    return spent


def explain_budget(guard: BudgetGuard) -> str:
    """Why the plan is held by its budget, and what to do."""
    runs = plural(len(guard.runs), "GPU run")
    are = "is" if len(guard.runs) == 1 else "are"
    what = (
        f"the plan's {runs} ({_listed(guard.runs)}) {are} forecast to take "
        f"{guard.forecast:g} GPU-hours"
    )
    if guard.per == "day":
        what += f", and the project's jobs held {guard.spent:g} today"
    what += f": more than budget {guard.gpu_hours:g} GPU-hours per {guard.per}"
    if guard.unforecast:
        what += f" ({_listed(guard.unforecast)} not forecast: no last duration, no time limit)"
    if guard.confirmed:
        return f"{what}; confirmed with --allow-over-budget"
    return (
        f"{what}. Nothing of it is carried out; running jobs go on. If the cost is right, "
        "confirm with `recon apply --allow-over-budget`; if not, change the commit (or "
        "recon.yaml's budget)"
    )


def _listed(names: Sequence[str]) -> str:
    shown = ", ".join(names[:5])
    return f"{shown} and {len(names) - 5} more" if len(names) > 5 else shown


Hold = PruneGuard | BudgetGuard


def explain_hold(hold: Hold) -> str:
    """Why a guard holds (or, confirmed, held) the plan, and what to do: for plan, apply,
    watch, status and notifications."""
    return explain_budget(hold) if isinstance(hold, BudgetGuard) else explain(hold)


def refusal(hold: Hold) -> ReconError:
    """The error apply ends with when the guard held its plan."""
    said = f"refused to apply: {explain_hold(hold)}"
    return OverBudgetError(said) if isinstance(hold, BudgetGuard) else PruneRefusedError(said)


def refused_event(hold: Hold) -> str:
    """The event a watch logs and a notification is sent as, for a pass the guard held."""
    return "budget-refused" if isinstance(hold, BudgetGuard) else "prune-refused"


def confirm_command(hold: Hold) -> str:
    """The command a person runs to confirm what the guard holds."""
    flag = "--allow-over-budget" if isinstance(hold, BudgetGuard) else "--allow-prune-all"
    return f"recon apply {flag}"


def suspended_notes(actions: Sequence[Action]) -> tuple[str, ...]:
    """What a plan with suspended actions says of them, in a note."""
    names = tuple(dict.fromkeys(action.target for action in actions if action.suspended))
    if not names:
        return ()
    return (
        f"suspended: {_listed(names)} (`suspend: true` in recon.yaml or the specs, or an "
        "upstream or allocation suspended): planned and shown, nothing submitted or "
        "cancelled for them until a commit takes `suspend` away",
    )
