"""How a job ended is a field of its journal record (``EndingKind``), judged once by
settle; the planner and status read the field, never the words of the reason."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from reconciler.engine.observe.endings import as_recorded, judge
from reconciler.engine.plan import plan
from reconciler.engine.plan.causes import Cause
from reconciler.scheduler.runfolder import checkpointed
from reconciler.scheduler.states import ENDINGS, Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.state.paths import run_path
from reconciler.state.records import EndingKind
from tests.planning import NOW, desired, hash_of, job, observed, record, run


def test_every_slurm_ending_settle_words_has_a_kind_that_says_it_back() -> None:
    said = {kind.in_words for kind in EndingKind if kind.in_words is not None}
    assert said == ENDINGS
    assert {EndingKind.of_state(state) for state in S} - {None} == {
        kind for kind in EndingKind if kind.in_words is not None
    }


@pytest.mark.parametrize(
    ("state", "reason", "health", "kind", "words"),
    [
        (S.TIMEOUT, "TimeLimit", Health.FAILED, EndingKind.TIMEOUT, "timed out: TimeLimit"),
        (S.NODE_FAIL, None, Health.FAILED, EndingKind.NODE_FAIL, "node failed"),
        (S.FAILED, "NonZeroExitCode", Health.FAILED, None, "NonZeroExitCode"),
        (S.CANCELLED, "DependencyNeverSatisfied", Health.CANCELLED, EndingKind.DEPENDENCY,
         "DependencyNeverSatisfied"),
        # no output on disk: failed by recon's judgement, whatever Slurm says
        (S.COMPLETED, None, Health.FAILED, EndingKind.NO_OUTPUTS,
         "completed without its declared outputs: out"),
    ],
)  # fmt: skip
def test_settle_records_how_a_job_ended_beside_its_reason(
    state: S, reason: str | None, health: Health, kind: EndingKind | None, words: str
) -> None:
    wanted = desired(run("a", outputs={"out": "out.txt"}))
    digest = hash_of(wanted, "a")
    journalled = [record("a", digest, "10")]
    (ended,) = judge(wanted, observed(job("a", digest, state, "10", reason=reason)), journalled)
    assert (ended.health, ended.kind, ended.reason) == (health, kind, words)
    (settled,) = as_recorded(journalled, [ended])
    assert (settled.final_health, settled.ending, settled.reason) == (health, kind, words)


def test_the_planner_reads_the_ending_not_the_words_of_the_reason() -> None:
    """A reason reworded (or in another language) changes nothing the planner does."""
    wanted = desired(run("a", retries=1))
    digest = hash_of(wanted, "a")
    failed = record("a", digest, "10", final=Health.FAILED, reason="Zeitlimit erreicht",
                    ending=EndingKind.TIMEOUT)  # fmt: skip
    (action,) = plan(wanted, observed(), [failed], NOW, scheduler="slurm").actions
    assert action.cause is Cause.RETRY
    assert action.reason == "attempt 2 of 2: job 10 Zeitlimit erreicht"
    # A job that ended waiting for its dependency never ran: no attempt, whatever its words.
    never_ran = record("a", digest, "10", final=Health.CANCELLED, reason="gone",
                       ending=EndingKind.DEPENDENCY)  # fmt: skip
    (action,) = plan(wanted, observed(), [never_ran], NOW, scheduler="slurm").actions
    assert action.cause is Cause.NEVER_RUN


def test_status_tells_how_a_job_the_cluster_forgot_ended_from_its_ending() -> None:
    """Once the job has left sacct's window, status says how it ended from the journal's
    ending field, in the words Slurm's state has, whatever the reason's words."""
    from reconciler.engine.ledger.status import run_statuses

    wanted = desired(run("a"))
    digest = hash_of(wanted, "a")
    timed_out = record("a", digest, "10", final=Health.FAILED, reason="Zeitlimit erreicht",
                       ending=EndingKind.TIMEOUT)  # fmt: skip
    made = plan(wanted, observed(), [timed_out], NOW, scheduler="slurm")
    (row,) = run_statuses(wanted, made, observed(), [timed_out])
    assert (row.health, row.how) == (Health.FAILED, "timed out")
    no_outputs = replace(timed_out, reason="completed without its declared outputs: out",
                         ending=EndingKind.NO_OUTPUTS)  # fmt: skip
    (row,) = run_statuses(wanted, made, observed(), [no_outputs])
    assert row.how is None  # recon's own judgement: the reason column says it


@pytest.mark.parametrize(
    ("state", "exit_code", "checkpoint", "kind", "words"),
    [
        # the script's marker: saved when warned, whatever Slurm calls it
        (S.FAILED, 3, True, EndingKind.CHECKPOINTED,
         "saved its checkpoint when warned (failed)"),
        (S.TIMEOUT, None, True, EndingKind.CHECKPOINTED,
         "saved its checkpoint when warned (timed out)"),
        # a marker left behind means nothing for a run that declares no checkpoint
        (S.FAILED, 3, False, None, None),
    ],
)  # fmt: skip
def test_settle_reads_the_checkpointed_marker(
    tmp_path: Path,
    state: S,
    exit_code: int | None,
    checkpoint: bool,
    kind: EndingKind | None,
    words: str | None,
) -> None:
    fields = {"checkpoint": {"path": "ckpt/"}} if checkpoint else {}
    wanted = replace(desired(run("a", **fields)), root=tmp_path)
    digest = hash_of(wanted, "a")
    marker = checkpointed(run_path(wanted, wanted.runs["a"]), "10")
    marker.parent.mkdir(parents=True)
    marker.touch()
    journalled = [record("a", digest, "10")]
    ended_job = job("a", digest, state, "10", exit_code=exit_code)
    (ended,) = judge(wanted, observed(ended_job), journalled)
    assert (ended.kind, ended.reason if kind else None) == (kind, words)
