"""`scheduler: auto | slurm | local` on PATHs with a working, failing, hanging or no sbatch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.errors import ReconError
from reconciler.scheduler import select
from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.select import select_scheduler
from reconciler.scheduler.slurm import SlurmScheduler


def fake_sbatch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str | None) -> None:
    """PATH holds only a fake sbatch running ``body``, or nothing for None."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    if body is not None:
        sbatch = bin_dir / "sbatch"
        sbatch.write_text(f"#!/bin/sh\n{body}\n")
        sbatch.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setattr(select, "SBATCH_ANSWER_SECONDS", 0.5)


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (None, LocalScheduler),
        ("echo slurm 22.05.8", SlurmScheduler),
        ("echo 'sbatch: error: cannot read slurm.conf' >&2; exit 1", LocalScheduler),
        ("exec /bin/sleep 30", LocalScheduler),
    ],
    ids=["no-sbatch", "sbatch-answers", "sbatch-fails", "sbatch-hangs"],
)
def test_auto_is_slurm_only_where_sbatch_answers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str | None, expected: type
) -> None:
    fake_sbatch(tmp_path, monkeypatch, body)
    assert isinstance(select_scheduler("auto", tmp_path / "state"), expected)


def test_local_and_slurm_are_forced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_sbatch(tmp_path, monkeypatch, "echo slurm 22.05.8")
    assert isinstance(select_scheduler("local", tmp_path / "state"), LocalScheduler)
    os.remove(tmp_path / "bin" / "sbatch")
    assert isinstance(select_scheduler("slurm", tmp_path / "state"), SlurmScheduler)


def test_the_local_backend_keeps_its_jobs_in_the_state_dir(tmp_path: Path) -> None:
    scheduler = select_scheduler("local", tmp_path / "state")
    assert isinstance(scheduler, LocalScheduler)
    assert scheduler.root == tmp_path / "state" / "local"


def test_recon_local_cpus_sets_the_local_cpu_count(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RECON_LOCAL_CPUS", "12")
    scheduler = select_scheduler("local", tmp_path / "state")
    (partition,) = scheduler.partitions()
    assert [node.cpus for node in partition.nodes] == [12]


@pytest.mark.parametrize("value", ["0", "two", "-1"])
def test_a_bad_cpu_count_is_an_error_that_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("RECON_LOCAL_CPUS", value)
    with pytest.raises(ReconError, match="RECON_LOCAL_CPUS"):
        select_scheduler("local", tmp_path / "state")
