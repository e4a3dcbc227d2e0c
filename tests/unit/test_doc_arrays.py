"""docs/arrays.md shows Slurm's own output for job arrays: each block is read here with
recon's parsers, and must say what the page says it says."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

from reconciler.scheduler.local.environment import array_environment
from reconciler.scheduler.local.scheduler import MAX_ARRAY_SIZE
from reconciler.scheduler.slurm.combine import combine
from reconciler.scheduler.slurm.parse import parse_max_array_size, parse_sacct, parse_squeue

DOC = Path(__file__).resolve().parents[2] / "docs" / "arrays.md"
MARKED = re.compile(r"^<!-- doc-test: (?P<name>[\w ]+) -->\n(?P<body>.*?)(?:\n\n|\Z)", re.M | re.S)
FENCED = re.compile(r"^```\w*\n(?P<text>.*?)^```$", re.M | re.S)


def shown() -> dict[str, str]:
    """Each marked block's text, fences taken off, by its mark."""
    blocks = {}
    for match in MARKED.finditer(DOC.read_text()):
        fenced = FENCED.match(match["body"] + "\n")
        blocks[match["name"]] = fenced["text"] if fenced else match["body"] + "\n"
    return blocks


def test_every_marked_block_is_checked_here() -> None:
    assert set(shown()) == {"scontrol", "task environment", "squeue", "sacct", "tasks"}


def test_max_array_size_reads_as_its_default_and_the_local_backend_matches() -> None:
    assert parse_max_array_size(shown()["scontrol"]) == 1001 == MAX_ARRAY_SIZE


def test_the_local_backend_sets_the_array_variables_slurm_set() -> None:
    printed = dict(line.split("=", 1) for line in shown()["task environment"].splitlines())
    arrays = {key: value for key, value in printed.items() if key.startswith("SLURM_ARRAY_")}
    assert arrays == array_environment("14782", 2, (0, 2, 5))


def test_the_shown_pass_reads_as_the_table_says() -> None:
    blocks = shown()
    squeue, sacct = parse_squeue(blocks["squeue"], UTC), parse_sacct(blocks["sacct"], UTC)
    assert (squeue.rejected, sacct.rejected) == ((), ())
    observation = combine(squeue, sacct, datetime(2026, 12, 1, 17, 34, 27, tzinfo=UTC))
    (job,) = observation.jobs
    assert (job.job_id, observation.complete) == ("14769", True)
    read = [
        (task.job_id, str(task.components[0].state), task.components[0].exit_code)
        for task in job.tasks().values()
    ]
    table = [
        [cell.strip() for cell in line.strip("|").split("|")]
        for line in blocks["tasks"].splitlines()[2:]
    ]
    assert read == [(task, state, int(code) if code else None) for task, state, code in table]
