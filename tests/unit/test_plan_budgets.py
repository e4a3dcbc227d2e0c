"""Retry budgets by kind, on plain values: which budget each failed attempt draws from
(read from the Slurm state its job ended in, recorded or observed), what is left, and
what plan and status say of it."""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest
from rich.console import Console

from reconciler.desired.loader import load_desired, open_source
from reconciler.desired.retries import RetryKind
from reconciler.engine.ledger.status import run_statuses
from reconciler.engine.plan import plan
from reconciler.engine.plan.actions import Action, ActionKind, RetryBudget, RunOutcome
from reconciler.engine.plan.budgets import kind_of
from reconciler.engine.plan.causes import Cause
from reconciler.engine.wait import Progress
from reconciler.report.plan import as_json, as_markdown, as_text
from reconciler.report.progress import live_view
from reconciler.report.status import Layout, render
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.scheduler.usage import JobUsage
from reconciler.state.records import EndingKind, SubmissionRecord
from reconciler.web.snapshot import why_words
from tests.gitrepo import GitRepo
from tests.planning import NOW, desired, hash_of, job, observed, record, run

FIX = "Change its spec or code and commit, or `recon apply --replace train`"

# How each Slurm ending is recorded by settle: (its ending kind, the reason it writes).
RECORDED: dict[S, tuple[EndingKind | None, str | None]] = {
    S.FAILED: (None, None),
    S.TIMEOUT: (EndingKind.TIMEOUT, "timed out"),
    S.PREEMPTED: (EndingKind.PREEMPTED, "preempted"),
    S.NODE_FAIL: (EndingKind.NODE_FAIL, "node failed"),
    S.BOOT_FAIL: (EndingKind.BOOT_FAIL, "node failed to boot"),
    S.OUT_OF_MEMORY: (EndingKind.OUT_OF_MEMORY, "out of memory"),
    S.DEADLINE: (EndingKind.DEADLINE, "deadline passed"),
    S.CANCELLED: (None, None),  # by someone other than recon: an attempt
}


def settled(digest: str, job_id: str, state: S, elapsed_s: float = 3600.0) -> SubmissionRecord:
    """A job the journal settled as ended in ``state``, having run ``elapsed_s``."""
    kind, reason = RECORDED[state]
    health = Health.CANCELLED if state is S.CANCELLED else Health.FAILED
    exit_code = 1 if state is S.FAILED else None
    usage = json.dumps(JobUsage(elapsed_s=elapsed_s).to_json())
    made = record("train", digest, job_id, health, reason=reason, exit_code=exit_code, ending=kind)
    return replace(made, usage_json=usage)


def decided(retries: Any, states: list[S]) -> Action:
    """The run's action after jobs 60, 61, ... ended in ``states``, as the journal has them."""
    state = desired(run("train", retries=retries))
    digest = hash_of(state, "train")
    records = [settled(digest, str(60 + i), s) for i, s in enumerate(states)]
    (action,) = plan(state, observed(), records, NOW, scheduler="slurm").actions
    return action


@pytest.mark.parametrize(
    ("ending", "kind"),
    [
        (None, RetryKind.FAILURE),
        (EndingKind.NO_OUTPUTS, RetryKind.FAILURE),
        (EndingKind.DEADLINE, RetryKind.FAILURE),
        (EndingKind.SPECIAL_EXIT, RetryKind.FAILURE),
        (EndingKind.TIMEOUT, RetryKind.TIMEOUT),
        (EndingKind.PREEMPTED, RetryKind.PREEMPTION),
        (EndingKind.NODE_FAIL, RetryKind.NODE_FAILURE),
        (EndingKind.BOOT_FAIL, RetryKind.NODE_FAILURE),
        (EndingKind.OUT_OF_MEMORY, RetryKind.OUT_OF_MEMORY),
    ],
)
def test_each_ending_draws_from_its_kind(ending: EndingKind | None, kind: RetryKind) -> None:
    assert kind_of(ending) is kind


