"""`scheduler: auto | slurm | local` on PATHs with a working, failing, hanging or no sbatch."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from reconciler.errors import ReconError
from reconciler.scheduler import select
from reconciler.scheduler.local import LocalScheduler, gpus
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


def stand_in_nvidia_smi(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str) -> None:
    """PATH holds only a stand-in ``nvidia-smi`` running ``body``."""
    bin_dir = tmp_path / "gpu-bin"
    bin_dir.mkdir()
    command = bin_dir / "nvidia-smi"
    command.write_text(f"#!/bin/sh\n{body}\n")
    command.chmod(0o755)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.delenv("RECON_LOCAL_GPUS", raising=False)


def gpus_of(scheduler: object) -> int:
    assert isinstance(scheduler, LocalScheduler)
    (partition,) = scheduler.partitions()
    (node,) = partition.nodes
    return node.gpus()


def test_the_local_gpus_are_those_nvidia_smi_lists(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # What nvidia-smi -L prints for two A100s, the first split into MIG slices: a slice is
    # no GPU of its own here.
    listed = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-5a1c0f3e-0000-0000-0000-000000000000)",
        "  MIG 1g.5gb     Device  0: (UUID: MIG-1a2b3c4d-0000-0000-0000-000000000000)",
        "GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-5a1c0f3e-0000-0000-0000-000000000001)",
    )
    lines = "".join(f"echo '{line}'\n" for line in listed)
    stand_in_nvidia_smi(tmp_path, monkeypatch, f'[ "$1" = -L ] || exit 2\n{lines}')
    assert gpus.found_gpus() == ("0", "1")
    assert gpus_of(select_scheduler("local", tmp_path / "state")) == 2


@pytest.mark.parametrize(
    "body",
    [
        "echo 'NVIDIA-SMI has failed because it could not communicate with the NVIDIA driver.'"
        "; exit 9",
        "echo 'No devices were found'",
        "exec /bin/sleep 30",
    ],
    ids=["fails", "lists-none", "hangs"],
)
def test_a_failing_or_silent_nvidia_smi_finds_no_gpu(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, body: str
) -> None:
    stand_in_nvidia_smi(tmp_path, monkeypatch, body)
    monkeypatch.setattr(gpus, "NVIDIA_SMI_SECONDS", 0.5)
    assert gpus_of(select_scheduler("local", tmp_path / "state")) == 0


@pytest.mark.parametrize(
    ("value", "devices"),
    [("2", ("0", "1")), ("0", ()), ("none", ()), ("1,3", ("1", "3")), ("3,", ("3",))],
)
def test_recon_local_gpus_declares_them_whatever_nvidia_smi_says(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str, devices: tuple[str, ...]
) -> None:
    stand_in_nvidia_smi(tmp_path, monkeypatch, "echo 'GPU 0: NVIDIA H100 (UUID: GPU-1)'")
    monkeypatch.setenv("RECON_LOCAL_GPUS", value)
    assert gpus.machine_gpus(os.environ) == devices
    assert gpus_of(select_scheduler("local", tmp_path / "state")) == len(devices)


@pytest.mark.parametrize("value", ["two", "-1", "1,1", "0,gpu1"])
def test_a_bad_gpu_declaration_is_an_error_that_says_what_to_give(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: str
) -> None:
    monkeypatch.setenv("RECON_LOCAL_GPUS", value)
    with pytest.raises(ReconError) as raised:
        select_scheduler("local", tmp_path / "state")
    assert str(raised.value) == (
        f"RECON_LOCAL_GPUS={value!r}: give a number of GPUs (2), the devices' ids (0,1), or none"
    )


def test_recon_yaml_declares_the_gpus_and_the_machines_variable_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stand_in_nvidia_smi(tmp_path, monkeypatch, "echo 'GPU 0: NVIDIA H100 (UUID: GPU-1)'")
    declared = ("0", "1", "2")
    assert gpus_of(select_scheduler("local", tmp_path / "state", gpus=declared)) == 3
    monkeypatch.setenv("RECON_LOCAL_GPUS", "none")
    assert gpus_of(select_scheduler("local", tmp_path / "state", gpus=declared)) == 0
