"""A live Plan rendered as text, markdown and JSON: literal output for every action kind."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from reconciler.engine.plan.actions import Action, ActionKind, FieldChange, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.report.plan import RENDERERS, as_json, as_markdown, as_text

GPUS = FieldChange(field="resources.gpus", old="a100:2", new="a100:4")

EVERY_KIND = Plan(
    project="cartpole",
    root="/home/ana/cartpole",
    commit="1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
    scheduler="slurm",
    created_at=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
    observation_complete=False,
    notes=(
        "Observation incomplete: sacct failed (slurmdbd down); "
        "no cancel, replace or prune in this plan.",
    ),
    fingerprint="5f0c1e",
    actions=(
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="prepare",
            reason="not yet run",
            spec_hash="a1",
        ),
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="train",
            reason="not yet run",
            after=("prepare",),
        ),
        Action(
            kind=ActionKind.RETRY,
            cause=Cause.RETRY,
            target="tune",
            reason="attempt 2 of 3: job 1250 failed (exit 1)",
            after=("prepare", "train"),
        ),
        Action(
            kind=ActionKind.REPLACE,
            cause=Cause.SPEC_CHANGED,
            target="evaluate",
            reason="spec changed",
            job_ids=("1234",),
            changes=(GPUS,),
        ),
        Action(
            kind=ActionKind.REPLACE,
            cause=Cause.SPEC_CHANGED,
            target="serve",
            reason="spec changed",
            job_ids=("1240", "1241"),
            changes=(GPUS, FieldChange(field="env.SEED", old=None, new=7)),
        ),
        Action(
            kind=ActionKind.CANCEL,
            cause=Cause.PRUNE,
            target="old-run",
            reason="run left the repo",
            job_ids=("1200",),
        ),
        Action(
            kind=ActionKind.ADOPT,
            cause=Cause.ADOPT,
            target="sweep-3",
            target_kind="alloc",
            reason="tagged job 1300 not in the journal",
            job_ids=("1300",),
        ),
        Action(
            kind=ActionKind.BLOCKED,
            cause=Cause.UPSTREAM_FAILED,
            target="report",
            reason="upstream evaluate failed",
        ),
        Action(
            kind=ActionKind.NOOP,
            cause=Cause.CURRENT,
            target="data",
            reason="current (job 1100 succeeded)",
            job_ids=("1100",),
        ),
    ),
)


def plan_of(*actions: Action, complete: bool = True, commit: str | None = "c0ffee") -> Plan:
    return EVERY_KIND.model_copy(
        update={"actions": actions, "notes": (), "observation_complete": complete, "commit": commit}
    )


def noop(target: str) -> Action:
    return Action(kind=ActionKind.NOOP, cause=Cause.CURRENT, target=target, reason="current")


def test_text_for_every_action_kind() -> None:
    assert as_text(EVERY_KIND) == (
        "recon plan for project cartpole at commit 1a2b3c4d5e6f (scheduler: slurm)\n"
        "Observation incomplete: sacct failed (slurmdbd down); "
        "no cancel, replace or prune in this plan.\n"
        "\n"
        "  + submit    prepare        not yet run\n"
        "  + submit    train          not yet run; after prepare\n"
        "  + retry     tune           attempt 2 of 3: job 1250 failed (exit 1);"
        " after prepare, train\n"
        "-/+ replace   evaluate       spec changed: resources.gpus a100:2 -> a100:4"
        " (cancels job 1234)\n"
        "-/+ replace   serve          spec changed (cancels jobs 1240, 1241)\n"
        "                               resources.gpus a100:2 -> a100:4\n"
        "                               env.SEED (unset) -> 7\n"
        "  - cancel    old-run        run left the repo (cancels job 1200)\n"
        "  = adopt     sweep-3        tagged job 1300 not in the journal\n"
        "  ! blocked   report         upstream evaluate failed\n"
        "    no-op     data           current (job 1100 succeeded)\n"
        "\n"
        "Plan: 3 to submit, 2 to replace, 1 to cancel.\n"
    )


def test_compact_text_counts_the_runs_it_hides() -> None:
    plan = plan_of(
        Action(kind=ActionKind.SUBMIT, cause=Cause.NEVER_RUN, target="train", reason="not yet run"),
        noop("data"),
        noop("prepare"),
    )
    assert as_text(plan, show_noop=False) == (
        "recon plan for project cartpole at commit c0ffee (scheduler: slurm)\n"
        "\n"
        "  + submit    train          not yet run\n"
        "2 runs unchanged.\n"
        "\n"
        "Plan: 1 to submit, 0 to replace, 0 to cancel.\n"
    )
    assert "no-op" in as_text(plan)
    assert "unchanged" not in as_text(plan)
    assert "unchanged" not in as_text(plan_of(*plan.actions[:1]), show_noop=False)


def test_long_target_names_widen_the_column_for_every_line() -> None:
    plan = plan_of(
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="a-rather-long-run-name",
            reason="not yet run",
        ),
        noop("data"),
    )
    lines = as_text(plan).splitlines()
    assert lines[2] == "  + submit    a-rather-long-run-name  not yet run"
    assert lines[3] == "    no-op     data                    current"


def test_newlines_in_reasons_and_values_stay_on_their_line() -> None:
    command = FieldChange(field="command", old="python a.py", new="set -e\npython b.py")
    plan = plan_of(
        Action(
            kind=ActionKind.REPLACE,
            cause=Cause.SPEC_CHANGED,
            target="train",
            reason="spec changed",
            changes=(command,),
        ),
        Action(
            kind=ActionKind.BLOCKED,
            cause=Cause.UPSTREAM_FAILED,
            target="eval",
            reason="upstream failed:\nexit 3",
        ),
    )
    lines = as_text(plan).splitlines()
    assert lines[2] == (
        "-/+ replace   train          spec changed: command python a.py -> set -e\\npython b.py"
    )
    assert lines[3] == "  ! blocked   eval           upstream failed:\\nexit 3"


@pytest.mark.parametrize(
    ("plan", "line"),
    [
        (plan_of(noop("data")), "No changes. The cluster matches the specs."),
        (plan_of(), "No changes. The cluster matches the specs."),
        (plan_of(noop("data"), complete=False), "No changes to the cluster."),
        (
            plan_of(
                noop("data"),
                Action(
                    kind=ActionKind.ADOPT,
                    cause=Cause.ADOPT,
                    target="a",
                    reason="tagged job 1 not journaled",
                ),
            ),
            "No changes to the cluster; 1 job to adopt into the journal.",
        ),
        (
            plan_of(
                Action(kind=ActionKind.ADOPT, cause=Cause.ADOPT, target="a", reason="tagged"),
                Action(kind=ActionKind.ADOPT, cause=Cause.ADOPT, target="b", reason="tagged"),
                Action(
                    kind=ActionKind.BLOCKED,
                    cause=Cause.UPSTREAM_FAILED,
                    target="c",
                    reason="upstream a failed",
                ),
            ),
            "No changes to the cluster; 2 jobs to adopt into the journal, 1 run blocked.",
        ),
        (
            plan_of(
                noop("data"),
                Action(
                    kind=ActionKind.NOOP,
                    cause=Cause.CURRENT,
                    target="a",
                    reason="failed",
                    outcome="failed",
                ),
                Action(
                    kind=ActionKind.BLOCKED,
                    cause=Cause.UPSTREAM_FAILED,
                    target="b",
                    reason="upstream a failed",
                ),
            ),
            "No changes to the cluster; 1 run failed with no retries left, 1 run blocked.",
        ),
    ],
)
def test_summary_when_nothing_changes_the_cluster(plan: Plan, line: str) -> None:
    assert not plan.has_changes
    assert as_text(plan).splitlines()[-1] == line
    assert as_markdown(plan).splitlines()[-1] == f"**{line}**"


def blocked_allocation(name: str) -> Action:
    return Action(
        kind=ActionKind.BLOCKED,
        target=name,
        target_kind="alloc",
        reason="refused",
        cause=Cause.UNSUPPORTED,
    )


def on(scheduler: str, *actions: Action) -> Plan:
    return plan_of(*actions).model_copy(update={"scheduler": scheduler})


@pytest.mark.parametrize(
    ("plan", "line"),
    [
        (
            on("local", noop("data"), blocked_allocation("interactive")),
            "No changes to the cluster; allocation interactive skipped on the local backend, "
            "which holds none.",
        ),
        (
            on(
                "local",
                Action(
                    kind=ActionKind.SUBMIT,
                    target="data",
                    reason="not yet run",
                    cause=Cause.NEVER_RUN,
                ),
                blocked_allocation("a"),
                blocked_allocation("b"),
            ),
            "Plan: 1 to submit, 0 to replace, 0 to cancel. Allocations a and b skipped on the "
            "local backend, which holds none.",
        ),
        (
            on(
                "local",
                Action(
                    kind=ActionKind.BLOCKED,
                    target="c",
                    reason="upstream a failed",
                    cause=Cause.UPSTREAM_FAILED,
                ),
            ),
            "No changes to the cluster; 1 run blocked.",
        ),
        # On Slurm an allocation blocked is one refused (a container, the fit): an error.
        (
            on("slurm", noop("data"), blocked_allocation("interactive")),
            "No changes to the cluster; 1 allocation blocked.",
        ),
    ],
)
def test_an_allocation_on_the_local_backend_is_said_skipped(plan: Plan, line: str) -> None:
    assert as_text(plan).splitlines()[-1] == line


def test_header_names_the_work_tree_and_targets() -> None:
    plan = plan_of(commit=None).model_copy(update={"targets": ("train", "evaluate")})
    assert as_text(plan).splitlines()[0] == (
        "recon plan for project cartpole from the work tree (scheduler: slurm; targets: train, "
        "evaluate)"
    )


def test_an_incomplete_observation_without_notes_is_still_said() -> None:
    text = as_text(plan_of(noop("data"), complete=False))
    assert text.splitlines()[1] == "Observation incomplete."
    assert "Observation incomplete" not in as_text(plan_of(noop("data")))


def test_markdown_for_every_action_kind() -> None:
    assert as_markdown(EVERY_KIND) == (
        "### recon plan for project cartpole at commit 1a2b3c4d5e6f (scheduler: slurm)\n"
        "\n"
        "> Observation incomplete: sacct failed (slurmdbd down); "
        "no cancel, replace or prune in this plan.\n"
        "\n"
        "| | action | target | reason | changed fields |\n"
        "|---|---|---|---|---|\n"
        "| `+` | submit | `prepare` | not yet run |  |\n"
        "| `+` | submit | `train` | not yet run; after prepare |  |\n"
        "| `+` | retry | `tune` | attempt 2 of 3: job 1250 failed (exit 1); after prepare, train"
        " |  |\n"
        "| `-/+` | replace | `evaluate` | spec changed (cancels job 1234)"
        " | `resources.gpus`: `a100:2` → `a100:4` |\n"
        "| `-/+` | replace | `serve` | spec changed (cancels jobs 1240, 1241)"
        " | `resources.gpus`: `a100:2` → `a100:4`<br>`env.SEED`: `(unset)` → `7` |\n"
        "| `-` | cancel | `old-run` | run left the repo (cancels job 1200) |  |\n"
        "| `=` | adopt | `sweep-3` | tagged job 1300 not in the journal |  |\n"
        "| `!` | blocked | `report` | upstream evaluate failed |  |\n"
        "|  | no-op | `data` | current (job 1100 succeeded) |  |\n"
        "\n"
        "**Plan: 3 to submit, 2 to replace, 1 to cancel.**\n"
    )


def test_markdown_escapes_pipes_newlines_and_backticks_in_cells() -> None:
    change = FieldChange(field="command", old="cat a | sort", new="echo `date`\nrun")
    plan = plan_of(
        Action(
            kind=ActionKind.REPLACE,
            cause=Cause.SPEC_CHANGED,
            target="train",
            reason="spec changed | see\nlog",
            changes=(change,),
        )
    )
    row = as_markdown(plan).splitlines()[4]
    assert row == (
        "| `-/+` | replace | `train` | spec changed \\| see log"
        " | `command`: `cat a \\| sort` → ``echo `date` run`` |"
    )
    # Every cell boundary is an unescaped pipe: six of them for five cells.
    assert row.replace("\\|", "").count("|") == 6


def test_markdown_notes_are_separate_quote_paragraphs_and_compact_counts() -> None:
    plan = plan_of(noop("data"), noop("prepare"), complete=False).model_copy(
        update={"notes": ("sacct failed", "squeue was slow")}
    )
    assert as_markdown(plan, show_noop=False) == (
        "### recon plan for project cartpole at commit c0ffee (scheduler: slurm)\n"
        "\n"
        "> sacct failed\n"
        ">\n"
        "> squeue was slow\n"
        "\n"
        "2 runs unchanged.\n"
        "\n"
        "**No changes to the cluster.**\n"
    )


def test_json_reads_back_as_the_same_plan() -> None:
    document = json.loads(as_json(EVERY_KIND))
    summary = document.pop("summary")
    assert Plan.model_validate_json(json.dumps(document)) == EVERY_KIND
    assert summary == {
        "submit": 2,
        "retry": 1,
        "requeue": 0,
        "replace": 2,
        "may rerun": 0,
        "cancel": 1,
        "teardown": 0,
        "adopt": 1,
        "reuse": 0,
        "setup": 0,
        "blocked": 1,
        "no-op": 1,
        "moved": 0,
        "has_changes": True,
        "held": False,
    }


def test_json_keeps_noop_actions_and_reports_no_changes() -> None:
    document = json.loads(as_json(plan_of(noop("data")), show_noop=False))
    assert [a["kind"] for a in document["actions"]] == ["no-op"]
    assert document["summary"]["has_changes"] is False


@pytest.mark.parametrize("name", ["text", "markdown", "json"])
def test_renderers_take_the_same_arguments_and_add_no_colour(name: str) -> None:
    output = RENDERERS[name](EVERY_KIND, show_noop=False)
    assert output.endswith("\n")
    assert "\x1b" not in output