# retries, the states its jobs ended in (oldest first), then what the plan decides:
# the action, the budget (kind, shared, allowed, failed) and the reason in words.
TABLE: list[tuple[Any, list[S], ActionKind, tuple[RetryKind, bool, int | None, int], str]] = [
    # A plain number: one budget for every kind, said as before budgets came.
    (2, [S.FAILED], ActionKind.RETRY, (RetryKind.FAILURE, True, 2, 1),
     "attempt 2 of 3: job 60 failed (exit 1)"),
    (2, [S.TIMEOUT, S.OUT_OF_MEMORY], ActionKind.RETRY, (RetryKind.OUT_OF_MEMORY, True, 2, 2),
     "attempt 3 of 3: job 61 out of memory"),
    (1, [S.TIMEOUT, S.PREEMPTED], ActionKind.NOOP, (RetryKind.PREEMPTION, True, 1, 2),
     f"failed: job 61 preempted; no retries left (retries: 1). {FIX}"),
    (0, [S.CANCELLED], ActionKind.NOOP, (RetryKind.FAILURE, True, 0, 1),
     f"failed: job 60 cancelled; no retries left (retries: 0). {FIX}"),
    # Budgets per kind: only the last attempt's kind counts.
    ({"failure": 0, "timeout": 3}, [S.TIMEOUT], ActionKind.RETRY,
     (RetryKind.TIMEOUT, False, 3, 1),
     "attempt 2: job 60 timed out after 01:00:00; 2 of 3 timeout retries left"),
    ({"failure": 0, "timeout": 3}, [S.TIMEOUT] * 3, ActionKind.RETRY,
     (RetryKind.TIMEOUT, False, 3, 3),
     "attempt 4: job 62 timed out after 01:00:00; 0 of 3 timeout retries left"),
    ({"failure": 0, "timeout": 3}, [S.TIMEOUT] * 4, ActionKind.NOOP,
     (RetryKind.TIMEOUT, False, 3, 4),
     f"failed: job 63 timed out after 01:00:00; no timeout retries left (retries.timeout: 3). "
     f"{FIX}"),
    ({"failure": 0, "timeout": 3}, [S.TIMEOUT, S.FAILED], ActionKind.NOOP,
     (RetryKind.FAILURE, False, 0, 1),
     f"failed: job 61 failed (exit 1); no failure retries left (retries.failure: 0). {FIX}"),
    ({"failure": 1, "timeout": 1}, [S.TIMEOUT, S.FAILED], ActionKind.RETRY,
     (RetryKind.FAILURE, False, 1, 1),
     "attempt 3: job 61 failed (exit 1); 0 of 1 failure retry left"),
    ({"failure": 1, "timeout": 1}, [S.TIMEOUT, S.FAILED, S.TIMEOUT], ActionKind.NOOP,
     (RetryKind.TIMEOUT, False, 1, 2),
     f"failed: job 62 timed out after 01:00:00; no timeout retries left "
     f"(retries.timeout: 1). {FIX}"),
    # A kind left out has none; `failure` too.
    ({"timeout": 3}, [S.FAILED], ActionKind.NOOP, (RetryKind.FAILURE, False, 0, 1),
     f"failed: job 60 failed (exit 1); no failure retries left "
     f"(retries.failure: 0 when not listed). {FIX}"),
    ({"failure": 2}, [S.OUT_OF_MEMORY], ActionKind.NOOP, (RetryKind.OUT_OF_MEMORY, False, 0, 1),
     f"failed: job 60 out of memory; no out-of-memory retries left "
     f"(retries.out_of_memory: 0 when not listed). {FIX}"),
    ({"out_of_memory": 1}, [S.OUT_OF_MEMORY], ActionKind.RETRY,
     (RetryKind.OUT_OF_MEMORY, False, 1, 1),
     "attempt 2: job 60 out of memory; 0 of 1 out-of-memory retry left"),
    # Unlimited preemption, whatever the count.
    ({"preemption": "unlimited"}, [S.PREEMPTED] * 7, ActionKind.RETRY,
     (RetryKind.PREEMPTION, False, None, 7),
     "attempt 8: job 66 preempted; 7 preemption retries so far (unlimited)"),
    ({"preemption": "unlimited"}, [S.PREEMPTED, S.FAILED], ActionKind.NOOP,
     (RetryKind.FAILURE, False, 0, 1),
     f"failed: job 61 failed (exit 1); no failure retries left "
     f"(retries.failure: 0 when not listed). {FIX}"),
    # NODE_FAIL and BOOT_FAIL share the node-failure budget.
    ({"node_failure": 1}, [S.BOOT_FAIL, S.NODE_FAIL], ActionKind.NOOP,
     (RetryKind.NODE_FAILURE, False, 1, 2),
     f"failed: job 61 node failed; no node failure retries left "
     f"(retries.node_failure: 1). {FIX}"),
    # DEADLINE and a cancel by someone else are failures.
    ({"failure": 1}, [S.DEADLINE], ActionKind.RETRY, (RetryKind.FAILURE, False, 1, 1),
     "attempt 2: job 60 deadline passed; 0 of 1 failure retry left"),
    ({"failure": 1, "timeout": 5}, [S.CANCELLED, S.CANCELLED], ActionKind.NOOP,
     (RetryKind.FAILURE, False, 1, 2),
     f"failed: job 61 cancelled; no failure retries left (retries.failure: 1). {FIX}"),
]  # fmt: skip


