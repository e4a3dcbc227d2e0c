"""The command outputs docs/cli.md shows are the ones recon prints.

Every `console` block of docs/cli.md is either reproduced here (the commands run on a
copy of the example project with `scheduler: local`, as the page says, and their output
compared after replacing commit ids) or listed in NOT_REPRODUCED with the reason, so a
new block cannot be added without one or the other.
"""

from __future__ import annotations

import re
import shutil
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
COMMIT = re.compile(r"\b[0-9a-f]{12}\b")
CLOCK = re.compile(r"\b\d\d:\d\d\b")  # a job's end, shown as the time of day


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
    ("rm runs/train/model/policy.json", 0): "a shell command, not recon",
    ("rm runs/prepare/data/episodes.csv", 0): "a shell command, not recon",
    ("git log --oneline", 0): "a shell command, not recon",
    ("recon plan", 1): "needs jobs that ran (job ids and times)",
    ("recon plan", 2): "needs jobs that ran (job ids and times)",
    ("recon apply --auto-approve", 0): "needs jobs that ran (job ids and times)",
    ("recon apply --auto-approve", 1): "job ids and times of a real apply",
    ("recon apply --auto-approve --wait", 0): "job ids and times of a real apply",
    ("recon apply --auto-approve --wait", 1): "job ids and times of a real apply",
    ("recon apply eval.plan --auto-approve", 0): "job ids and times of a real apply",
    ("recon plan evaluate --out eval.plan", 0): "needs jobs that ran and spec edits",
    ("recon plan --against HEAD~1", 0): "needs the doc's second commit",
    ("recon plan --against HEAD~1 --format markdown", 0): "needs the doc's second commit",
    ("recon plan --against HEAD~1 --format json", 0): "needs the doc's second commit",
    ("recon plan --against HEAD~1 --detailed-exitcode", 0): "needs the doc's second commit",
    ("recon status --format json", 0): "needs jobs that ran (job ids and times)",
    ("recon watch . --branch main --interval 5s", 0): "runs until interrupted; times",
    ("recon export ro-crate", 0): "needs runs that succeeded",
    ("recon dev-cluster status", 0): "process ids of the dev cluster's daemons",
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

# Steps to take before a command: files to write (uncommitted; None: remove one), or a
# recon command to run first (its output is not compared).
Steps = dict[str, str | None] | list[str]
# The commands to run for each reproduced block, in the doc's order, with the steps before
# them and the exit code the doc says or implies.
REPRODUCED: list[tuple[tuple[str, int], Steps, int]] = [
    (("recon version", 0), {}, 0),
    (("recon validate", 0), {}, 0),
    (("recon validate --worktree", 0), {"specs/sweep.yaml": SWEEP_WITH_FOUR_PROBLEMS}, 1),
    (("recon validate --worktree", 1), {"specs/sweep.yaml": SWEEP_WITH_A_BAD_TOKEN}, 1),
    (("recon validate --worktree", 2), {"specs/sweep.yaml": SWEEP_WITH_A_BAD_INPUT}, 1),
    (("recon plan", 0), {"specs/sweep.yaml": None}, 0),  # the plans show no sweep
    (("recon plan train", 0), {}, 0),
    (("recon plan prepare --downstream", 0), {}, 0),
    (("recon plan nosuch", 0), {}, 1),
    (("recon plan --format markdown", 0), {}, 0),
    (("recon status", 0), ["apply", "--auto-approve", "--wait"], 0),
    (("recon schema", 0), {}, 0),
]
# What the doc did between the apply and `recon status`.
BEFORE_STATUS = "runs/train/model/policy.json"


def normalised(text: str) -> str:
    return CLOCK.sub("<time>", COMMIT.sub("<commit>", text)).strip("\n")


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
    reproduced = {key for key, _, _ in REPRODUCED}
    assert shown == reproduced | set(NOT_REPRODUCED)
    assert not reproduced & set(NOT_REPRODUCED)


def test_shown_outputs_are_what_recon_prints(
    example: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    shown = {
        (command, index): item for command, index, item in occurrences(shown_commands(CLI_DOC))
    }
    for key, steps, code in REPRODUCED:
        if isinstance(steps, list):
            ran = recon(capsys, *steps)
            assert ran.code == 0, ran
            (example / BEFORE_STATUS).unlink()
        else:
            for name, text in steps.items():
                if text is None:
                    (example / name).unlink()
                else:
                    (example / name).write_text(text)
        command, _ = key
        result = recon(capsys, *command.split()[1:])
        item = shown[key]
        assert result.code == code, f"docs/cli.md:{item.line}: {command}\n{result.err}"
        assert normalised(result.out + result.err) == normalised(item.output), (
            f"docs/cli.md:{item.line}: `{command}` prints something else"
        )
