"""The command outputs docs/cli.md shows are the ones recon prints.

Every `console` block of docs/cli.md is either reproduced here (the commands run on a
copy of the example project with `scheduler: local`, as the page says, and their output
compared after replacing commit ids) or listed in NOT_REPRODUCED with the reason, so a
new block cannot be added without one or the other.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli import recon
from tests.gitrepo import GitRepo

ROOT = Path(__file__).resolve().parents[2]
CLI_DOC = ROOT / "docs" / "cli.md"
EXAMPLE = ROOT / "examples" / "repo"
CONSOLE = re.compile(r"^```console\n(?P<body>.*?)^```$", re.MULTILINE | re.DOTALL)
COMMIT = re.compile(r"\b(?:[0-9a-f]{40}|[0-9a-f]{12})\b")
CLOCK = re.compile(r"\b\d\d:\d\d\b")  # a job's end, shown as the time of day
TIMESTAMP = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")


@dataclass(frozen=True)
class Shown:
    """One command of a console block and the output shown under it."""

    command: str  # as typed after `$ `, comment removed
    output: str
    line: int


def shown_commands(path: Path) -> list[Shown]:
    text = path.read_text()
    found = []
    for block in CONSOLE.finditer(text):
        first_line = text[: block.start()].count("\n") + 2
        command: str | None = None
        output: list[str] = []
        start = first_line
        for number, line in enumerate(block.group("body").splitlines(), first_line):
            if line.startswith("$ "):
                if command is not None:
                    found.append(Shown(command, "\n".join(output), start))
                command, output, start = line[2:].split("  #")[0].strip(), [], number
            else:
                output.append(line)
        if command is not None:
            found.append(Shown(command, "\n".join(output), start))
    return found


def occurrences(shown: list[Shown]) -> Iterator[tuple[str, int, Shown]]:
    """Each shown command with how many times the same command was shown before it."""
    seen: dict[str, int] = {}
    for item in shown:
        index = seen.get(item.command, 0)
        seen[item.command] = index + 1
        yield item.command, index, item


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

# specs/sweep.yaml as the validate section has it: four problems, then a misspelt
# template token, then an input naming an output train does not declare. Fixes keep
# the line numbers, as they do in the doc.
SWEEP_WITH_FOUR_PROBLEMS = """\
kind: Run
name: sweep-lr-0.1
command: python3 scripts/sweep.py --policy {inputs.policy.path} --out {output.report.path}
outputs:
  report: report.json
resources:
  memory: 32G
  sbatch_extra: [--partition=gpu]
retry: 2
inputs:
  policy: train.weights
