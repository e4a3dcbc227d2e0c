"""docs/tutorial.md on a machine with Slurm: the local steps as on any machine (the
project says `scheduler: local`, so they submit nothing), then its step to a real cluster
for real: the plan is made against the dev cluster (tests/tutorial.py says how)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.tutorial import follow

pytestmark = pytest.mark.slurm


def test_the_tutorial_ends_with_a_plan_on_slurm(tmp_path: Path) -> None:
    taken = follow(tmp_path, slurm=True)
    assert any(step.on_slurm and step.text == "recon plan" for step in taken)
