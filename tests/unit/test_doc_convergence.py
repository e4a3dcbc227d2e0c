"""The README's "Continuous convergence" section: its table holds the four ways, every
command it shows parses with recon's own command line, the apply it says cron runs is
the one `recon cron install` writes, and what it names for CI is what the examples use
and what this repository holds."""

from __future__ import annotations

import re
from pathlib import Path

from reconciler.cron import Entry, Period, crontab_block
from tests.docs import ROOT
from tests.unit.test_ci_examples import GITHUB, GITLAB, load_yaml, parse, recon_commands

WAYS = ["watch", "cron", "scrontab", "PR check"]


def section() -> str:
    text = (ROOT / "README.md").read_text()
    return text.split("## Continuous convergence\n", 1)[1].split("\n## ", 1)[0]


def table() -> dict[str, list[str]]:
    """Each row of the section's table by its first cell."""
    rows = [line for line in section().splitlines() if line.startswith("| ")]
    header, *body = rows
    assert header.split("|")[1:-1] == [" Way ", " Set it up ", " Runs ", " Use it when "]
    cells = [[cell.strip() for cell in row.split("|")[1:-1]] for row in body]
    return {row[0]: row[1:] for row in cells}


def spans(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def test_the_table_holds_the_four_ways_each_with_when_to_use_it() -> None:
    rows = table()
    assert list(rows) == WAYS
    assert all(len(cells) == 3 and all(cells) for cells in rows.values())


def test_every_command_shown_parses() -> None:
    commands = [
        span.replace("<base>", "origin/main")
        for span in spans(section())
        if span.startswith("recon ")
    ]
    assert len(commands) >= 6
    for command in commands:
        (args,) = recon_commands(command, {})
        parse(args)


def test_cron_runs_the_apply_recon_cron_install_writes() -> None:
    shown = [s for s in spans(table()["cron"][1]) if s.startswith("recon apply")]
    (args,) = recon_commands(shown[0], {})
    entry = Entry(folder=Path("/p"), project="p", period=Period(15), recon=["recon"],
                  lock_timeout=30, path="/usr/bin")  # fmt: skip
    (written,) = recon_commands(crontab_block(entry).splitlines()[1].split(" ", 5)[5], {})
    assert parse(args) == parse(written)


def test_the_ci_it_names_is_what_the_examples_use_and_the_files_exist() -> None:
    check = " ".join(table()["PR check"])
    workflow = load_yaml(GITHUB)
    uses = [str(step.get("uses", "")) for step in workflow["jobs"]["plan"]["steps"]]
    assert f"`uses: {uses[-1]}`" in check
    (included,) = load_yaml(GITLAB)["include"]
    assert f"`component: {included['component']}`" in check
    for name in ["action.yml", "templates/recon-plan.yml", ".pre-commit-hooks.yaml",
                 "examples/cron/recon-watch.service"]:  # fmt: skip
        assert f"`{name}`" in section() and (ROOT / name).is_file(), name
