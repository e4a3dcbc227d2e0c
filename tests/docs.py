"""What the doc tests share: the fenced blocks of README.md and docs/*.md, the commands a
console block shows, how a shown output is compared with a printed one (and what is
masked), and the example project the docs' stories run on.

Every fenced block is either checked by a test or listed with the reason it is not an
output of recon: tests/unit/test_doc_blocks.py holds that inventory.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.gitrepo import GitRepo

ROOT = Path(__file__).resolve().parents[1]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
EXAMPLE = ROOT / "examples" / "repo"
# A fence may be indented (a block inside a list item): its body is taken dedented.
FENCE = re.compile(
    r"^(?P<indent>[ ]*)```(?P<lang>[\w-]*)\n(?P<body>.*?)^(?P=indent)```$",
    re.MULTILINE | re.DOTALL,
)
COMMIT = re.compile(r"\b(?:[0-9a-f]{40}|[0-9a-f]{12})\b")
CLOCK = re.compile(r"\b\d\d:\d\d\b")  # a job's end, shown as the time of day
TIMESTAMP = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:Z|[+-]\d\d:\d\d)?")
# GPU-hours and CPU-hours (`recon cost`, a plan's expected cost): jobs' times vary run to run
HOURS = re.compile(r"\b\d+\.\d{3}(?= (?:GPU|CPU)-h\b)")
# specs/sweep.yaml as the validate section of docs/cli.md has it: four problems, then a misspelt
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

# The commit "train on two GPUs; evaluate gets 2GiB" (and a reworded description) of
# docs/cli.md's --against section, which its plans on a Slurm state are made at too.
PIPELINE = (EXAMPLE / "specs" / "pipeline.yaml").read_text()
assert PIPELINE.endswith("resources:\n  cpus: 1\n")  # evaluate's, the file's last lines
TWO_GPUS = (
    PIPELINE.replace("  gpus: a100:1\n", "  gpus: a100:2\n").replace(
        "description: Score the trained policy.", "description: Score the policy."
    )
    + "  memory: 2GiB\n"
)
# The folder the docs' outputs were taken in.
DOC_FOLDER = "/home/ana/cartpole"


@dataclass(frozen=True)
class Fence:
    """One fenced block of a page."""

    file: str  # relative to the repository, as README.md or docs/cli.md
    line: int  # of the opening fence
    lang: str
    body: str  # without the fence's indentation
    preceded_by: str  # the last line before the fence that is not empty, stripped

    @property
    def where(self) -> str:
        return f"{self.file}:{self.line}"

    @property
    def key(self) -> str:
        """`file: first line` (its first 60 characters): how the inventory names the
        block, since line numbers drift."""
        first = next((line.strip() for line in self.body.splitlines() if line.strip()), "")
        return f"{self.file}: {first[:60].rstrip()}"


def fences(path: Path) -> list[Fence]:
    text = path.read_text()
    return [
        Fence(
            str(path.relative_to(ROOT)),
            text[: match.start()].count("\n") + 1,
            match.group("lang"),
            _unindented(match.group("body"), len(match.group("indent"))),
            text[: match.start()].rstrip("\n").rsplit("\n", 1)[-1].strip(),
        )
        for match in FENCE.finditer(text)
    ]


def _unindented(body: str, indent: int) -> str:
    """The body of a fence indented by ``indent`` spaces, as if it were not indented."""
    return "".join(
        line[indent:] if line.startswith(" " * indent) else line.lstrip(" ")
        for line in body.splitlines(keepends=True)
    )


def all_fences() -> list[Fence]:
    return [fence for path in DOCS for fence in fences(path)]


def keyed(found: list[Fence]) -> dict[str, Fence]:
    """Each block by its key; a key shown again gets ` #2`, ` #3` ..."""
    out: dict[str, Fence] = {}
    for fence in found:
        key, number = fence.key, 1
        while key in out:
            number += 1
            key = f"{fence.key} #{number}"
        out[key] = fence
    return out


def shown_block(key: str) -> Fence:
    """The block the inventory names ``key``; a test that checks it fetches it here, so a
    block that changed its first line fails the test, not only the inventory."""
    found = keyed(all_fences())
    assert key in found, f"no block {key!r} in the docs"
    return found[key]


@dataclass(frozen=True)
class Shown:
    """One command of a console block and the output shown under it."""

    command: str  # as typed after `$ `, comment removed
    output: str
    line: int


def shown_commands(path: Path) -> list[Shown]:
    return [shown for fence in fences(path) if fence.lang == "console" for shown in typed(fence)]


def typed(fence: Fence) -> list[Shown]:
    """The commands of one console block, each with the output shown under it."""
    found = []
    command: str | None = None
    output: list[str] = []
    start = fence.line + 1
    for number, line in enumerate(fence.body.splitlines(), fence.line + 1):
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


def shown_by_command(path: Path) -> dict[tuple[str, int], Shown]:
    return {(command, index): item for command, index, item in occurrences(shown_commands(path))}


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
    return HOURS.sub("<hours>", CLOCK.sub("<time>", masked)).strip("\n")


JOB_ID = re.compile(r"\b(job |slurm-)\d+\b")
PASS = re.compile(r"\bpass \d+\b")
PROGRESS = re.compile(r"^\[\d\d:\d\d\] pass \d+: .*$")


def wait_output(text: str, root: Path) -> str:
    """An `apply --wait` output as the doc shows it: job ids masked, the project's
    folder as the doc's, and the progress lines of passes before the last one left out
    (the last one, which says how the wait ended, is kept)."""
    lines = JOB_ID.sub(r"\1N", text.replace(str(root), DOC_FOLDER)).split("\n")
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


# A watch's log lines as the doc shows them: with times and commits (normalised), job ids
# and durations masked, and the project's folder the doc's.
WATCH_MASKS = (
    (re.compile(r"\bjob_id=\d+"), "job_id=N"),
    (re.compile(r"\bseconds=[0-9.]+"), "seconds=S"),
)
# A timer pass: how many of them find nothing to do depends on how fast jobs run.
IDLE_PASS = re.compile(r"^<timestamp> INFO    pass commit=<commit> trigger=timer counts=\S+ ")


def watch_lines(text: str, root: Path) -> list[str]:
    text = normalised(text.replace(str(root), DOC_FOLDER))
    for pattern, mask in WATCH_MASKS:
        text = pattern.sub(mask, text)
    return [line for line in text.split("\n") if line]


def idle_pass(line: str) -> bool:
    """A watch's timer pass that did nothing (a line as `watch_lines` gives it)."""
    return IDLE_PASS.match(line) is not None and "submitted=" not in line


