"""afterok on every backend: a downstream runs after its upstream succeeded, and never
after it failed."""

from __future__ import annotations

from reconciler.scheduler.states import Health, SlurmState
from tests.contract.harness import Harness, final, has, quoted


def test_a_downstream_starts_only_after_its_upstream_completed(backend: Harness) -> None:
    data = backend.workdir / "data.txt"
    upstream = backend.submit("up", f"sleep 2; echo data > {quoted(data)}")
    downstream = backend.submit("down", f"cat {quoted(data)}", dependencies=[upstream])
    backend.wait("up", has(Health.RUNNING))
    waiting = backend.job("down")
    assert waiting is not None and waiting.health is Health.PENDING
    assert waiting.components[0].reason == "Dependency"

    up = backend.wait("up", final)
    down = backend.wait("down", final)
    assert (up.health, down.health) == (Health.SUCCEEDED, Health.SUCCEEDED)
    up_end, down_start = up.components[0].end, down.components[0].start
    assert up_end is not None and down_start is not None and down_start >= up_end
    assert backend.log("down", downstream).read_text() == "data\n"


def test_the_dependent_of_a_failure_never_runs_and_ends_cancelled(backend: Harness) -> None:
    # The upstream lives a few seconds: Slurm takes a dependency on a job it has already
    # forgotten (MinJobAge) as met.
    upstream = backend.submit("up", "sleep 2; exit 1")
    downstream = backend.submit("down", "echo ran", dependencies=[upstream])
    failed = backend.wait("up", final)
    assert (failed.health, failed.components[0].exit_code) == (Health.FAILED, 1)
    cancelled = backend.wait("down", final)
    assert (cancelled.job_id, cancelled.health) == (downstream, Health.CANCELLED)
    (component,) = cancelled.components
    assert component.state is SlurmState.CANCELLED
    assert component.reason is not None and component.reason.startswith("Dependency")
    assert (component.start, component.nodes, cancelled.steps) == (None, None, ())
    assert not backend.log("down", downstream).exists()
