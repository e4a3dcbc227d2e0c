"""A real `recon serve` process on the example project, for the route and browser tests."""

from __future__ import annotations

import contextlib
import http.client
import os
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.gitrepo import GitRepo

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "repo"


def example_project(where: Path) -> Path:
    """The example project, on the local backend (its recon.yaml says so), committed in a
    fresh repo."""
    root = where / "example"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    assert "\nscheduler: local " in (root / "recon.yaml").read_text()
    GitRepo(root).commit(message="example")
    return root


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def environment(root: Path, **extra: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": str(root), "PYTHONPATH": str(ROOT), **extra}


def recon(root: Path, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        cwd=root,
        env=environment(root),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@dataclass
class Served:
    root: Path
    port: int
    process: subprocess.Popen[str] | None
    host: str = "127.0.0.1"  # the address it listens on, and the tests connect to
    output: str = ""  # what the process printed, once it stopped

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def get(
        self, path: str, headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        """The raw path as given (no client-side normalising of `..` or `%2e`)."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=30)
        try:
            connection.request("GET", path, headers=headers or {})
            response = connection.getresponse()
            return response.status, dict(response.getheaders()), response.read()
        finally:
            connection.close()


@contextlib.contextmanager
def serving(
    root: Path, *args: str, env: dict[str, str] | None = None, host: str | None = None
) -> Iterator[Served]:
    """`recon serve` on the project, until the block ends (then SIGTERM, and a kill if it
    lingers), with `--host host` when given. Waits until it answers; what it printed is
    in `output` once the block ends."""
    port = free_port()
    listen = ["--host", host] if host is not None else []
    process = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "serve", ".", "--port", str(port), *listen, *args],
        cwd=root,
        env=environment(root, **(env or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    served = Served(root, port, process, host or "127.0.0.1")
    try:
        deadline = time.monotonic() + 60
        while True:
            assert process.poll() is None, process.communicate()[0]
            try:
                with socket.create_connection((served.host, port), timeout=1):
                    break
            except OSError:
                assert time.monotonic() < deadline, "recon serve did not listen within 60 s"
                time.sleep(0.1)
        token = (env or {}).get("RECON_SERVE_TOKEN")
        auth = {"Authorization": f"Bearer {token}"} if token else {}
        while b'"project"' not in served.get("/api/state", auth)[2]:  # the first look done
            assert time.monotonic() < deadline, "recon serve did not look within 60 s"
            time.sleep(0.1)
        yield served
    finally:
        process.terminate()
        try:
            served.output = process.communicate(timeout=20)[0]
        except subprocess.TimeoutExpired:
            process.kill()
            served.output = process.communicate(timeout=10)[0]


def settle(root: Path, timeout: float = 90) -> dict[str, str | None]:
    """Wait until no run of the project is pending or running (its jobs end on their
    own on the local backend); each run's health."""
    import json

    deadline = time.monotonic() + timeout
    while True:
        status = recon(root, "status", ".", "--format", "json")
        assert status.returncode == 0, status.stdout + status.stderr
        healths = {row["name"]: row["health"] for row in json.loads(status.stdout)}
        if not set(healths.values()) & {"pending", "running"}:
            return healths
        assert time.monotonic() < deadline, healths
        time.sleep(0.5)


def artifacts() -> Path:
    """Where tests leave screenshots: $RECON_TEST_ARTIFACTS, else tests/artifacts."""
    folder = Path(os.environ.get("RECON_TEST_ARTIFACTS", ROOT / "tests" / "artifacts"))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@contextlib.contextmanager
def app_served(app: Any) -> Iterator[Served]:
    """An application built in this process, served by uvicorn in a thread: for tests
    that count what the app does."""
    import threading

    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
        time.sleep(0.05)
    try:
        yield Served(Path("."), port, None)
    finally:
        server.should_exit = True
        thread.join(timeout=30)
