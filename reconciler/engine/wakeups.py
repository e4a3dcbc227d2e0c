"""What wakes `recon watch` up: ref changes seen by watchfiles, signals, or the timer.

Everything that can wake the loop puts a `Wake` into one `queue.SimpleQueue`, and the loop
sleeps in `get(timeout=...)`. SimpleQueue because its `put` is reentrant: a signal handler
may call it while the main thread is inside `get`, where a `threading.Event.set` could
deadlock on the event's own lock.
"""

from __future__ import annotations

import queue
import signal
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import watchfiles

from reconciler.engine.watch import Wake

# How often watchfiles looks at the file events it has gathered: a change is handed over
# one step after the step that saw it, so a lone commit is noticed within 2 steps. An idle
# watch spends about 0.2% of a core on it (0.02% at 200 ms, which took 0.2-0.4 s).
STEP_MS = 20
# How long the branch's refs must stay quiet before their changes count. One commit writes
# one ref (git writes a lock file and renames it over the ref; the reflog is elsewhere),
# and the commits of a script, an `am` or a cherry-pick of a range follow each other at
# 20-70 ms on a loaded 2-core machine: each burst of them is one wake-up, the pass then
# plans the last commit only, and no job is submitted for a commit already replaced.
QUIET_MS = 100
# The longest a stream of changes (a rebase, a fetch of many branches) is grouped.
DEBOUNCE_MS = 1_600


@dataclass
class RefBurst:
    """Ref changes grouped into one wake-up: `settled` once none came for `quiet` seconds,
    or `longest` seconds after the first of them (a stream that never pauses still wakes
    the loop). Told the time by its caller: tested with plain numbers.

    Timed here, not by watchfiles' own debounce: that waits for a step that adds no new
    (change, path) pair, and a second commit rewrites the same ref, adding none, so a
    burst was handed over in pieces, and a lone commit only after 200-400 ms."""

    quiet: float = (QUIET_MS - STEP_MS) / 1000  # timed from the hand-over, a step late
    longest: float = DEBOUNCE_MS / 1000
    first: float | None = None
    last: float | None = None

    def changed(self, now: float) -> None:
        if self.first is None:
            self.first = now
        self.last = now

    def settled(self, now: float) -> bool:
        """Whether the burst is over at `now` (and then a new one starts)."""
        if self.first is None or self.last is None:
            return False
        if now - self.last < self.quiet and now - self.first < self.longest:
            return False
        self.first = self.last = None
        return True


class WakeQueue:
    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Wake] = queue.SimpleQueue()

    def put(self, wake: Wake) -> None:
        self._queue.put(wake)

    def wait(self, timeout: float) -> Wake:
        """The strongest reason to wake among those queued by the end of `timeout`:
        STOP over REFS over TIMER."""
        try:
            first = self._queue.get(timeout=timeout) if timeout > 0 else self._queue.get_nowait()
        except queue.Empty:
            return Wake.TIMER
        seen = {first}
        while True:
            try:
                seen.add(self._queue.get_nowait())
            except queue.Empty:
                break
        return Wake.STOP if Wake.STOP in seen else Wake.REFS if Wake.REFS in seen else Wake.TIMER

    def stop_on_signals(self, signals: Iterable[signal.Signals]) -> None:
        """Turn these signals into a STOP wake-up instead of an exception, so that a
        pass is never interrupted half-way (say between sbatch and the journal write)."""

        def handler(_signum: int, _frame: FrameType | None) -> None:
            self.put(Wake.STOP)

        for number in signals:
            signal.signal(number, handler)


class RefWatcher:
    """A daemon thread that puts REFS on the queue whenever a watched ref file changes.

    The loop stays level-based: if this thread fails (inotify limits, a folder removed)
    it logs why through `on_error` and the timer passes carry on alone.
    """

    def __init__(
        self,
        dirs: list[Path],
        is_ref_change: Callable[[str], bool],
        wakeups: WakeQueue,
        on_error: Callable[[Exception], None],
    ) -> None:
        self._dirs = dirs
        self._is_ref_change = is_ref_change
        self._wakeups = wakeups
        self._on_error = on_error
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="recon-ref-watcher", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        burst = RefBurst()
        try:
            # watchfiles hands over each step's changes a step after they came, and an
            # empty set once none came since: the burst's quiet is timed here, at each.
            # Unfiltered, so that other files changing (the index, again and again)
            # never hide that time.
            for changes in watchfiles.watch(
                *self._dirs,
                watch_filter=None,
                recursive=False,  # refs/heads/<branch's folder> is named itself
                step=STEP_MS,
                debounce=QUIET_MS,
                rust_timeout=QUIET_MS - STEP_MS,
                yield_on_timeout=True,
                stop_event=self._stop,
                raise_interrupt=False,
            ):
                now = time.monotonic()
                if any(self._is_ref_change(path) for _change, path in changes):
                    burst.changed(now)
                if burst.settled(now):
                    self._wakeups.put(Wake.REFS)
        except Exception as error:  # any failure here only costs latency: the timer goes on
            self._on_error(error)
