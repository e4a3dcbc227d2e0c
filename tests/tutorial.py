"""docs/tutorial.md, followed as a reader would: every block in order, from an empty folder.

A block whose first line is `# <path>` is a file the reader writes: it is written there,
whole. A console block's commands are run in turn in the folder the reader is in (a
`cd` moves it): `recon` as this checkout's, anything else (git, sed, cat) by bash. What
each prints, stdout and stderr interleaved as at a terminal, is compared with what the
page shows under it, masked as the other doc tests mask (tests/docs.py): commit ids and
times, and for `apply --wait` the progress lines before the last and the pass's number.
Every command must succeed. `recon serve` is started on a free port (the page's is
8470), its first line compared, the page fetched, then it is stopped with Ctrl-C.

The block after `<!-- doc-test: on slurm -->` is the step to a real cluster. On Slurm
(tests/integration/test_doc_tutorial.py) it runs as shown; on the local backend
(tests/local/test_doc_tutorial.py) it runs with RECON_SCHEDULER=local, and the plan's
header naming the scheduler is the one difference allowed.
"""

from __future__ import annotations

import http.client
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from tests.docs import ROOT, Fence, fences, matches, typed, wait_output

TUTORIAL = ROOT / "docs" / "tutorial.md"
ON_SLURM = "<!-- doc-test: on slurm -->"
SERVE_PORT = 8470  # the one the page shows


@dataclass(frozen=True)
class Step:
    where: str  # docs/tutorial.md:LINE
    file: str | None  # a file to write, or None: a command to run
    text: str  # the file's body, or the command
    shown: str  # what the page shows the command printing ("" for a file)
    on_slurm: bool


def steps() -> list[Step]:
    """The page's blocks as the reader's steps, in order; a block that is neither a file
    nor a console block is an error (the page would show something no test runs)."""
    found: list[Step] = []
    for fence in fences(TUTORIAL):
        first = fence.body.split("\n", 1)[0]
        if fence.lang == "console":
            on_slurm = fence.preceded_by == ON_SLURM
            found += [
                Step(f"{fence.file}:{item.line}", None, item.command, item.output, on_slurm)
                for item in typed(fence)
            ]
        elif first.startswith("# ") and len(first.split()) >= 2:
            path = first.split()[1].rstrip(":")
            found.append(Step(fence.where, path, fence.body, "", on_slurm=False))
        else:
            raise AssertionError(f"{fence.where}: neither a file (`# path`) nor a console block")
    return found


def file_blocks() -> list[Fence]:
    return [fence for fence in fences(TUTORIAL) if fence.lang != "console"]


class Reader:
    """Someone following the page in ``home``; ``slurm``: the machine has Slurm and the
    step to it is taken for real."""

    def __init__(self, home: Path, slurm: bool) -> None:
        self.cwd = home
        self.slurm = slurm
        self.marker = home / ".reader-cwd"  # where a shell command left the reader
        self.env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PYTHONUNBUFFERED": "1",  # stdout and stderr in the order they were written
            "COLUMNS": "80",
            "LC_ALL": "C.UTF-8",
            "GIT_AUTHOR_NAME": "Ana",
            "GIT_AUTHOR_EMAIL": "ana@example.org",
            "GIT_COMMITTER_NAME": "Ana",
            "GIT_COMMITTER_EMAIL": "ana@example.org",
        }
        self.env.pop("RECON_SCHEDULER", None)

    def take(self, step: Step) -> None:
        if step.file is not None:
            (self.cwd / step.file).parent.mkdir(parents=True, exist_ok=True)
            (self.cwd / step.file).write_text(step.text)
            return
        env = dict(self.env)
        if step.on_slurm and not self.slurm:
            env["RECON_SCHEDULER"] = "local"
        if step.text.split()[:2] == ["recon", "serve"]:
            printed = self._serve(step, env)
        else:
            printed = self._run(step, env)
        shown = step.shown
        if step.on_slurm and not self.slurm:
            shown = shown.replace("(scheduler: slurm)", "(scheduler: local)")
        if "--wait" in step.text:
            printed, shown = wait_output(printed, self.cwd), wait_output(shown, self.cwd)
        assert matches(printed, shown), f"{step.where}: `{step.text}` prints\n{printed}"

    def _run(self, step: Step, env: dict[str, str]) -> str:
        here = self.marker
        if step.text.split()[0] == "recon":
            command = [sys.executable, "-m", "reconciler", *shlex.split(step.text)[1:]]
        else:  # the shell's own, in the reader's folder; where it ends up is kept
            command = ["bash", "-c", f"{step.text} && pwd > {shlex.quote(str(here))}"]
        done = subprocess.run(
            command,
            cwd=self.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, f"{step.where}: `{step.text}` failed:\n{done.stdout}"
        if command[0] == "bash":
            self.cwd = Path(here.read_text().strip())
        return done.stdout

    def _serve(self, step: Step, env: dict[str, str]) -> str:
        """Its first line, with the port it took shown as the page's; the page answers."""
        port = _free_port()
        args = [*shlex.split(step.text)[1:], "--port", str(port)]
        server = subprocess.Popen(
            [sys.executable, "-m", "reconciler", *args],
            cwd=self.cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            assert server.stdout is not None
            first = server.stdout.readline()
            page = _fetched(port)
            assert "<html" in page, f"{step.where}: the page is\n{page}"
        finally:
            server.send_signal(signal.SIGINT)
            server.communicate(timeout=60)
        return first.replace(f"127.0.0.1:{port}/", f"127.0.0.1:{SERVE_PORT}/")


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _fetched(port: int, timeout: float = 60) -> str:
    """The page at / (straight to the port: no proxy the environment names)."""
    deadline = time.monotonic() + timeout
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        try:
            connection.request("GET", "/")
            return connection.getresponse().read().decode()
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
        finally:
            connection.close()


def follow(home: Path, slurm: bool) -> list[Step]:
    """Every step of the page, taken in ``home``; the steps."""
    reader = Reader(home, slurm)
    taken = steps()
    for step in taken:
        reader.take(step)
    return taken
