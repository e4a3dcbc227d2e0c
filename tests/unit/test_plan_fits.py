"""A plan that fits the terminal (issue 28, point 4): wrapped between words under the
column it continues, a long change on lines of its own, symbols coloured at a terminal,
a sweep's members in the order of their values."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from reconciler.engine.plan.actions import Action, ActionKind, FieldChange
from reconciler.engine.plan.causes import Cause
from reconciler.report.plan import as_markdown, as_text, styled
from reconciler.report.progress import live_view
from tests.cli import recon
from tests.gitrepo import GitRepo
from tests.unit.test_cli_messages import inside
from tests.unit.test_report_plan import EVERY_KIND, plan_of

UPSTREAMS = ("prepare-the-dataset", "tokenize-the-corpus", "fit-the-vocabulary", "embed")
SPECS = {
    **{
        f"specs/{name}.yaml": f"kind: Run\nname: {name}\ncommand: echo > {{outputs.o.path}}\n"
        "outputs:\n  o: o.txt\n"
        for name in UPSTREAMS
    },
    "specs/report.yaml": "kind: Run\nname: report\ncommand: echo done\ninputs:\n"
    + "".join(f"  {name.replace('-', '_')}: {name}.o\n" for name in UPSTREAMS),
}
PROJECT = "project: demo\nscheduler: local\ndefaults:\n  environment: {}\n"


@pytest.fixture
def project(repo: GitRepo, monkeypatch: pytest.MonkeyPatch) -> GitRepo:
    repo.commit({"recon.yaml": PROJECT, **SPECS})
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    return repo


def test_a_plan_at_80_columns_breaks_between_words_under_its_column(
    project: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "80")
    (project.root / "notes-to-self.txt").write_text("not committed\n")
    with inside(project.root):
        result = recon(capsys, "plan", "report")
    commit = project.git("rev-parse", "HEAD")[:12]
    assert result.code == 0, result.err
    assert result.err == (
        "note: uncommitted changes (notes-to-self.txt) are not in this plan, made from\n"
        f"  commit {commit}; --worktree plans the edits\n"
    )
    assert result.out == (
        f"recon plan for project demo at commit {commit} (scheduler: local; targets:\n"
        "  report)\n"
        "\n"
        "  + submit    embed                not yet run\n"
        "  + submit    fit-the-vocabulary   not yet run\n"
        "  + submit    prepare-the-dataset  not yet run\n"
        "  + submit    tokenize-the-corpus  not yet run\n"
        "  + submit    report               not yet run; after embed, fit-the-vocabulary,\n"
        "                                   prepare-the-dataset, tokenize-the-corpus\n"
        "\n"
        "Plan: 5 to submit, 0 to replace, 0 to cancel.\n"
    )
    assert max(len(line) for line in (result.out + result.err).splitlines()) <= 80


def test_piped_without_columns_every_line_stays_whole(
    project: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    with inside(project.root):
        result = recon(capsys, "plan", "report")
    assert (
        "  + submit    report               not yet run; after embed, fit-the-vocabulary, "
        "prepare-the-dataset, tokenize-the-corpus\n" in result.out
    )


COMMAND = FieldChange(
    field="command",
    old="python3 scripts/prepare.py --episodes 200 --out {outputs.dataset.path}",
    new="python3 scripts/prepare.py --episodes 100 --out {outputs.dataset.path}",
)


def test_a_change_too_long_for_its_line_goes_on_lines_of_its_own() -> None:
    plan = plan_of(
        Action(
            kind=ActionKind.SUBMIT,
            target="prepare",
            reason="spec changed",
            cause=Cause.SPEC_CHANGED,
            changes=(COMMAND,),
        ),
        Action(
            kind=ActionKind.SUBMIT,
            target="evaluate",
            reason="spec changed",
            cause=Cause.SPEC_CHANGED,
            after=("train",),
            changes=(FieldChange(field="resources.memory", old="1GiB", new="2GiB"),),
        ),
        Action(
            kind=ActionKind.SUBMIT,
            target="train",
            reason="spec changed",
            cause=Cause.SPEC_CHANGED,
            changes=(FieldChange(field="resources.gpus", old="a100:1", new="a100:2"),),
        ),
    )
    assert as_text(plan, width=80).split("\n")[2:-3] == [
        "  + submit    prepare        spec changed",
        "                               command python3 scripts/prepare.py --episodes 200",
        "                                 --out {outputs.dataset.path}",
        "                               -> python3 scripts/prepare.py --episodes 100",
        "                                  --out {outputs.dataset.path}",
        "  + submit    evaluate       spec changed; after train",
        "                               resources.memory 1GiB -> 2GiB",
        "  + submit    train          spec changed: resources.gpus a100:1 -> a100:2",
    ]
    # Without a width (piped, the web view, markdown) the change stays on its line.
    assert "spec changed: command python3" in as_text(plan)
    assert "spec changed: command python3" not in as_markdown(plan)  # a cell of its own


def test_action_symbols_are_coloured_as_status_colours_its_words() -> None:
    out = io.StringIO()
    Console(file=out, force_terminal=True, color_system="standard", width=200).print(
        styled(as_text(EVERY_KIND)), end=""
    )
    coloured = out.getvalue()
    assert "\x1b[32m  + submit\x1b[0m" in coloured  # green, as `succeeded`
    assert "\x1b[33m-/+ replace\x1b[0m" in coloured  # yellow, as `outdated`
    assert "\x1b[31m  - cancel\x1b[0m" in coloured  # red, as `failed`
    assert "\x1b[31m  ! blocked\x1b[0m" in coloured
    assert "    no-op     data" in coloured  # a no-op stays plain


def test_no_color_keeps_the_plan_plain(
    project: GitRepo, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("NO_COLOR", "1")
    with inside(project.root):
        result = recon(capsys, "plan")
    assert "\x1b" not in result.out + result.err
    assert "  + submit    report" in result.out


MEMBERS = tuple(
    Action(kind=ActionKind.SUBMIT, target=f"lg[i={i}]", reason="not yet run", cause=Cause.NEVER_RUN)
    for i in (10, 2, 1)
)


def test_a_sweeps_members_are_listed_by_value() -> None:
    plan = plan_of(*MEMBERS)
    assert [line.split()[2] for line in as_text(plan, members=True).split("\n")[3:6]] == [
        "lg[i=1]",
        "lg[i=2]",
        "lg[i=10]",
    ]


def test_the_live_view_of_a_wait_names_members_with_their_values() -> None:
    progress = _Progress(plan_of(*(a.model_copy(update={"outcome": "inflight"}) for a in MEMBERS)))
    out = io.StringIO()
    Console(file=out, width=80).print(live_view(progress))  # type: ignore[arg-type]
    assert out.getvalue().split("\n")[2:5] == [
        " lg[i=1]   in flight  not yet run ",
        " lg[i=2]   in flight  not yet run ",
        " lg[i=10]  in flight  not yet run ",
    ]


class _Progress:
    def __init__(self, plan: object) -> None:
        self.plan = plan
        self.runs = plan.actions  # type: ignore[attr-defined]
        self.elapsed, self.passes = 3.0, 1


def test_a_sweeps_line_says_its_job_once() -> None:
    left = tuple(
        Action(
            kind=ActionKind.CANCEL,
            target=f"lg[i={i}]",
            reason=f"member left the matrix of lg; its job {job} is running",
            cause=Cause.PRUNE,
            job_ids=(job,),
        )
        for i, job in ((3, "12_3"), (4, "12_[4-5]"), (6, "13+1"))
    )
    assert as_text(plan_of(*left)).split("\n")[2] == (
        "  - cancel    lg             3 members of a sweep no longer in the specs: member left "
        "the matrix of lg; its job is running"
    )
