"""The Slurm release the tests talk to, for the few checks whose expected text or timing
differs between releases (each difference is pinned on both releases' literal text in
tests/unit/test_slurm_releases.py or named where it is checked)."""

from __future__ import annotations

import subprocess

from reconciler.scheduler.slurm.release import parse_release

SLURM_22_05 = (22, 5)
SLURM_24_11 = (24, 11)


def slurm_release() -> tuple[int, int]:
    """(major, minor) of the Slurm on PATH; an error if sinfo names none."""
    version = subprocess.run(
        ["sinfo", "--version"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    release = parse_release(version)
    assert release is not None, f"sinfo --version names no release: {version!r}"
    return release
