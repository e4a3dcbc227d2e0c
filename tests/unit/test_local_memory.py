"""The local backend's reading of a job's resident memory from /proc, on literal text."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from reconciler.scheduler.local.memory import group_resident_bytes, parse_stat

# /proc/<pid>/stat of a process whose name holds a space and a parenthesis (proc(5)):
# pid 4242, state S, parent 1, process group 4240, resident set 2560 pages.
STAT = (
    b"4242 (my (odd) job) S 1 4240 4240 0 -1 4194560 1234 0 0 0 12 3 0 0 20 0 1 0 "
    b"987654 104857600 2560 18446744073709551615 1 1 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0\n"
)


def test_the_group_and_resident_pages_come_after_the_last_parenthesis() -> None:
    assert parse_stat(STAT) == (4240, 2560)


def test_only_the_groups_processes_are_counted(tmp_path: Path) -> None:
    for pid, group, pages in ((11, 10, 100), (12, 10, 50), (13, 99, 1000)):
        (tmp_path / str(pid)).mkdir()
        line = STAT.replace(b"4242", str(pid).encode()).replace(
            b" 4240 4240 ", b" %d 4240 " % group
        )
        (tmp_path / str(pid) / "stat").write_bytes(line.replace(b" 2560 ", b" %d " % pages))
    (tmp_path / "self").mkdir()  # not a pid: skipped
    (tmp_path / "14").mkdir()  # exited between the listing and the read: skipped
    page = os.sysconf("SC_PAGE_SIZE")
    assert group_resident_bytes(10, tmp_path) == 150 * page
    assert group_resident_bytes(77, tmp_path) == 0
    assert group_resident_bytes(10, tmp_path / "missing") is None


def test_a_live_group_holds_what_its_processes_allocated() -> None:
    hog = subprocess.Popen(
        ["python3", "-c", "import sys; held = b'x' * (64 << 20); print(1, flush=True); "
         "sys.stdin.read()"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, process_group=0,
    )  # fmt: skip
    try:
        assert hog.stdout is not None and hog.stdout.readline() == b"1\n"
        held = group_resident_bytes(hog.pid)
        assert held is not None and 64 << 20 < held < 128 << 20
    finally:
        hog.kill()
        hog.wait()
