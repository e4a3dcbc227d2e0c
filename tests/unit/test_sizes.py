"""Sizes suggested from what the jobs used (engine/plan/sizes), from plain journal records:
the rule (1.5 x the most the last 5 successes used, rounded up), what it counts as saved,
and `recon cost`'s three renderings of it."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from reconciler.engine.ledger.cost import Ledger, ledger
from reconciler.engine.plan.sizes import Change, suggest
from reconciler.report import cost as report
from reconciler.scheduler.render import SKIPPED
from reconciler.scheduler.states import Health
from reconciler.scheduler.usage import JobUsage
from reconciler.state.records import EndingKind, SubmissionRecord, SubmissionStatus

T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)
GIB = 1024.0
_ids = iter(range(1, 10_000))


def success(
    name: str,
    *,
    peak_mb: float | None = 1024.0,
    memory_mb: float = 8 * GIB,
    hours: float = 1.0,
    limit_h: float | None = 4.0,
    cpus: int = 8,
    busy: float = 1.0,
    gpus: int = 0,
    wait_h: float = 0.0,
    health: Health = Health.SUCCEEDED,
    skipped: bool = False,
) -> SubmissionRecord:
    """A job of ``name`` that held ``memory_mb`` per node and ``cpus`` for ``hours``,
    peaked at ``peak_mb`` and kept ``busy`` CPUs busy on average."""
    seconds = hours * 3600
    usage = JobUsage(
        elapsed_s=seconds,
        wait_s=wait_h * 3600,
        gpus=gpus,
        cpus=cpus,
        gpu_s=gpus * seconds,
        cpu_s=cpus * seconds,
        time_limit_s=None if limit_h is None else limit_h * 3600,
        node_memory_mb=memory_mb,
        peak_memory_mb=peak_mb,
        cpu_time_s=None if peak_mb is None else busy * seconds,
    )
    record_id = next(_ids)
    return SubmissionRecord(
        id=record_id,
        project="p",
        name=name,
        spec_hash="s1",
        commit="c1",
        job_id=str(100 + record_id),
        status=SubmissionStatus.SUBMITTED,
        final_health=health,
        reason=SKIPPED if skipped else None,
        ending=EndingKind.SKIPPED if skipped else None,
        usage_json=json.dumps(usage.to_json()),
        used_read=True,
        created_at=T0,
        updated_at=T0,
    )


def test_five_successes_that_asked_8_gib_and_used_1_gib_are_suggested_1_5_gib() -> None:
    """The issue's example: 1.5 x 1 GiB is 1.5 GiB (1,536 MiB, a whole number of 128 MiB
    steps); the time and CPUs by the same rule; the saving over the five jobs."""
    records = [success("train", gpus=2, wait_h=0.1) for _ in range(5)]
    sizes = suggest(records)
    train = sizes.runs["train"]
    assert train.jobs == 5
    assert (train.memory.held, train.memory.needed, train.memory.suggested) == (8192, 1024, 1536)
    assert train.memory.change is Change.LOWER
    # 1 hour's run: 1.5 hours, against a 4-hour limit
    assert (train.time.held, train.time.needed, train.time.suggested) == (14400, 3600, 5400)
    # one CPU busy of 8: two suggested (1.5, rounded up)
    assert (train.cpus.held, train.cpus.needed, train.cpus.suggested) == (8, 1.0, 2)
    assert train.saved_cpu_h == pytest.approx(5 * 6 * 1.0)  # 6 CPUs for an hour, 5 times
    assert train.saved_memory_gib_h == pytest.approx(5 * 6.5 * 1.0)  # 6.5 GiB for an hour
    assert train.reserved_gpu_h == pytest.approx(5 * 2 * 2.5)  # 2 GPUs x (4 h - 1.5 h)
    assert train.wait_h == pytest.approx(0.5)


@pytest.mark.parametrize(
    ("peaks", "held", "suggested", "change"),
    [
        ([1024.0] * 5, 8192.0, 1536.0, Change.LOWER),  # the example
        ([1030.0] * 5, 8192.0, 1664.0, Change.LOWER),  # 1,545 MiB up to the next 128 MiB
        ([100.0, 900.0, 300.0], 8192.0, 1408.0, Change.LOWER),  # the most used: 900 x 1.5
        ([10.0] * 3, 8192.0, 128.0, Change.LOWER),  # never below one step
        ([1500.0] * 3, 2048.0, 2304.0, Change.KEEP),  # the margin is past what it held
        ([2500.0] * 3, 2048.0, 3840.0, Change.RAISE),  # used more than it held
    ],
)
def test_memory_is_the_most_used_times_1_5_rounded_up_to_128_mib(
    peaks: list[float], held: float, suggested: float, change: Change
) -> None:
    sizes = suggest([success("r", peak_mb=peak, memory_mb=held) for peak in peaks])
    memory = sizes.runs["r"].memory
    assert (memory.needed, memory.suggested, memory.change) == (max(peaks), suggested, change)


@pytest.mark.parametrize(
    ("hours", "limit_h", "suggested_s", "change"),
    [
        ([1.0, 2.0, 1.5], 12.0, 10800.0, Change.LOWER),  # 2 h x 1.5
        ([10 / 3600] * 3, 1.0, 60.0, Change.LOWER),  # 15 s: a whole minute at least
        ([1.0] * 3, None, 5400.0, Change.KEEP),  # no limit to compare with
        ([1.0] * 3, 1.5, 5400.0, Change.KEEP),
    ],
)
def test_time_is_the_longest_run_times_1_5_in_whole_minutes(
    hours: list[float], limit_h: float | None, suggested_s: float, change: Change
) -> None:
    sizes = suggest([success("r", hours=h, limit_h=limit_h) for h in hours])
    time = sizes.runs["r"].time
    assert (time.suggested, time.change) == (suggested_s, change)


@pytest.mark.parametrize(
    ("busy", "cpus", "suggested", "change"),
    [
        ([0.1] * 3, 8, 1, Change.LOWER),  # at least one CPU
        ([3.9, 2.0, 1.0], 8, 6, Change.LOWER),  # the busiest: 3.9 x 1.5 = 5.85
        ([7.5] * 3, 8, 12, Change.KEEP),  # nearly all busy: keep what it had
    ],
)
def test_cpus_are_the_busiest_average_times_1_5_in_whole_cpus(
    busy: list[float], cpus: int, suggested: int, change: Change
) -> None:
    sizes = suggest([success("r", busy=b, cpus=cpus) for b in busy])
    assert (sizes.runs["r"].cpus.suggested, sizes.runs["r"].cpus.change) == (suggested, change)


def test_only_the_last_five_measured_successes_that_ran_their_command_count() -> None:
    old = [success("r", peak_mb=6000.0) for _ in range(3)]  # older than the last five
    newer = [success("r", peak_mb=1024.0) for _ in range(5)]
    ignored = [
        success("r", peak_mb=7000.0, health=Health.FAILED),
        success("r", peak_mb=7000.0, skipped=True),  # skipped its command: used nothing
        success("r", peak_mb=None),  # nothing measured it (no accounting gatherer)
    ]
    sizes = suggest([*old, *newer, *ignored])
    assert (sizes.runs["r"].jobs, sizes.runs["r"].memory.needed) == (5, 1024.0)


def test_fewer_than_three_successes_are_named_not_sized() -> None:
    sizes = suggest([success("r"), success("r"), *(success("q") for _ in range(3))])
    assert (list(sizes.runs), sizes.too_few) == (["q"], ("r",))
    assert suggest([success("r", peak_mb=None)] * 4).any is False


def test_a_sweep_pools_its_members_and_names_filter() -> None:
    members = [success(f"seeds[seed={i}]", peak_mb=500.0 + 100 * i) for i in range(3)]
    sizes = suggest([*members, *(success("train") for _ in range(3))])
    assert list(sizes.runs) == ["train"] and list(sizes.sweeps) == ["seeds"]
    seeds = sizes.sweeps["seeds"]
    assert (seeds.jobs, seeds.memory.needed, seeds.memory.suggested) == (3, 700.0, 1152.0)
    assert list(suggest([*members], names=["seeds"]).sweeps) == ["seeds"]
    assert not suggest([*members], names=["train"]).any


def test_memory_no_job_held_is_compared_with_the_spec() -> None:
    """The local backend books no memory: its jobs hold 0 MiB."""
    local = [success("r", memory_mb=0.0, peak_mb=1024.0) for _ in range(3)]
    assert suggest(local).runs["r"].memory.held is None
    sized = suggest(local, asked_memory={"r": 4096.0}).runs["r"]
    assert (sized.memory.held, sized.memory.change) == (4096.0, Change.LOWER)
    assert sized.saved_memory_gib_h == pytest.approx(3 * 2.5)


def book_with_sizes(records: list[SubmissionRecord]) -> Ledger:
    return replace(ledger(records, {"train": "s1"}), sizes=suggest(records))


def test_cost_text_says_the_sizes_the_rule_and_the_saving() -> None:
    records = [success("train", gpus=2, wait_h=0.1) for _ in range(5)]
    text = report.as_text(book_with_sizes(records), "vision", width=100)
    table = text[text.index("Sizes suggested:") :].splitlines()
    assert table[1].split() == [
        "run", "jobs", "memory", "peak", "suggest", "time", "longest", "suggest", "CPUs",
        "busy", "suggest", "CPU-h", "mem", "GiB-h", "GPU-h", "reserved", "wait", "h",
    ]  # fmt: skip
    row = table[2]
    assert row.split()[:2] == ["train", "5"]
    for said in ("8.00 GiB", "1.50 GiB (lower)", "4h", "1h 30m (lower)", "2 (lower)"):
        assert said in row
    assert row.split()[-4:] == ["30.000", "32.500", "25.000", "0.500"]
    assert "The rule: each 1.5 x the most its last 5 successes used" in text


def test_cost_markdown_and_json_hold_the_same_suggestions() -> None:
    records = [success("train") for _ in range(5)]
    book = book_with_sizes(records)
    markdown = report.as_markdown(book, "vision")
    assert "**Sizes suggested**" in markdown
    assert "| train | 5 | 8.00 GiB | 1.00 GiB | 1.50 GiB (lower) |" in markdown
    data = json.loads(report.as_json(book, "vision"))["sizes"]
    train = data["runs"]["train"]
    assert train["memory_mib_per_node"] == {
        "held": 8192.0, "needed": 1024.0, "suggested": 1536.0, "change": "lower",
    }  # fmt: skip
    assert data["rule"] == {"last": 5, "fewest": 3, "margin": 1.5, "memory_step_mib": 128.0}


def test_no_measured_success_leaves_the_report_as_it_was() -> None:
    records = [success("train", peak_mb=None) for _ in range(5)]
    book = book_with_sizes(records)
    assert "Sizes" not in report.as_text(book, "vision")
    assert "Sizes" not in report.as_markdown(book, "vision")