def in_order(printed: list[str], shown: list[str], extra: Callable[[str], bool]) -> str | None:
    """What is wrong with ``printed`` as the doc shows it: the doc's lines must appear in
    order, and the only other lines allowed are ``extra``'s (timer passes, whose number
    depends on how fast jobs run). None when it is right."""
    position = 0
    for line in printed:
        if position < len(shown) and line == shown[position]:
            position += 1
        elif not extra(line):
            return f"printed a line the doc does not show:\n{line}\n\nall of it:\n" + "\n".join(
                printed
            )
    if position < len(shown):
        return f"did not print\n{shown[position]}\n\nit printed:\n" + "\n".join(printed)
    return None


class Watched:
    """A `recon watch` started in ``root`` (this checkout's recon), whose log is read a
    line at a time; every line read is kept in ``lines``."""

    def __init__(self, root: Path, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "watch", *args],
            cwd=root,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []

    def __enter__(self) -> Watched:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate()

    def next_line(self) -> str:
        """The next line it logs; "" once it has ended. A watch logs at least every
        interval, so this does not wait longer than one."""
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        self.lines.append(line)
        return line

    def until(self, wanted: Callable[[str], bool], timeout: float = 120) -> str:
        """Read until a line ``wanted`` takes; that line."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.next_line()
            assert line, "the watch ended:\n" + "".join(self.lines)
            if wanted(line):
                return line
        raise AssertionError(f"not within {timeout} s:\n" + "".join(self.lines))

    def stop(self) -> int:
        """Ctrl-C, then the rest of its log; its exit code."""
        self.process.send_signal(signal.SIGINT)
        rest, _ = self.process.communicate(timeout=60)
        self.lines.append(rest)
        return self.process.returncode


def copy_example(root: Path) -> Path:
    """examples/repo at ``root``, in a git repository of its own: its `scheduler: local`
    is the one the docs' stories ran on."""
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    assert "\nscheduler: local " in (root / "recon.yaml").read_text()
    GitRepo(root).commit(message="example")
    return root


@pytest.fixture
def example(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = copy_example(tmp_path / "cartpole")
    monkeypatch.chdir(root)
    monkeypatch.delenv("RECON_SCHEDULER", raising=False)
    monkeypatch.setenv("COLUMNS", "80")  # the width the doc's outputs were taken at
    monkeypatch.setenv("LC_ALL", "C.UTF-8")
    return root
