"""Two dev clusters on one machine run the same Slurm programs (the host's, and Debian
13's chrooted in its root): each finds only the daemons under its own root directory."""

from __future__ import annotations

import os
import shutil
import signal
import time
from pathlib import Path, PurePath

import pytest

from reconciler.devcluster import rootfs
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


@pytest.mark.skipif(os.geteuid() != 0, reason="mount needs root")
def test_a_folder_made_again_where_a_mounted_one_was_deleted_is_mounted_afresh(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CI clones into the same path each run: the root's bind mount of the last clone
    # showed the deleted folder, and recon inside found no source tree at all.
    root, checkout = tmp_path / "root", tmp_path / "checkout"
    root.mkdir()
    checkout.mkdir()
    monkeypatch.setattr(rootfs, "ROOT", root)
    monkeypatch.setattr(rootfs, "shared_paths", lambda: (checkout,))
    reports: list[str] = []
    try:
        rootfs.ensure_mounts(reports.append)
        assert rootfs.missing_mounts() == []
        shutil.rmtree(checkout)
        checkout.mkdir()
        (checkout / "fresh").write_text("clone\n")

        assert rootfs.missing_mounts() == [checkout]
        rootfs.ensure_mounts(reports.append)
        assert rootfs.missing_mounts() == []
        inside = root / checkout.relative_to("/")
        assert (inside / "fresh").read_text() == "clone\n"
        assert rootfs.mounted_paths() == {root / "proc", inside}
        assert any("since deleted" in line for line in reports)
    finally:
        rootfs.unmount_all(reports.append)
    assert rootfs.mounted_paths() == set()
