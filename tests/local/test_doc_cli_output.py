"""The command outputs docs/cli.md shows are the ones recon prints.

Every `console` block of docs/cli.md is either reproduced here (the commands run on a
copy of the example project with `scheduler: local`, as the page says, and their output
compared after replacing commit ids) or listed in NOT_REPRODUCED with the reason, so a
new block cannot be added without one or the other.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

from tests.cli import recon
from tests.docs import (
    PASS,
    ROOT,
    SWEEP_WITH_A_BAD_INPUT,
    SWEEP_WITH_A_BAD_TOKEN,
    SWEEP_WITH_FOUR_PROBLEMS,
    TWO_GPUS,
    Watched,
    idle_pass,
    in_order,
    matches,
    occurrences,
    shown_by_command,
    shown_commands,
    wait_output,
    watch_lines,
)
from tests.gitrepo import GitRepo

CLI_DOC = ROOT / "docs" / "cli.md"


# Commands whose output needs a state these tests do not build, and why.
NOT_REPRODUCED = {
    ("echo $?", 0): "the exit code of the command before it, checked with that command",
    ("echo $?", 1): "the exit code of the command before it, checked with that command",
    ("echo $?", 2): "the exit code of the command before it, checked with that command",
    ("rm runs/train/model/policy.json", 0): "a shell command, taken as a step",
    ("rm runs/prepare/data/episodes.csv", 0): "a shell command, taken as a step",
    ("git log --oneline", 0): "a shell command, not recon",
    ("recon dev-cluster status", 0): "needs the dev cluster: compared, process ids and node "
    "states masked, in tests/integration/test_devcluster.py",
}

# The --against section's commit after TWO_GPUS: it only respells values, raises retries,
# sets update: replace, adds a label and a comment.
RESPELLED = (
    TWO_GPUS.replace("  memory: 2GiB\n", "  memory: 2048MiB  # the same\n")
    .replace("a100:2", "A100:2")
    .replace('time: "00:20:00"', "time: 20m")
    .replace("retries: 1\n", "retries: 3\nupdate: replace\n")
    .replace("labels:\n  stage: data\n", "labels:\n  stage: data\n  owner: ana\n")
)

# What the doc did before a command, in the project folder: write (uncommitted) or
# remove files, or run recon (its output is not compared, its exit code must be 0).
Step = tuple[str, ...]


def write(name: str, text: str) -> Step:
    return ("write", name, text)


def remove(name: str) -> Step:
    return ("remove", name)


def run_recon(*args: str) -> Step:
    return ("recon", *args)


def commit(name: str, text: str) -> Step:
    return ("commit", name, text)


def edit(name: str, old: str, new: str) -> Step:
    return ("edit", name, old, new)  # replace `old` in the file with `new`, and commit


TYPO = ('"specs/**/*.yaml"', '"spec/**/*.yaml"')


def succeeded(run: str) -> Step:
    return ("succeeded", run)  # wait until the run's latest job has succeeded


# The commands to run for each reproduced block, with the steps before them and the exit
# code the doc says or implies; in the order of the doc's story, one project throughout.
REPRODUCED: list[tuple[tuple[str, int], list[Step], int]] = [
    (("recon version", 0), [], 0),
    (("recon validate", 0), [], 0),
    (("recon graph --offline", 0), [], 0),
    (("recon validate --worktree", 0), [write("specs/sweep.yaml", SWEEP_WITH_FOUR_PROBLEMS)], 1),
    (("recon validate --worktree", 1), [write("specs/sweep.yaml", SWEEP_WITH_A_BAD_TOKEN)], 1),
    (("recon validate --worktree", 2), [write("specs/sweep.yaml", SWEEP_WITH_A_BAD_INPUT)], 1),
    # The pattern misspelt in a commit, then put back.
    (("recon validate", 1), [remove("specs/sweep.yaml"), edit("recon.yaml", *TYPO)], 1),
    (("recon plan", 0), [edit("recon.yaml", *reversed(TYPO))], 0),  # the plans show no sweep
    (("recon plan train", 0), [], 0),
    (("recon plan prepare --downstream", 0), [], 0),
    (("recon plan nosuch", 0), [], 1),
    (("recon plan --format markdown", 0), [], 0),
    (("recon apply --auto-approve", 1), [], 0),  # the first apply: jobs 1 to 4
    (
        ("recon status", 0),
        [run_recon("apply", "--auto-approve", "--wait"), remove("runs/train/model/policy.json")],
        0,
    ),
    (("recon status --format json", 0), [], 0),
    (("recon status --format json --allocations", 0), [], 0),
    (("recon plan", 1), [], 0),
    (
        ("recon apply --auto-approve", 0),
        [run_recon("apply", "--auto-approve", "--wait"), remove("runs/prepare/data/episodes.csv")],
        0,
    ),
    (("recon plan", 2), [succeeded("compare"), succeeded("evaluate")], 0),
    (("recon export ro-crate", 0), [run_recon("apply", "--auto-approve", "--wait")], 0),
    (("recon plan --against HEAD~1", 0), [commit("specs/pipeline.yaml", TWO_GPUS)], 0),
    (("recon plan --against HEAD~1 --format markdown", 0), [], 0),
    (("recon plan --against HEAD~1 --format json", 0), [], 0),
    (("recon plan evaluate --out eval.plan", 0), [], 0),
    (
        ("recon plan --against HEAD~1 --detailed-exitcode", 0),
        [commit("specs/pipeline.yaml", RESPELLED)],
        0,
    ),
    (("recon apply eval.plan --auto-approve", 0), [], 1),  # stale: a commit since
    (("recon schema", 0), [], 0),
]


def take(step: Step, root: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kind, *args = step
    if kind == "write":
        (root / args[0]).write_text(args[1])
    elif kind == "remove":
        (root / args[0]).unlink()
    elif kind == "commit":
        GitRepo(root).commit({args[0]: args[1]}, message="doc step")  # git init: a no-op
    elif kind == "edit":
        text = (root / args[0]).read_text()
        assert args[1] in text, f"{args[0]} holds no {args[1]}"
        GitRepo(root).commit({args[0]: text.replace(args[1], args[2])}, message="doc step")
    elif kind == "recon":
        ran = recon(capsys, *args)
        assert ran.code == 0, ran
    else:
        deadline = time.monotonic() + 60
        while _health(capsys, args[0]) != "succeeded":
            assert time.monotonic() < deadline, f"{args[0]} did not succeed"
            time.sleep(0.2)


def _health(capsys: pytest.CaptureFixture[str], run: str) -> str | None:
    rows: list[dict[str, str | None]] = json.loads(
        recon(capsys, "status", run, "--format", "json").out
    )
    return next(row["health"] for row in rows if row["name"] == run)


def test_every_shown_command_is_reproduced_or_says_why_not() -> None:
    shown = {(command, index) for command, index, _ in occurrences(shown_commands(CLI_DOC))}
    reproduced = {key for key, _, _ in REPRODUCED} | {FIRST_WAIT, SECOND_WAIT, WATCHED}
    assert shown == reproduced | set(NOT_REPRODUCED)
    assert not reproduced & set(NOT_REPRODUCED)


def test_shown_outputs_are_what_recon_prints(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = shown_by_command(CLI_DOC)
    for key, steps, code in REPRODUCED:
        for step in steps:
            take(step, example, capsys)
        command, _ = key
        result = recon(capsys, *command.split("  #")[0].split()[1:])
        item = shown[key]
        assert result.code == code, f"docs/cli.md:{item.line}: {command}\n{result.err}"
        assert matches(result.out + result.err, item.output), (
            f"docs/cli.md:{item.line}: `{command}` prints\n{result.out}{result.err}"
        )


def test_an_elided_output_still_has_to_match() -> None:
    assert matches("a\nb\nc\nd", "a\n...\nd")
    assert matches("a\nd", "a\n...\nd")
    assert not matches("a\nb\nc", "a\n...\nd")
    assert not matches("job 12 at 0123456789ab", "job 13 at <commit>")


# The example's first `apply --wait`, on a project of its own (the story above applies
# first without --wait). Which pass ends the wait depends on how fast the jobs run, so
# the pass's number is masked; what each line says is not.
FIRST_WAIT = ("recon apply --auto-approve --wait", 0)


def test_the_first_apply_wait_prints_what_the_doc_shows(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = shown_by_command(CLI_DOC)
    item = shown[FIRST_WAIT]
    result = recon(capsys, "apply", "--auto-approve", "--wait")
    assert result.code == 0, result.err
    printed = PASS.sub("pass N", result.out + result.err)
    assert matches(printed, PASS.sub("pass N", item.output)), (
        f"docs/cli.md:{item.line}: `{item.command}` prints\n{result.out}{result.err}"
    )


MERMAID = re.compile(r"^```mermaid\n.*?^```$", re.MULTILINE | re.DOTALL)


def test_the_plan_diagram_is_the_one_the_doc_draws(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (drawn,) = MERMAID.findall(CLI_DOC.read_text())
    result = recon(capsys, "plan", "--format", "markdown")
    assert result.code == 0, result.err
    assert MERMAID.findall(result.out) == [drawn]


# The second `apply --wait` of the doc, on a project of its own: after a first wait, a
# commit adds `summarize` (it forgets its declared output) and `publish` (it reads it).
# Job ids and the project's folder differ from the doc's story, and how many passes
# report progress before the end depends on how fast the jobs run: those are masked,
# every other line is compared.
SECOND_WAIT = ("recon apply --auto-approve --wait", 1)
SUMMARIZE_AND_PUBLISH = """\
kind: Run
name: summarize
description: Summarise the metrics (forgets to write its output).
command: cat {inputs.metrics.path}
inputs:
  metrics: evaluate.metrics
