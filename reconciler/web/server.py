"""Serving the application with uvicorn: on a socket bound here, stopping promptly."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType

import uvicorn
from starlette.applications import Starlette

from reconciler.errors import ReconError

_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def run_server(
    app: Starlette,
    host: str,
    port: int,
    on_listening: Callable[[], None],
    on_exit: Callable[[], None],
) -> None:
    """Serve until SIGINT or SIGTERM. The socket is bound here, so a port in use is a
    plain error, not uvicorn's own exit; `on_listening` runs once it is bound,
    `on_exit` first thing on the signal."""
    shown = f"[{host}]" if ":" in host else host
    try:
        listening = socket.create_server(
            (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET
        )
    except OSError as error:
        why = os.strerror(error.errno) if error.errno else str(error)
        raise ReconError(f"cannot listen on {shown}:{port}: {why} (another --port?)") from None
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, timeout_graceful_shutdown=5, lifespan="on"
    )
    on_listening()
    with listening:
        _Server(config, on_exit).run(sockets=[listening])


class _Server(uvicorn.Server):
    """uvicorn's server, which on SIGINT or SIGTERM also ends the open event streams at
    once (they would hold the shutdown until its timeout), and then returns: recon
    exits 0, as `recon watch` does, where uvicorn would raise the signal again."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        if threading.current_thread() is not threading.main_thread():
            yield  # signals reach the main thread only
            return
        before = {sig: signal.signal(sig, self.handle_exit) for sig in _SIGNALS}
        try:
            yield
        finally:
            for sig, handler in before.items():
                signal.signal(sig, handler)

    def __init__(self, config: uvicorn.Config, on_exit: Callable[[], None]) -> None:
        super().__init__(config)
        self._on_exit = on_exit

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        self._on_exit()
        super().handle_exit(sig, frame)
