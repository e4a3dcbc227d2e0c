from __future__ import annotations

import pytest

from reconciler.desired.resources import CpuCount, Duration, Gpus, Memory


@pytest.mark.parametrize(
    ("raw", "count", "at_least"),
    [(8, 8, False), ("8", 8, False), ("8+", 8, True), (" 16 + ", 16, True), (1, 1, False)],
)
def test_cpus(raw: object, count: int, at_least: bool) -> None:
    cpus = CpuCount.parse(raw)
    assert (cpus.count, cpus.at_least) == (count, at_least)


@pytest.mark.parametrize("raw", [0, -1, "eight", "8++", "+8", True, 1.5, None, "8-"])
def test_cpus_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="cpus"):
        CpuCount.parse(raw)


@pytest.mark.parametrize(
    ("raw", "size", "mebibytes", "text", "at_least"),
    [
        ("32GB", 32 * 10**9, 30518, "32GB", False),
        ("32GiB", 32 * 2**30, 32768, "32GiB", False),
        ("32GB+", 32 * 10**9, 30518, "32GB+", True),
        ("512MiB", 512 * 2**20, 512, "512MiB", False),
        ("1.5TB", 15 * 10**11, 1430512, "1.5TB", False),
        ("2gib", 2 * 2**30, 2048, "2gib", False),
    ],
)
def test_memory(raw: str, size: int, mebibytes: int, text: str, at_least: bool) -> None:
    memory = Memory.parse(raw)
    assert (memory.bytes, memory.mebibytes, memory.text, memory.at_least) == (
        size,
        mebibytes,
        text,
        at_least,
    )


def test_memory_units_that_render_alike_hash_alike() -> None:
    assert Memory.parse("32GiB").canonical() == Memory.parse("32768MiB").canonical()
    assert Memory.parse("32GB").canonical() != Memory.parse("32GiB").canonical()


@pytest.mark.parametrize("raw", ["32", 32, "32G", "32 gigs", "GB", "-1GB", "0.1KB", "", True])
def test_memory_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="memory"):
        Memory.parse(raw)


@pytest.mark.parametrize(
    ("raw", "count", "gpu_type", "canonical"),
    [
        (4, 4, None, "4"),
        ("4", 4, None, "4"),
        ("A100:4", 4, "A100", "a100:4"),
        ({"A100": 4}, 4, "A100", "a100:4"),
        ("h100-80gb:8", 8, "h100-80gb", "h100-80gb:8"),
    ],
)
def test_gpus(raw: object, count: int, gpu_type: str | None, canonical: str) -> None:
    gpus = Gpus.parse(raw)
    assert (gpus.count, gpus.type, gpus.canonical()) == (count, gpu_type, canonical)


@pytest.mark.parametrize(
    "raw", [0, "A100:0", "A100:", ":4", {"A100": 1, "V100": 1}, {"A100": "x"}, "a b:4", "A1;00:2"]
)
def test_gpus_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="gpu"):
        Gpus.parse(raw)


@pytest.mark.parametrize(
    ("raw", "seconds", "text"),
    [
        ("12:00:00", 43200, "12:00:00"),
        ("1-00:00:00", 86400, "1-00:00:00"),
        ("1-2", 93600, "1-02:00:00"),
        ("2-03:04", 2 * 86400 + 3 * 3600 + 4 * 60, "2-03:04:00"),
        ("90m", 5400, "01:30:00"),
        ("2h", 7200, "02:00:00"),
        ("1d12h", 129600, "1-12:00:00"),
        ("45s", 45, "00:00:45"),
        (90, 5400, "01:30:00"),
        ("90", 5400, "01:30:00"),
        ("10:30", 630, "00:10:30"),
    ],
)
def test_duration(raw: object, seconds: int, text: str) -> None:
    duration = Duration.parse(raw)
    assert (duration.seconds, duration.text) == (seconds, text)


@pytest.mark.parametrize("raw", ["", "forever", "1:2:3:4", "0", 0, "-5m", True, 1.5, "12h foo"])
def test_duration_refused(raw: object) -> None:
    with pytest.raises(ValueError, match="time"):
        Duration.parse(raw)


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("99:99", "has 99 seconds: at most 59"),
        ("25:61:61", "has 61 minutes: at most 59"),
        ("1-25", "has 25 hours: at most 23"),
        ("1-23:60", "has 60 minutes"),
        ("1-0:0:60", "has 60 seconds"),
    ],
)
def test_a_clock_field_out_of_range_is_refused_not_normalised(raw: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        Duration.parse(raw)


@pytest.mark.parametrize(("raw", "seconds"), [("100:00:00", 360000), ("90:00", 5400)])
def test_the_first_clock_field_may_be_large(raw: str, seconds: int) -> None:
    assert Duration.parse(raw).seconds == seconds
