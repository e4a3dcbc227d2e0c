"""`recon cron`'s entries as text: the periods it accepts and how cron and systemd say
them, the crontab and scrontab entries, and finding an entry again among the user's
other lines (installing twice changes nothing, removing leaves the rest as it was)."""

from __future__ import annotations

from pathlib import Path

import pytest

from reconciler.cron import (
    CronError,
    Entry,
    Period,
    SlurmJob,
    crontab_block,
    replaced,
    scrontab_block,
    systemd_units,
    unit_name,
)
from tests.unit.test_ci_examples import parsed_commands


@pytest.mark.parametrize(
    ("text", "cron", "calendar"),
    [
        ("1m", "* * * * *", "*-*-* *:00/1:00"),
        ("15m", "*/15 * * * *", "*-*-* *:00/15:00"),
        ("30min", "*/30 * * * *", "*-*-* *:00/30:00"),
        ("60m", "0 * * * *", "*-*-* 00/1:00:00"),
        ("1h", "0 * * * *", "*-*-* 00/1:00:00"),
        ("6h", "0 */6 * * *", "*-*-* 00/6:00:00"),
        ("1d", "0 0 * * *", "*-*-* 00:00:00"),
    ],
)
def test_a_period_in_cron_and_systemd(text: str, cron: str, calendar: str) -> None:
    period = Period.parse(text)
    assert (period.cron, period.on_calendar) == (cron, calendar)
    assert Period.parse(str(period)) == period


@pytest.mark.parametrize("text", ["7m", "90m", "0m", "5h", "2d", "15", "30s", "every 5m", ""])
def test_a_period_that_does_not_divide_an_hour_or_a_day_is_refused(text: str) -> None:
    with pytest.raises(CronError, match=r"^--every .*: give a period that divides an hour"):
        Period.parse(text)


def entry(folder: str = "/srv/lab/cartpole", every: str = "15m") -> Entry:
    return Entry(
        folder=Path(folder), project="cartpole", period=Period.parse(every),
        recon=["/opt/recon/bin/recon"], lock_timeout=30, path="/usr/bin:/bin",
    )  # fmt: skip


def test_the_crontab_entry() -> None:
    assert crontab_block(entry()) == (
        "# recon cron: /srv/lab/cartpole (project cartpole, every 15m); "
        "`recon cron remove /srv/lab/cartpole --crontab` removes it\n"
        "*/15 * * * * cd /srv/lab/cartpole && PATH=/usr/bin:/bin "
        "/opt/recon/bin/recon apply --auto-approve --quiet --lock-timeout 30\n"
    )


def test_the_scrontab_entry_is_a_tiny_job_in_the_partition_named() -> None:
    job = SlurmJob(partition="debug", time="00:05:00", output=Path("/srv/s/scrontab.log"))
    assert scrontab_block(entry(every="1m"), job) == (
        "# recon cron: /srv/lab/cartpole (project cartpole, every 1m); "
        "`recon cron remove /srv/lab/cartpole --scrontab` removes it\n"
        "#SCRON --partition=debug\n"
        "#SCRON --time=00:05:00\n"
        "#SCRON --job-name=recon-cron.cartpole\n"
        "#SCRON --output=/srv/s/scrontab.log\n"
        "#SCRON --open-mode=append\n"
        "* * * * * cd /srv/lab/cartpole && PATH=/usr/bin:/bin "
        "/opt/recon/bin/recon apply --auto-approve --quiet --lock-timeout 30\n"
    )


def test_the_entry_runs_an_apply_recon_accepts() -> None:
    (apply,) = parsed_commands([entry().command], {})["apply"]
    assert apply["auto_approve"] and apply["quiet"] and apply["lock_timeout"] == 30


def test_a_folder_with_a_space_is_quoted() -> None:
    spaced = entry("/srv/my lab/cartpole")
    assert spaced.tag == "# recon cron: '/srv/my lab/cartpole'"
    assert spaced.command.startswith("cd '/srv/my lab/cartpole' && ")


OTHERS = "MAILTO=ops@example.org\n# nightly backup\n0 3 * * * /usr/local/bin/backup\n"


def test_installing_twice_changes_nothing_and_removing_restores_the_table() -> None:
    block = crontab_block(entry())
    once = replaced(OTHERS, entry().tag, block)
    assert once == OTHERS + block
    assert replaced(once, entry().tag, block) == once
    assert replaced(once, entry().tag, None) == OTHERS


def test_installing_another_period_replaces_the_entry() -> None:
    once = replaced(OTHERS, entry().tag, crontab_block(entry()))
    hourly = crontab_block(entry(every="1h"))
    assert replaced(once, entry().tag, hourly) == OTHERS + hourly


def test_another_folder_s_entry_is_left_alone() -> None:
    """/srv/lab/cartpole2 starts with /srv/lab/cartpole: its entry is not this one's."""
    other = entry("/srv/lab/cartpole2")
    table = replaced(OTHERS, other.tag, crontab_block(other))
    table = replaced(table, entry().tag, crontab_block(entry()))
    assert replaced(table, entry().tag, None) == OTHERS + crontab_block(other)


def test_a_scrontab_entry_is_removed_with_its_slurm_lines() -> None:
    job = SlurmJob(partition="debug", time="00:05:00", output=Path("/srv/s/scrontab.log"))
    table = "#SCRON --partition=other\n0 * * * * hourly-report\n"
    installed = replaced(table, entry().tag, scrontab_block(entry(), job))
    assert replaced(installed, entry().tag, None) == table


def test_a_table_without_a_last_newline_keeps_its_last_line() -> None:
    assert replaced("0 3 * * * backup", entry().tag, "x\n") == "0 3 * * * backup\nx\n"


def test_systemd_units_are_named_by_project_and_folder() -> None:
    units = systemd_units(entry())
    name = unit_name(Path("/srv/lab/cartpole"), "cartpole")
    assert set(units) == {f"{name}.service", f"{name}.timer"}
    assert name != unit_name(Path("/srv/lab/cartpole2"), "cartpole")
    assert all(text.startswith(entry().tag + " ") for text in units.values())
    service, timer = units[f"{name}.service"], units[f"{name}.timer"]
    assert (
        "\nExecStart=/opt/recon/bin/recon apply --auto-approve --quiet --lock-timeout 30\n"
        in service
    )
    assert "\nWorkingDirectory=/srv/lab/cartpole\n" in service
    assert "\nOnCalendar=*-*-* *:00/15:00\n" in timer


def test_an_entry_slurm_disabled_is_still_found() -> None:
    """scrontab -l shows an entry whose job was cancelled with its lines commented out."""
    job = SlurmJob(partition="debug", time="00:05:00", output=Path("/srv/s/scrontab.log"))
    block = scrontab_block(entry(), job)
    heading, *rest = block.splitlines(keepends=True)
    disabled = heading + "".join(f"#DISABLED: {line}" for line in rest)
    table = "0 * * * * hourly-report\n"
    assert replaced(table + disabled, entry().tag, None) == table
    assert replaced(table + disabled, entry().tag, block) == table + block
