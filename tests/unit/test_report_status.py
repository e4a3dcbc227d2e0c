"""`recon status` as text: fits the width, pipes whole, plain without a terminal."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.engine.ledger.status import AllocationJob, AllocationStatus, RunningStep, RunStatus
from reconciler.engine.plan.actions import ActionKind, Plan, SyncStatus
from reconciler.report.status import Layout, render, summary
from reconciler.scheduler.states import Health
from tests.cli import recon
from tests.gitrepo import GitRepo

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
LONG = (
    "blocked: upstream prepare failed with no retries left; fix it and commit, which "
    "changes its spec"
)
PLAN = Plan(
    project="cartpole",
    root="/p",
    commit="0123456789abcdef",
    scheduler="slurm",
    created_at=NOW,
    observation_complete=True,
    fingerprint="f",
    actions=(),
)


def row(name: str, sync: SyncStatus, health: Health | None, reason: str) -> RunStatus:
    return RunStatus(
        name=name,
        sync=sync,
        health=health,
        job_id="41" if health else None,
        finished_at=NOW - timedelta(hours=1) if health else None,
        last_success_commit="0123456789abcdef" if sync is SyncStatus.CURRENT else None,
        outputs={"model": "model/policy.json"},
        reason=reason,
        next=ActionKind(reason.partition(": ")[0]),  # as run_statuses writes them: "<next>: <why>"
    )


ROWS = [
    row("prepare", SyncStatus.NEVER_RUN, Health.FAILED, "no-op: failed (job 41), no retries left"),
    row("train-a-rather-long-name", SyncStatus.NEVER_RUN, Health.BLOCKED, LONG),
    row("evaluate", SyncStatus.CURRENT, Health.SUCCEEDED, "no-op: current (job 41 succeeded)"),
]
HELD = [
    AllocationStatus(
        name="interactive",
        job_id="50",
        health=Health.RUNNING,
        nodes="gpu1",
        time_left=timedelta(hours=1, minutes=5),
        idle=None,
        steps_running=(RunningStep(step_id="50.0", run="train"),),
        history=tuple(
            AllocationJob(
                job_id=job_id,
                spec_hash="0123456789abcdef",
                status="submitted",
                created_at=datetime(2026, 11, 29, 10, 0, tzinfo=UTC),
                runs=runs,
                health=health,
            )
            for job_id, runs, health in (("50", 1, Health.RUNNING), ("49", 2, Health.CANCELLED))
        ),
        reason="no-op: " + LONG,
        next=ActionKind.NOOP,
    )
]


def test_an_allocation_where_no_step_runs_shows_for_how_long() -> None:
    idle = HELD[0].model_copy(update={"steps_running": (), "idle": timedelta(minutes=12)})
    shown = render(PLAN, ROWS, [idle], Layout(width=None), NOW).plain
    (line,) = [line for line in shown.splitlines() if line.startswith("interactive")]
    assert line.split()[4:7] == ["1h05m", "none", "for"] and "for 12m  blocked:" in line
    as_json = json.loads(idle.model_dump_json())
    assert (as_json["idle"], as_json["time_left"]) == (720, 3900)


def lines(layout: Layout) -> list[str]:
    return render(PLAN, ROWS, HELD, layout, NOW).plain.splitlines()


@pytest.mark.parametrize("width", [80, 100])
def test_every_line_fits_the_width_and_a_row_is_one_line(width: int) -> None:
    shown = lines(Layout(width=width))
    assert max(len(line) for line in shown) <= width
    (blocked,) = [line for line in shown if line.startswith("train-a-rather-long-name")]
    assert blocked.endswith("…")
    shortened = re.split(r"\s{2,}", blocked)[-1].removesuffix("…")
    assert LONG.startswith(shortened) and LONG[len(shortened)] in " ;,"  # at a word's end


def test_piped_lines_are_whole() -> None:
    shown = lines(Layout(width=None))
    assert any(line.endswith(LONG) for line in shown)
    assert len([line for line in shown if line.startswith("train-a-rather-long-name")]) == 1


def test_ascii_locale_shortens_with_dots() -> None:
    shown = "\n".join(lines(Layout(width=80, ascii=True)))
    assert "..." in shown and "…" not in shown
    assert shown.isascii()


def test_wide_has_every_column_and_shortens_nothing() -> None:
    shown = lines(Layout(width=80, wide=True))
    assert shown[2].split() == [
        "RUN", "SYNC", "HEALTH", "JOB", "FINISHED", "LAST", "SUCCESS", "OUTPUTS", "NEXT"
    ]  # fmt: skip
    assert any(line.endswith(LONG) for line in shown)
    assert any("model=model/policy.json" in line and "11:00" in line for line in shown)
    # The allocation's history, newest job first.
    assert any("job 50 (spec 01234567) submitted" in line and "job 49" in line for line in shown)


def test_styles_only_when_asked() -> None:
    assert render(PLAN, ROWS, HELD, Layout(width=80), NOW).spans == []
    styled = render(PLAN, ROWS, HELD, Layout(width=80, styled=True), NOW)
    assert {span.style for span in styled.spans} >= {"bold", "red", "green"}


def test_the_summary_counts_sync_then_failed_and_blocked() -> None:
    assert summary(ROWS) == "3 runs: 2 never run, 1 current; 1 failed, 1 blocked."
    assert summary(ROWS[2:]) == "1 run: 1 current."
    assert summary([]) == "No runs."


def test_a_no_op_shows_only_why() -> None:
    shown = "\n".join(lines(Layout(width=None)))
    assert "current (job 41 succeeded)" in shown and "no-op" not in shown
    assert "1h05m" in shown  # the allocation's time left


def test_the_command_under_lc_all_c_and_no_color(
    repo: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    long_name = "a-run-whose-name-takes-most-of-the-line-on-its-own"
    repo.commit(
        {
            "recon.yaml": "project: demo\nscheduler: local\n",
            "specs/a.yaml": f"kind: Run\nname: {long_name}\ncommand: echo hi\n",
        }
    )
    monkeypatch.setenv("LC_ALL", "C")
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    result = recon(capsys, "status", str(repo.root), "--no-color")
    assert result.code == 0, result
    assert result.out.isascii() and "\x1b" not in result.out
    (line,) = [line for line in result.out.splitlines() if line.startswith("a-run-whose")]
    assert len(line) <= 80 and line.endswith("submit: not yet run")
    assert line.split()[0].endswith("...")  # the name gave way too
    assert "1 run: 1 never run." in result.out


def test_a_held_job_shows_slurm_s_reason() -> None:
    held = row("train", SyncStatus.NEVER_RUN, Health.PENDING, "no-op: in progress (job 41)")
    held = held.model_copy(update={"waiting_for": "JobHeldAdmin"})
    shown = render(PLAN, [held], [], Layout(width=None), NOW).plain.splitlines()
    assert re.split(r"\s{2,}", shown[3])[:3] == ["train", "never run", "pending (JobHeldAdmin)"]


def test_a_sweep_is_one_row_with_counts_unless_it_is_named() -> None:
    members = [
        row(f"seeds[seed={i}]", SyncStatus.CURRENT, Health.SUCCEEDED, "no-op: current")
        for i in range(4)
    ] + [row("seeds[seed=4]", SyncStatus.MISSING, Health.SUCCEEDED, "submit: output lost")]
    rows = [ROWS[2], *members]
    text = render(PLAN, rows, [], Layout(), NOW).plain
    assert re.search(
        r"^seeds \(5 members\)\s+4 current, 1 missing\s+succeeded\s+41\s+4 no-op, 1 submit$",
        text,
        re.MULTILINE,
    ), text
    assert "seeds[seed=4]" not in text
    named = render(PLAN.model_copy(update={"targets": ("seeds",)}), rows, [], Layout(), NOW)
    assert "seeds[seed=4]" in named.plain and "5 members" not in named.plain
