"""`recon watch --metrics-addr`: Prometheus metrics of the watch service.

What an operator alerts on: whether passes succeed (and how long since one did), how
long they take, what they submit, cancel and tear down, whether the cluster could be
observed, how the runs stand (a gauge per sync status and health, as the last good
pass saw them), and the GPU-hours and CPU-hours jobs held, counted as they end, by
outcome. Served by prometheus_client's own small HTTP server, in a thread, from a
registry of recon's alone (no process or platform collectors mixed in).

An example alert, in docs/operations.md: no successful pass in 10 minutes,

    recon_watch_seconds_since_last_success > 600
"""

from __future__ import annotations

import time
from collections import Counter as Tally
from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from reconciler.engine.ledger.cost import OUTCOMES, hours_by_outcome
from reconciler.engine.ledger.status import run_statuses
from reconciler.engine.plan.guards import BudgetGuard
from reconciler.engine.plan.holds import Hold
from reconciler.engine.watch import PassReport, PassResult
from reconciler.errors import ObservationError

_GUARDS = ("prune", "budget")


def _guard_of(hold: Hold) -> str:
    return "budget" if isinstance(hold, BudgetGuard) else "prune"


# Passes take from a fraction of a second (nothing to do) to minutes (sacct slow).
_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


class WatchMetrics:
    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._clock = clock
        self._started = clock()
        self._last_success: float | None = None
        into = self.registry
        self.pass_seconds = Histogram(
            "recon_watch_pass_duration_seconds",
            "How long each pass took, from loading the specs to the last scheduler call.",
            buckets=_BUCKETS,
            registry=into,
        )
        self.passes = Counter(
            "recon_watch_passes",
            "Passes by how they ended: ok, spec_error (the commit's specs are bad), retry "
            "(a transient error, backed off) or crashed (an unforeseen error).",
            ["result"],
            registry=into,
        )
        for result in PassResult:
            self.passes.labels(result.value)  # every result shows, at 0 until it happens
        self.runs = Gauge(
            "recon_runs",
            "Runs by sync status and health (none: no job yet), as the last good pass saw.",
            ["sync", "health"],
            registry=into,
        )
        self.submissions = Counter("recon_watch_submissions", "Jobs submitted.", registry=into)
        self.cancels = Counter(
            "recon_watch_cancels", "Jobs cancelled (replaced, removed, torn down).", registry=into
        )
        self.teardowns = Counter(
            "recon_watch_teardowns",
            "Jobs torn down (a coupled run's partner ended).",
            registry=into,
        )
        self.gpu_hours = Counter(
            "recon_gpu_hours",
            "GPU-hours held by the project's jobs as they ended (sacct's AllocTRES times "
            "ElapsedRaw), by outcome: succeeded, failed, cancelled (torn down, pruned, "
            "replaced), alloc_idle and alloc_work (an allocation's time with and without a "
            "step running).",
            ["outcome"],
            registry=into,
        )
        self.cpu_hours = Counter(
            "recon_cpu_hours",
            "CPU-hours held by the project's jobs as they ended, by outcome (as recon_gpu_hours).",
            ["outcome"],
            registry=into,
        )
        for outcome in OUTCOMES:  # every outcome shows, at 0 until a job ends so
            self.gpu_hours.labels(outcome)
            self.cpu_hours.labels(outcome)
        self.held = Gauge(
            "recon_held",
            "1 while the last good pass was held, by the guard that held it (prune: its "
            "prunes look like an accident; budget: over recon.yaml's GPU-hour budget), and "
            "carried out nothing; 0 otherwise.",
            ["guard"],
            registry=into,
        )
        for guard in _GUARDS:
            self.held.labels(guard)
        self.suspended = Gauge(
            "recon_suspended_actions",
            "Actions the last good pass planned and did not carry out because what they "
            "concern is suspended (`suspend: true`).",
            registry=into,
        )
        self.observation_failures = Counter(
            "recon_watch_observation_failures",
            "Passes that could not observe the cluster, or saw it only in part.",
            registry=into,
        )
        self.last_success = Gauge(
            "recon_watch_last_success_timestamp_seconds",
            "When the last successful pass ended (Unix time); 0 before the first.",
            registry=into,
        )
        since = Gauge(
            "recon_watch_seconds_since_last_success",
            "Seconds since the last successful pass ended (since the start, before one).",
            registry=into,
        )
        since.set_function(self._since_success)

    def _since_success(self) -> float:
        return self._clock() - (self._last_success or self._started)

    def record(self, report: PassReport) -> None:
        """One pass: WatchLoop's `on_pass`."""
        self.pass_seconds.observe(report.seconds)
        self.passes.labels(report.result.value).inc()
        if isinstance(report.error, ObservationError):
            self.observation_failures.inc()
        outcome = report.outcome
        if outcome is None:
            return
        if not outcome.plan.observation_complete:
            self.observation_failures.inc()
        applied = outcome.applied
        if applied is not None:
            self.submissions.inc(len(applied.submitted))
            self.cancels.inc(len(applied.cancelled))
            self.teardowns.inc(len(applied.torn_down))
        for guard in _GUARDS:
            self.held.labels(guard).set(0)
        if outcome.held is not None:
            self.held.labels(_guard_of(outcome.held)).set(1)
        self.suspended.set(len([a for a in outcome.plan.actions if a.suspended]))
        look = outcome.look
        for ending in look.endings:  # settled this pass: each job counted once, as it ends
            usage = ending.usage
            if usage is None or ending.job.tag.kind not in ("run", "alloc"):
                continue
            kind, job_id = ending.job.tag.kind, ending.job.job_id
            for name, (gpu_h, cpu_h) in hours_by_outcome(
                kind, job_id, ending.health, usage
            ).items():
                self.gpu_hours.labels(name).inc(max(gpu_h, 0.0))
                self.cpu_hours.labels(name).inc(max(cpu_h, 0.0))
        rows = run_statuses(look.desired, look.plan, look.observation, look.records)
        tally = Tally((row.sync.value, row.health.value if row.health else "none") for row in rows)
        self.runs.clear()  # a run that left, or moved on, is not counted where it was
        for (sync, health), count in tally.items():
            self.runs.labels(sync, health).set(count)
        self._last_success = self._clock()
        self.last_success.set(self._last_success)

    def serve(self, host: str, port: int) -> Callable[[], None]:
        """Serve /metrics on host:port in a thread; returns what stops it."""
        server, thread = start_http_server(port, addr=host, registry=self.registry)

        def stop() -> None:
            server.shutdown()
            server.server_close()
            thread.join(timeout=10)

        return stop