"""
SWEEP_WITH_A_BAD_TOKEN = (
    SWEEP_WITH_FOUR_PROBLEMS.replace("sweep-lr-0.1", "sweep-lr-01")
    .replace("32G\n", "32GiB\n")
    .replace("sbatch_extra: [--partition=gpu]", "partition: gpu")
    .replace("retry:", "retries:")
)
SWEEP_WITH_A_BAD_INPUT = SWEEP_WITH_A_BAD_TOKEN.replace("{output.", "{outputs.")

# The commits of the --against section: "train on two GPUs; evaluate gets 2GiB" (and a
# reworded description), then one that only respells values, raises retries, sets
# update: replace, adds a label and a comment.
PIPELINE = (EXAMPLE / "specs" / "pipeline.yaml").read_text()
assert PIPELINE.endswith("resources:\n  cpus: 1\n")  # evaluate's, the file's last lines
TWO_GPUS = (
    PIPELINE.replace("  gpus: a100:1\n", "  gpus: a100:2\n").replace(
        "description: Score the trained policy.", "description: Score the policy."
    )
    + "  memory: 2GiB\n"
)
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
    (("recon plan", 0), [remove("specs/sweep.yaml")], 0),  # the plans show no sweep
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
    (("recon plan", 2), [succeeded("prepare")], 0),
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
    elif kind == "recon":
        ran = recon(capsys, *args)
        assert ran.code == 0, ran
    else:
        deadline = time.monotonic() + 60
        while _health(capsys, args[0]) != "succeeded":
            assert time.monotonic() < deadline, f"{args[0]} did not succeed"
            time.sleep(0.2)


def _health(capsys: pytest.CaptureFixture[str], run: str) -> str | None:
    rows = json.loads(recon(capsys, "status", run, "--format", "json").out)
    return next(row["health"] for row in rows if row["name"] == run)


def matches(output: str, shown: str) -> bool:
    """The output is the one shown, commit ids and times aside; a line `...` in the doc
    (indented or not) stands for any lines: the doc leaves out what it already showed."""
    pattern = "".join(
        "(?:.*\n)*" if line.strip() == "..." else re.escape(line) + "\n"
        for line in normalised(shown).split("\n")
    )
    return re.fullmatch(pattern, normalised(output) + "\n") is not None


def normalised(text: str) -> str:
    masked = TIMESTAMP.sub("<timestamp>", COMMIT.sub("<commit>", text))
    return CLOCK.sub("<time>", masked).strip("\n")


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "cartpole"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    text = (root / "recon.yaml").read_text().replace("scheduler: auto", "scheduler: local")
    (root / "recon.yaml").write_text(text)
    GitRepo(root).commit(message="example")
    monkeypatch.chdir(root)
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # the width the doc's outputs were taken at
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    return root


def test_every_shown_command_is_reproduced_or_says_why_not() -> None:
    shown = {(command, index) for command, index, _ in occurrences(shown_commands(CLI_DOC))}
    reproduced = {key for key, _, _ in REPRODUCED} | {FIRST_WAIT, SECOND_WAIT, WATCHED}
    assert shown == reproduced | set(NOT_REPRODUCED)
    assert not reproduced & set(NOT_REPRODUCED)


def test_shown_outputs_are_what_recon_prints(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = {
        (command, index): item for command, index, item in occurrences(shown_commands(CLI_DOC))
    }
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
PASS = re.compile(r"\bpass \d+\b")


def test_the_first_apply_wait_prints_what_the_doc_shows(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = {
        (command, index): item for command, index, item in occurrences(shown_commands(CLI_DOC))
    }
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
JOB_ID = re.compile(r"\b(job |slurm-)\d+\b")
PROGRESS = re.compile(r"^\[\d\d:\d\d\] pass \d+: .*$")


def wait_output(text: str, root: Path) -> str:
    """An `apply --wait` output as the doc shows it: job ids masked, the project's
    folder as the doc's, and the progress lines of passes before the last one left out
    (the last one, which says how the wait ended, is kept)."""
    lines = JOB_ID.sub(r"\1N", text.replace(str(root), "/home/ana/cartpole")).split("\n")
    progress = [number for number, line in enumerate(lines) if PROGRESS.match(line)]
    last = progress[-1] if progress else -1
    kept = [
        PASS.sub("pass N", line)
        for number, line in enumerate(lines)
        if number == last or not PROGRESS.match(line)
    ]
    # A pass that resubmits prints what it did under its progress line; without the
    # progress lines the order of those is the order of the passes, which is kept.
    return "\n".join(kept)


def test_the_second_apply_wait_prints_what_the_doc_shows(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = {
        (command, index): item for command, index, item in occurrences(shown_commands(CLI_DOC))
    }[SECOND_WAIT]
    first = recon(capsys, "apply", "--auto-approve", "--wait")
    assert first.code == 0, first.err
    GitRepo(example).commit({"specs/publish.yaml": SUMMARIZE_AND_PUBLISH}, message="publish")

    second = recon(capsys, "apply", "--auto-approve", "--wait")

    assert second.code == 1, second.err
    assert matches(
        wait_output(second.out + second.err, example), wait_output(item.output, Path("/none"))
    ), f"docs/cli.md:{item.line}: `{item.command}` prints\n{second.out}{second.err}"
    # What the prose under the block says: the failed publish job was an attempt; once
    # summarize is fixed, summarize reruns and publish stays failed until it may retry.
    GitRepo(example).commit({"specs/publish.yaml": SUMMARIZE_FIXED}, message="fix summarize")
    third = recon(capsys, "apply", "--auto-approve", "--wait")
    assert third.code == 1, third.err
    assert re.search(
        r"^failed publish: failed: job \d+ failed \(exit 1\); no retries left \(retries: 0\)\.",
        third.err,
        re.MULTILINE,
    ), third.err
    assert "submitted summarize" in third.out


# The `recon watch` of the doc, on a project of its own whose runs are current: a commit
# that changes `prepare` lands during the first interval. Times, commits, job ids and
# durations are masked; how many timer passes find nothing to do while `prepare` runs
# depends on how fast it runs, so the doc's lines must appear in order and the only
# other lines allowed are such passes.
WATCHED = ("recon watch . --branch main --interval 5s", 0)
WATCH_MASKS = (
    (re.compile(r"\bjob_id=\d+"), "job_id=N"),
    (re.compile(r"\bseconds=[0-9.]+"), "seconds=S"),
)
IDLE_PASS = re.compile(r"^<timestamp> INFO    pass commit=<commit> trigger=timer counts=\S+ ")


def watch_lines(text: str, root: Path) -> list[str]:
    text = normalised(text.replace(str(root), "/home/ana/cartpole"))
    for pattern, mask in WATCH_MASKS:
        text = pattern.sub(mask, text)
    return [line for line in text.split("\n") if line]


def test_the_watch_prints_what_the_doc_shows(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    item = {
        (command, index): item for command, index, item in occurrences(shown_commands(CLI_DOC))
    }[WATCHED]
    assert recon(capsys, "apply", "--auto-approve", "--wait").code == 0
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    watch = subprocess.Popen(
        [sys.executable, "-m", "reconciler", *WATCHED[0].split()[1:]],
        cwd=example,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: list[str] = []
    try:
        assert watch.stdout is not None
        lines.append(watch.stdout.readline())  # started
        lines.append(watch.stdout.readline())  # the first pass: nothing to do
        prepare = (example / "specs" / "pipeline.yaml").read_text()
        GitRepo(example).commit(
            {"specs/pipeline.yaml": prepare.replace("--episodes 200", "--episodes 300")},
            message="more episodes",
        )
        deadline = time.monotonic() + 120
        # Until a timer pass after the downstream's submission finds nothing to do.
        while time.monotonic() < deadline:
            line = watch.stdout.readline()
            if not line:
                break  # it ended: the comparison below says what it printed
            lines.append(line)
            submitted_downstream = any("run=evaluate" in line for line in lines)
            last = watch_lines(line, example)
            idle = bool(last) and IDLE_PASS.match(last[0]) and "submitted=" not in line
            if submitted_downstream and idle:
                break
        watch.send_signal(signal.SIGINT)
        rest, _ = watch.communicate(timeout=60)
        lines.append(rest)
    finally:
        if watch.poll() is None:
            watch.kill()
            watch.wait()
    assert watch.returncode == 0, lines

    printed = watch_lines("".join(lines), example)
    shown = watch_lines(item.output, Path("/none"))
    position = 0
    for line in printed:
        if position < len(shown) and line == shown[position]:
            position += 1
        else:
            assert IDLE_PASS.match(line) and "submitted=" not in line, (
                f"docs/cli.md:{item.line}: `{item.command}` printed a line the doc does "
                f"not show:\n{line}\n\nall of it:\n" + "\n".join(printed)
            )
    assert position == len(shown), (
        f"docs/cli.md:{item.line}: `{item.command}` did not print\n{shown[position]}\n\n"
        "it printed:\n" + "\n".join(printed)
    )