@pytest.mark.parametrize(("retries", "states", "kind", "budget", "reason"), TABLE)
def test_the_budget_a_failed_run_draws_from(
    retries: Any,
    states: list[S],
    kind: ActionKind,
    budget: tuple[RetryKind, bool, int | None, int],
    reason: str,
) -> None:
    action = decided(retries, states)
    assert action.kind is kind
    assert action.cause is (Cause.RETRY if kind is ActionKind.RETRY else Cause.RETRIES_EXHAUSTED)
    assert action.retry_budget == RetryBudget(
        kind=budget[0], shared=budget[1], allowed=budget[2], failed=budget[3]
    )
    assert action.reason == reason


def test_a_plain_number_decides_exactly_as_budgets_that_all_share_it() -> None:
    """A plain number keeps today's meaning: N retries for any mix of kinds."""
    mixes = [[S.FAILED], [S.TIMEOUT, S.FAILED], [S.PREEMPTED, S.NODE_FAIL, S.OUT_OF_MEMORY]]
    for count in range(4):
        for states in mixes:
            retried = decided(count, states).kind is ActionKind.RETRY
            assert retried == (len(states) <= count), (count, states)


def observed_only(digest: str, job_id: str, state: S, elapsed: timedelta | None) -> ObservedJob:
    made = job("train", digest, state, job_id, exit_code=1 if state is S.FAILED else None)
    return made.model_copy(update={"rows": (replace(made.rows[0], elapsed=elapsed),)})


@pytest.mark.parametrize(
    ("state", "words", "kind"),
    [
        (S.TIMEOUT, "timed out after 00:01:02", RetryKind.TIMEOUT),
        (S.OUT_OF_MEMORY, "out of memory", RetryKind.OUT_OF_MEMORY),
        (S.PREEMPTED, "preempted", RetryKind.PREEMPTION),
        (S.NODE_FAIL, "node failed", RetryKind.NODE_FAILURE),
        (S.FAILED, "failed (exit 1)", RetryKind.FAILURE),
    ],
)
def test_a_job_not_settled_yet_draws_by_its_slurm_state(
    state: S, words: str, kind: RetryKind
) -> None:
    spec = desired(run("train", retries={"timeout": 1, "preemption": "unlimited"}))
    digest = hash_of(spec, "train")
    ended = observed_only(digest, "60", state, timedelta(seconds=62))
    result = plan(spec, observed(ended), [record("train", digest, "60")], NOW, scheduler="slurm")
    (action,) = result.actions
    assert action.retry_budget is not None and action.retry_budget.kind is kind
    assert f"job 60 {words}" in action.reason
    retried = kind in (RetryKind.TIMEOUT, RetryKind.PREEMPTION)
    assert action.kind is (ActionKind.RETRY if retried else ActionKind.NOOP)


