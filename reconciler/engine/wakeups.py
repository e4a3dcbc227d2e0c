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
from collections.abc import Callable, Iterable
from pathlib import Path
from types import FrameType

import watchfiles

from reconciler.engine.watch import Wake

# How long the ref files must stay quiet before a change counts: git writes a lock file,
# renames it over the ref, then writes the reflog; one commit is one wake-up.
QUIET_MS = 200
# The longest a stream of changes (a rebase, a fetch of many branches) is grouped.
DEBOUNCE_MS = 1_600


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
        try:
            for _changes in watchfiles.watch(
                *self._dirs,
                watch_filter=lambda _change, path: self._is_ref_change(path),
                recursive=False,  # refs/heads/<branch's folder> is named itself
                step=QUIET_MS,
                debounce=DEBOUNCE_MS,
                stop_event=self._stop,
                raise_interrupt=False,
            ):
                self._wakeups.put(Wake.REFS)
        except Exception as error:  # any failure here only costs latency: the timer goes on
            self._on_error(error)
