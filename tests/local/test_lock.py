from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from reconciler.errors import LockedError
from reconciler.state.lock import INFO_FILE, project_lock

# A separate process that takes the lock, says so, then holds it until killed.
HOLDER = """
import sys, time
from pathlib import Path
from reconciler.state.lock import project_lock
with project_lock(Path(sys.argv[1]), timeout=10, purpose=sys.argv[2]):
    print("held", flush=True)
    time.sleep(float(sys.argv[3]))
"""


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    return tmp_path / ".recon"


@pytest.fixture
def holder(state_dir: Path) -> Iterator[subprocess.Popen[str]]:
    with _hold(state_dir, seconds=60) as process:
        yield process


@contextmanager
def _hold(state_dir: Path, seconds: float) -> Iterator[subprocess.Popen[str]]:
    process = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(state_dir), "apply", str(seconds)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        assert process.stdout.readline() == "held\n"
        yield process
    finally:
        process.kill()
        process.wait()


def test_a_second_process_times_out_naming_the_holder(
    state_dir: Path, holder: subprocess.Popen[str]
) -> None:
    started = time.monotonic()
    with pytest.raises(LockedError) as caught, project_lock(state_dir, 0.3, project="demo"):
        pytest.fail("the lock was taken while another process holds it")
    waited = time.monotonic() - started

    message = str(caught.value)
    assert f"another recon apply (pid {holder.pid} on " in message
    assert "holds the lock of project demo" in message
    assert "waited 0.3s. Try again later or raise --lock-timeout." in message
    assert waited >= 0.3


def test_timeout_zero_tries_once(state_dir: Path, holder: subprocess.Popen[str]) -> None:
    started = time.monotonic()
    with pytest.raises(LockedError, match="did not wait"), project_lock(state_dir, 0):
        pass
    assert time.monotonic() - started < 0.2


def test_a_killed_holders_lock_is_free_at_once(
    state_dir: Path, holder: subprocess.Popen[str]
) -> None:
    holder.kill()  # SIGKILL: no cleanup runs, lock.info stays behind
    holder.wait()
    assert json.loads((state_dir / INFO_FILE).read_text())["pid"] == holder.pid

    with project_lock(state_dir, 0, purpose="watch"):
        info = json.loads((state_dir / INFO_FILE).read_text())
        assert (info["pid"], info["purpose"]) == (os.getpid(), "watch")
    assert not (state_dir / INFO_FILE).exists()


def test_a_waiter_gets_the_lock_when_the_holder_finishes(state_dir: Path) -> None:
    with _hold(state_dir, seconds=0.5):
        started = time.monotonic()
        with project_lock(state_dir, 10):
            waited = time.monotonic() - started
    # It waited for the holder (which keeps the lock 0.5 s after saying so), then got it.
    assert 0.3 <= waited < 10


def test_the_lock_is_released_when_the_block_raises(state_dir: Path) -> None:
    with pytest.raises(RuntimeError, match="boom"), project_lock(state_dir, 0):
        raise RuntimeError("boom")

    assert not (state_dir / INFO_FILE).exists()
    with project_lock(state_dir, 0):
        pass


def test_not_reentrant_within_one_process(state_dir: Path) -> None:
    # Documented: a nested take fails rather than deadlocking or silently sharing.
    inner = pytest.raises(LockedError, match=f"pid {os.getpid()} ")
    with project_lock(state_dir, 0), inner, project_lock(state_dir, 0):
        pass
