"""Resources raised on retry (`on_oom`, `on_timeout`): what the run's next job asks for
after running out of memory or time. Pure.

The memory a run declares is multiplied by `on_oom.memory` once per OUT_OF_MEMORY attempt
since its last success, up to `on_oom.max` and to the most that a node of its partition
holds (``fit``: a raise past every node stops at the largest that fits, and says so); the
time limit likewise by `on_timeout.time` per TIMEOUT attempt (for a run with a checkpoint
a timeout is a requeue, which raises nothing), in whole minutes, up to `on_timeout.max`.
The spec hash does not change: the raised values go with the action (``Raised``), the
applier renders the job's script with them, and the journal records them with the job.
A sweep's members are not raised: their retries go in job arrays, whose script says the
sweep's declared resources.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from reconciler.desired.desired import DesiredRun
from reconciler.desired.models import RunResources
from reconciler.desired.resources import Duration, Memory
from reconciler.desired.retries import RetryKind
from reconciler.engine.plan.actions import Raised
from reconciler.engine.plan.budgets import Attempt
from reconciler.engine.plan.fit import Fit


def raised(run: DesiredRun, attempts: Sequence[Attempt], fit: Fit | None) -> Raised | None:
    """What the run's next job asks for beyond its spec, after ``attempts`` (its failed
    attempts since its last success); None when nothing is raised."""
    if run.member is not None:
        return None  # a sweep's members go in job arrays, all asking for what is declared
    spec = run.spec
    if spec.on_oom is None and spec.on_timeout is None:
        return None
    resources = spec.resources
    said: list[str] = []
    memory_mb = time_s = None
    ooms = sum(1 for attempt in attempts if attempt.kind is RetryKind.OUT_OF_MEMORY)
    if spec.on_oom is not None and ooms and resources.memory is not None:
        factor = spec.on_oom.memory.value**ooms
        declared = resources.memory.mebibytes
        memory_mb = math.ceil(declared * factor)
        why = f"x{factor:g} after {_times(ooms, 'out of memory')}"
        if spec.on_oom.max is not None and memory_mb > spec.on_oom.max.mebibytes:
            memory_mb, why = spec.on_oom.max.mebibytes, f"{why}, at max {spec.on_oom.max.text}"
        if fit is not None and fit.why_not(with_memory(resources, memory_mb)) is not None:
            memory_mb = _largest_fitting(resources, declared, memory_mb, fit)
            why = f"{why}; the most a node holds"
        said.append(f"memory {mib_text(memory_mb)} ({why})")
    timeouts = sum(1 for attempt in attempts if attempt.kind is RetryKind.TIMEOUT)
    if spec.on_timeout is not None and timeouts and resources.time is not None:
        factor = spec.on_timeout.time.value**timeouts
        time_s = math.ceil(resources.time.seconds * factor / 60) * 60
        why = f"x{factor:g} after {_times(timeouts, 'timeout')}"
        if spec.on_timeout.max is not None and time_s > spec.on_timeout.max.seconds:
            time_s, why = spec.on_timeout.max.seconds, f"{why}, at max {spec.on_timeout.max.text}"
        said.append(f"time {Duration(time_s).text} ({why})")
    if not said:
        return None
    return Raised(memory_mb=memory_mb, time_s=time_s, words=" and ".join(said))


def raised_resources(resources: RunResources, raise_: Raised) -> RunResources:
    """The resources a retry asks for: the declared ones with the raised values."""
    if raise_.memory_mb is not None:
        resources = with_memory(resources, raise_.memory_mb)
    if raise_.time_s is not None:
        resources = resources.model_copy(update={"time": Duration(raise_.time_s)})
    return resources


def with_memory(resources: RunResources, mebibytes: int) -> RunResources:
    return resources.model_copy(update={"memory": Memory(mebibytes * 2**20, mib_text(mebibytes))})


def mib_text(mebibytes: int) -> str:
    """`2GiB`, `1536MiB`."""
    return f"{mebibytes // 1024}GiB" if mebibytes % 1024 == 0 else f"{mebibytes}MiB"


def _largest_fitting(resources: RunResources, low: int, high: int, fit: Fit) -> int:
    """The most memory between ``low`` (fits, or the run would not have run) and ``high``
    (does not) that a node holds, to the MiB."""
    while high - low > 1:
        middle = (low + high) // 2
        if fit.why_not(with_memory(resources, middle)) is None:
            low = middle
        else:
            high = middle
    return low


def _times(count: int, what: str) -> str:
    return what if count == 1 else f"{count} times {what}"
