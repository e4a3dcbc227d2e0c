"""One look at the cluster per interval, shared by every browser.

A single background thread calls the read-only pipeline, at most once per interval, and
keeps the newest snapshot; pages and event streams only read it. A look that fails keeps
the last good snapshot and says why, so a flaky sacct shows as a notice, not an empty page.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

from reconciler.engine.reconcile import Look
from reconciler.errors import ReconError
from reconciler.web.snapshot import Snapshot, snapshot_of

Clock = Callable[[], datetime]


@dataclass(frozen=True)
class Seen:
    """What the poller holds: the newest snapshot, the last error, and a version that
    moves whenever either changes (an event stream sends it)."""

    version: int
    snapshot: Snapshot | None
    error: str | None
    looks: int  # how many times the cluster was looked at: one per interval at most


class Poller:
    def __init__(
        self,
        look: Callable[[], Look],
        interval: float,
        *,
        graph_limit: int,
        clock: Clock = lambda: datetime.now(UTC),
    ) -> None:
        self._look = look
        self._graph_limit = graph_limit
        self._interval = interval
        self._clock = clock
        self._lock = threading.Condition()
        self._seen = Seen(0, None, None, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recon-serve-poller", daemon=True)

    @property
    def interval(self) -> float:
        return self._interval

    def start(self) -> None:
        self._thread.start()

    def halt(self) -> None:
        """Ask the thread to stop after its current look, and end event streams; does
        not wait (a signal handler calls it)."""
        self._stop.set()

    def stop(self) -> None:
        """Halt, and wait for a look under way to end."""
        self.halt()
        with self._lock:
            self._lock.notify_all()
        if self._thread.is_alive():
            self._thread.join(timeout=30)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def seen(self) -> Seen:
        with self._lock:
            return self._seen

    def wait_for_change(self, version: int, timeout: float) -> Seen:
        """The newest state once its version differs from `version`, or after `timeout`
        seconds. Blocking: an event stream calls it from a worker thread."""
        with self._lock:
            self._lock.wait_for(
                lambda: self._seen.version != version or self._stop.is_set(), timeout
            )
            return self._seen

    def poll_once(self) -> None:
        """One look, kept; the poller's thread calls it each interval."""
        looks = self._seen.looks + 1
        try:
            snapshot: Snapshot | None = snapshot_of(self._look(), self._clock(), self._graph_limit)
            error = None
        except ReconError as problem:
            snapshot, error = None, str(problem)
        except Exception as problem:  # a bug: shown, and the next poll still runs
            snapshot, error = None, f"{type(problem).__name__}: {problem}"
        with self._lock:
            before = self._seen
            kept = snapshot if snapshot is not None else before.snapshot
            # The version moves only when what a page shows moved: browsers refetch then.
            changed = error != before.error or _shown(kept) != _shown(before.snapshot)
            self._seen = Seen(before.version + changed, kept, error, looks)
            self._lock.notify_all()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.poll_once()
            self._stop.wait(self._interval)


def _shown(snapshot: Snapshot | None) -> object:
    if snapshot is None:
        return None
    summary = snapshot.summary()
    summary.pop("observed_at")
    return summary