def test_a_het_job_draws_by_the_component_that_timed_out() -> None:
    spec = desired(
        run("train", retries={"timeout": 1}, resources={"components": [{"cpus": 1}, {"cpus": 2}]})
    )
    digest = hash_of(spec, "train")
    first = job("train", digest, S.TIMEOUT, "40")
    rows = (
        replace(first.rows[0], job_id="40+0", het_offset=0, elapsed=timedelta(minutes=5)),
        replace(first.rows[0], job_id="40+1", het_offset=1, state=S.CANCELLED),
    )
    het = ObservedJob(job_id="40", tag=first.tag, rows=rows)
    result = plan(spec, observed(het), [record("train", digest, "40")], NOW, scheduler="slurm")
    (action,) = result.actions
    assert action.kind is ActionKind.RETRY
    assert action.reason == "attempt 2: job 40 timed out after 00:05:00; 0 of 1 timeout retry left"


def test_a_job_recon_cancelled_draws_from_no_budget() -> None:
    spec = desired(run("train", retries={"failure": 0}))
    digest = hash_of(spec, "train")
    records = [settled(digest, "60", S.CANCELLED)]
    cancelled = frozenset({"60"})
    result = plan(spec, observed(), records, NOW, scheduler="slurm", cancelled=cancelled)
    (action,) = result.actions
    assert (action.kind, action.cause) == (ActionKind.SUBMIT, Cause.CANCELLED_BY_RECON)
    assert action.retry_budget is None


SWEEP = """\
kind: Run
name: train
matrix:
  seed: [0, 1]
retries: {failure: 0, timeout: 1}
command: echo {matrix.seed} > {outputs.model.path}
outputs:
  model: model.txt
"""


def test_a_sweep_s_members_each_draw_from_their_own_budgets(repo: GitRepo) -> None:
    repo.commit({"specs/train.yaml": SWEEP})
    state = load_desired(open_source(repo.root))
    first, second = state.sweeps["train"].members
    records = [
        replace(settled(state.runs[first].spec_hash, "70", S.TIMEOUT), name=first),
        replace(settled(state.runs[second].spec_hash, "71", S.TIMEOUT), name=second),
        replace(settled(state.runs[second].spec_hash, "72", S.TIMEOUT), name=second),
    ]
    result = plan(state, observed(), records, NOW, scheduler="slurm")
    by_member = {a.target: (a.kind, a.retry_budget) for a in result.actions}
    assert by_member[first] == (
        ActionKind.RETRY,
        RetryBudget(kind=RetryKind.TIMEOUT, shared=False, allowed=1, failed=1),
    )
    assert by_member[second] == (
        ActionKind.NOOP,
        RetryBudget(kind=RetryKind.TIMEOUT, shared=False, allowed=1, failed=2),
    )


def test_every_surface_says_the_budget_and_what_is_left() -> None:
    """plan (text, markdown, JSON), status (text, JSON), the web view and `apply --wait`'s
    live view all say which budget the retry draws from, from the one action."""
    spec = desired(run("train", retries={"failure": 0, "timeout": 3}))
    digest = hash_of(spec, "train")
    records = [settled(digest, "60", S.TIMEOUT)]
    made = plan(spec, observed(), records, NOW, scheduler="slurm")
    said = "attempt 2: job 60 timed out after 01:00:00; 2 of 3 timeout retries left"
    budget = {"kind": "timeout", "shared": False, "allowed": 3, "failed": 1}

    assert said in " ".join(as_text(made).split())  # wrapped at any width
    assert said in as_markdown(made)
    (shown,) = json.loads(as_json(made))["actions"]
    assert (shown["reason"], shown["retry_budget"]) == (said, budget)

    (row,) = run_statuses(spec, made, observed(), records)
    assert row.retry_budget is not None and row.retry_budget.left == 2
    printed = render(made, [row], [], Layout(), NOW).plain
    assert f"retry: {said}" in printed
    assert json.loads(row.model_dump_json())["retry_budget"] == budget
    assert why_words(row).endswith(f"retry: {said}")

    action = made.actions[0].model_copy(update={"outcome": RunOutcome.INFLIGHT})
    waited = Progress(made.model_copy(update={"actions": (action,)}), 3.0, 1, spec, records)
    out = io.StringIO()
    Console(file=out, width=200).print(live_view(waited))
    assert said in out.getvalue()
