"""One dispatch pass: start the waiting jobs that may start, cancel those that never can.

There is no dispatcher daemon. A waiting job can only become startable when something
else changes, and every such change is made by a process that runs a pass right after,
under the same lock: ``submit`` (a new job), a supervisor recording its job's end (CPUs
free, a dependency met or failed), ``cancel`` (CPUs free soon, dependents doomed). A
supervisor that dies without recording (SIGKILL, OOM) runs no pass, so ``observe`` runs
one too whenever what it reads says a job should start or be cancelled: the next recon
pass heals it, level-based, as everything else in recon. Nothing waits or polls while
jobs merely wait, and no process is left behind when all jobs are done.
"""

from __future__ import annotations

import os
import subprocess
from datetime import UTC, datetime

from reconciler.scheduler.local.decide import (
    NEVER_SATISFIED,
    NO_GRANT,
    Assessment,
    Cancel,
    Grant,
    assess,
)
from reconciler.scheduler.local.processes import spawn_supervisor
from reconciler.scheduler.local.store import Store, machine_cores


def dispatch(store: Store, *, blocking: bool = True) -> Assessment | None:
    """A pass under the store's lock; None when not ``blocking`` and another holds it (that
    process is in a pass already, or about to run one)."""
    with store.locked(blocking=blocking) as held:
        return dispatch_locked(store) if held else None


def dispatch_locked(store: Store) -> Assessment:
    """A pass by a caller that holds the store's lock."""
    snapshot = store.snapshot(store.active_ids())
    # The cores are this process's: a supervisor's are the recon's that started it.
    assessment = assess(snapshot.facts, store.total_cpus(), store.gpus(), machine_cores())
    now = datetime.now(UTC)
    for job_id, facts in snapshot.facts.items():
        if facts.final:
            store.retire(job_id)  # left active by a crash between its ending and retiring
    for job_id in assessment.cancel:
        store.write_cancelled(job_id, Cancel(now, None, NEVER_SATISFIED))
    for job_id in assessment.start:
        _start(store, job_id, now, assessment.grants.get(job_id, NO_GRANT))
    return assessment


def _start(store: Store, job_id: int, now: datetime, grant: Grant) -> None:
    # The alive lock is taken before started.json exists, so nobody who sees the job
    # started can find its lock free before the supervisor is gone.
    alive = store.hold_alive(job_id)
    try:
        store.write_started(job_id, now, grant)
        log = store.job_dir(job_id) / "supervisor.log"
        try:
            spawn_supervisor(store.root, job_id, alive, log)
        except (OSError, subprocess.SubprocessError) as error:
            import traceback  # only here: supervisors run passes and start up often

            # Recorded where a person looks; the job reads as lost (NODE_FAIL) once the
            # lock is closed below, which is what it is.
            with open(log, "a") as stream:
                stream.write(f"could not start the supervisor: {error}\n")
                traceback.print_exc(file=stream)
    finally:
        os.close(alive)
