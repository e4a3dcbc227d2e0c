"""Two dev clusters on one machine run the same Slurm programs (the host's, and Debian
13's chrooted in its root): each finds only the daemons under its own root directory."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path, PurePath

import pytest

from reconciler.devcluster.daemons import Daemon
from reconciler.devcluster.processes import pids_of


@pytest.mark.skipif(os.geteuid() != 0, reason="chroot needs root")
def test_a_process_under_another_root_is_not_this_clusters_daemon(tmp_path: Path) -> None:
    # A forked child runs under this process's own command line: only its root differs.
    with open(f"/proc/{os.getpid()}/cmdline", "rb") as own:
        argv0 = own.read().split(b"\0")[0].decode()
    daemon = Daemon(
        name="probe", programs=frozenset({PurePath(argv0).name}), start=(), log=tmp_path / "log"
    )
    ready_read, ready_write = os.pipe()
    child = os.fork()
    if child == 0:  # pragma: no cover - the child only waits to be looked at
        try:
            os.chroot(tmp_path)
            os.write(ready_write, b"x")
            time.sleep(60)
        finally:
            os._exit(0)
    try:
        assert os.read(ready_read, 1) == b"x"
        found = pids_of(daemon)
        assert os.getpid() in found
        assert child not in found
    finally:
        os.kill(child, signal.SIGKILL)
        os.waitpid(child, 0)
        os.close(ready_read)
        os.close(ready_write)
