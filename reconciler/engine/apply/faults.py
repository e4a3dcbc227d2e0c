"""Named fault points, so crash-safety is tested by really crashing.

`RECON_FAULT_INJECT=<point>` makes recon SIGKILL itself when it reaches that point (no
cleanup, no atexit, no journal flush: what a power cut or an OOM kill does). Unset, a
fault point costs one environment lookup.

`RECON_FAULT_INJECT=<point>:raise` raises `InjectedFault` there instead (a bug's
exception, not a ReconError), and `<point>:raise:N` only the first N times this process
reaches it: how a long-lived `recon watch` is shown to outlive a bad pass and recover.

Points: `pass-start` (a reconcile pass begins: nothing observed, locked or written yet),
and one after each kind of scheduler call, before the journal hears what it did:
`after-sbatch` (a batch job or array made), `after-salloc` (an allocation's job made),
`after-srun` (a step started in an allocation: a run's, or setup's) and `after-scancel`
(a job cancelled or an allocation released). ``POINTS`` lists them. One more,
`after-move` (a renamed run's folder moved and its manifest rewritten, the journal not
told yet), is reached only by a pass that moves a run (`renamed_from`), and is tried by
tests/local/test_rename.py rather than by every trial.
"""

from __future__ import annotations

import os
import signal

ENV = "RECON_FAULT_INJECT"
POINTS = ("pass-start", "after-sbatch", "after-salloc", "after-srun", "after-scancel")

_reached: dict[str, int] = {}


class InjectedFault(RuntimeError):
    """The exception a `<point>:raise` fault raises."""


def fault_point(name: str) -> None:
    value = os.environ.get(ENV)
    if value is None or not value.startswith(name):
        return
    if value == name:
        os.kill(os.getpid(), signal.SIGKILL)
    point, _, rest = value.partition(":")
    kind, _, times = rest.partition(":")
    if point != name or kind != "raise":
        return
    _reached[name] = _reached.get(name, 0) + 1
    if not times or _reached[name] <= int(times):
        raise InjectedFault(f"fault injected at {name} ({ENV}={value})")