outputs:
  summary: summary.txt
resources:
  cpus: 1
retries: 1
---
kind: Run
name: publish
description: Publish the summary.
command: cp {inputs.summary.path} {outputs.page.path}
inputs:
  summary: summarize.summary
outputs:
  page: page.txt
resources:
  cpus: 1
"""
SUMMARIZE_FIXED = SUMMARIZE_AND_PUBLISH.replace(
    "command: cat {inputs.metrics.path}",
    "command: cp {inputs.metrics.path} {outputs.summary.path}",
)


def test_the_second_apply_wait_prints_what_the_doc_shows(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = shown_by_command(CLI_DOC)[SECOND_WAIT]
    first = recon(capsys, "apply", "--auto-approve", "--wait")
    assert first.code == 0, first.err
    GitRepo(example).commit({"specs/publish.yaml": SUMMARIZE_AND_PUBLISH}, message="publish")

    second = recon(capsys, "apply", "--auto-approve", "--wait")

    assert second.code == 1, second.err
    assert matches(
        wait_output(second.out + second.err, example), wait_output(item.output, Path("/none"))
    ), f"docs/cli.md:{item.line}: `{item.command}` prints\n{second.out}{second.err}"
    # What the prose under the block says: the failed publish job was an attempt at the
    # input it read; once summarize is fixed, summarize reruns, and publish is tried again
    # by itself once the summary it reads is there.
    GitRepo(example).commit({"specs/publish.yaml": SUMMARIZE_FIXED}, message="fix summarize")
    third = recon(capsys, "apply", "--auto-approve", "--wait")
    assert third.code == 0, third.out + third.err
    assert "submitted summarize" in third.out
    assert re.search(r"^submitted publish: job \d+$", third.out, re.MULTILINE), third.out


# The `recon watch` of the doc, on a project of its own whose runs are current: a commit
# that changes `prepare` lands during the first interval. Times, commits, job ids and
# durations are masked; how many timer passes find nothing to do while `prepare` runs
# depends on how fast it runs, so the doc's lines must appear in order and the only
# other lines allowed are such passes.
WATCHED = ("recon watch . --branch main --interval 5s", 0)


def test_the_watch_prints_what_the_doc_shows(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = shown_by_command(CLI_DOC)[WATCHED]
    assert recon(capsys, "apply", "--auto-approve", "--wait").code == 0
    with Watched(example, *WATCHED[0].split()[2:]) as watch:
        watch.next_line()  # started
        watch.next_line()  # the first pass: nothing to do
        prepare = (example / "specs" / "pipeline.yaml").read_text()
        GitRepo(example).commit(
            {"specs/pipeline.yaml": prepare.replace("--episodes 200", "--episodes 300")},
            message="more episodes",
        )

        # Until a timer pass after the downstream's submission finds nothing to do.
        def idle_after_downstream(line: str) -> bool:
            submitted_downstream = any("run=evaluate" in seen for seen in watch.lines)
            return submitted_downstream and idle_pass(watch_lines(line, example)[0])

        watch.until(idle_after_downstream)
        assert watch.stop() == 0, watch.lines

    printed = watch_lines("".join(watch.lines), example)
    problem = in_order(printed, watch_lines(item.output, Path("/none")), idle_pass)
    assert problem is None, f"docs/cli.md:{item.line}: `{item.command}` {problem}"
