"""Every backend and double has every method of the protocols it speaks, as the protocol
says it: a double that lost or renamed a parameter would answer calls Slurm never gets."""

from __future__ import annotations

import inspect

from reconciler.scheduler.base import (
    AccountingScheduler,
    ConcurrentScheduler,
    Scheduler,
    StepScheduler,
)
from tests.contract.harness import Harness

# Which optional protocols each backend speaks.
SPEAKS: dict[str, set[type]] = {
    "local": {AccountingScheduler},
    "slurm": {AccountingScheduler, StepScheduler, ConcurrentScheduler},
    "simcluster": {StepScheduler},
    "scripted": {AccountingScheduler, StepScheduler, ConcurrentScheduler},
}


def _methods(protocol: type) -> dict[str, inspect.Signature]:
    return {
        name: inspect.signature(value)
        for name, value in vars(protocol).items()
        if inspect.isfunction(value) and not name.startswith("_")
    }


def test_every_method_of_the_protocols_it_speaks_takes_the_protocols_parameters(
    backend: Harness,
) -> None:
    scheduler = backend.scheduler
    optional = {AccountingScheduler, StepScheduler, ConcurrentScheduler}
    assert {p for p in optional if isinstance(scheduler, p)} == SPEAKS[backend.kind]
    assert isinstance(scheduler.name, str) and scheduler.name
    for protocol in (Scheduler, *SPEAKS[backend.kind]):
        for name, signature in _methods(protocol).items():
            own = inspect.signature(getattr(scheduler, name))
            wanted = [p for p in signature.parameters if p != "self"]
            assert list(own.parameters) == wanted, (protocol.__name__, name)
