"""The suite's own wiring: each backend's tests need the Slurm cluster only if Slurm's."""

from __future__ import annotations

import pytest

from tests.contract.harness import Harness


def test_only_the_slurm_backend_needs_the_cluster(
    request: pytest.FixtureRequest, backend: Harness
) -> None:
    # The local half and the doubles must run (and pass) on a machine with no Slurm at
    # all, even in CI.
    needs_cluster = "slurm_cluster" in request.node.fixturenames
    assert needs_cluster == (backend.kind == "slurm")
