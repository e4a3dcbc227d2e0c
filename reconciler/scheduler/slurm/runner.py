"""The one place recon runs a Slurm command; tests swap it for a recording fake."""

from __future__ import annotations

import locale
import os
import select
import selectors
import shutil
import subprocess
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

TIMEOUT_SECONDS = 60.0
# Exit statuses the shell uses, so a missing or hung command reads like any other failure.
NOT_FOUND = 127
TIMED_OUT = 124


class Runner(Protocol):
    def __call__(
        self, argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> subprocess.CompletedProcess[str]: ...


def run(
    argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` and return what it did; never raises for the command's own failures.

    ``env``: the command's whole environment (sbatch's is the job's: ``scheduler/jobenv``);
    by default the caller's, less what would change a command behind recon's back."""
    if env is not None:
        # Found on recon's own PATH: the command's (the job's clean one) may not hold it.
        argv = [shutil.which(argv[0]) or argv[0], *argv[1:]]
    env = {
        **(_own_environment(os.environ) if env is None else env),
        "SLURM_TIME_FORMAT": "standard",
    }
    try:
        process = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL if stdin is None else subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
        )
    except FileNotFoundError as error:
        return subprocess.CompletedProcess(list(argv), NOT_FOUND, "", f"{argv[0]}: {error}")
    with process:
        deadline = time.monotonic() + TIMEOUT_SECONDS
        try:
            out, err = _exchange(process, stdin, deadline)
            returncode = _exit_of(process, deadline)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            message = f"{argv[0]}: timed out after {TIMEOUT_SECONDS:.0f} s"
            return subprocess.CompletedProcess(list(argv), TIMED_OUT, "", message)
        except BaseException:  # Ctrl-C: the command is not left behind
            process.kill()
            process.wait()
            raise
    return subprocess.CompletedProcess(list(argv), returncode, _text(out), _text(err))


def _exchange(
    process: subprocess.Popen[bytes], stdin: str | None, deadline: float
) -> tuple[bytes, bytes]:
    """Write ``stdin`` to ``process`` and read its stdout and stderr to their end, by
    ``deadline`` (``time.monotonic``) or raise TimeoutExpired."""
    assert process.stdout is not None and process.stderr is not None
    chunks: dict[int, list[bytes]] = {process.stdout.fileno(): [], process.stderr.fileno(): []}
    pending = memoryview(stdin.encode(_ENCODING)) if stdin is not None else memoryview(b"")
    with selectors.DefaultSelector() as selector:
        if process.stdin is not None:
            if pending:
                selector.register(process.stdin, selectors.EVENT_WRITE)
            else:
                process.stdin.close()
        selector.register(process.stdout, selectors.EVENT_READ)
        selector.register(process.stderr, selectors.EVENT_READ)
        while selector.get_map():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise subprocess.TimeoutExpired(process.args, TIMEOUT_SECONDS)
            for key, _events in selector.select(remaining):
                if key.fileobj is process.stdin:
                    try:
                        pending = pending[os.write(key.fd, pending[:_PIPE_CHUNK]) :]
                    except BrokenPipeError:  # it stopped reading: what it said still counts
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(key.fileobj)
                        process.stdin.close()
                    continue
                data = os.read(key.fd, 32768)
                if data:
                    chunks[key.fd].append(data)
                else:
                    selector.unregister(key.fileobj)
    out, err = chunks.values()
    return b"".join(out), b"".join(err)


def _exit_of(process: subprocess.Popen[bytes], deadline: float) -> int:
    """The exit status of ``process``, whose pipes are closed, by ``deadline``.

    Its exit is awaited on a pidfd: ``Popen.wait(timeout)``, as ``subprocess.run`` uses
    it, polls instead, sleeping 1 ms, 2 ms, 4 ms...: about 0.7 ms a command on average,
    1.4 s of 2,000 sbatch calls."""
    if process.poll() is not None:
        return process.returncode
    try:
        pidfd = os.pidfd_open(process.pid)
    except (AttributeError, OSError):  # not Linux 5.3+
        return process.wait(deadline - time.monotonic())
    try:
        remaining = max(0.0, deadline - time.monotonic())
        if not select.select([pidfd], [], [], remaining)[0]:
            raise subprocess.TimeoutExpired(process.args, TIMEOUT_SECONDS)
    finally:
        os.close(pidfd)
    return process.wait()


_ENCODING = locale.getpreferredencoding(False)  # what text=True uses
_PIPE_CHUNK = 512  # what a pipe ready for writing takes without blocking (PIPE_BUF)


def _text(data: bytes) -> str:
    """Bytes as ``subprocess.run(text=True)`` would give them: the locale's encoding,
    universal newlines."""
    text = data.decode(_ENCODING)
    return text.replace("\r\n", "\n").replace("\r", "\n")


class Process(Protocol):
    """A command started and left running: whether it has exited, and how."""

    def poll(self) -> int | None: ...


class Spawner(Protocol):
    def __call__(
        self, argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None
    ) -> Process: ...


def spawn_detached(argv: Sequence[str], log: Path, env: Mapping[str, str] | None = None) -> Process:
    """Start ``argv`` in a session of its own, output appended to ``log``, and return at
    once: it outlives recon, its terminal and its process group (a step's srun must live
    as long as the step). Raises OSError when it cannot be started.

    ``env``: the step's environment (``scheduler/jobenv``), which srun hands the step;
    by default recon's own, less Slurm's input variables."""
    log.parent.mkdir(parents=True, exist_ok=True)
    if env is not None:
        argv = [shutil.which(argv[0]) or argv[0], *argv[1:]]
    with log.open("ab") as out:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env=_step_environment(os.environ) if env is None else dict(env),
        )


def _step_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """A step's environment: recon's, minus Slurm's input variables (``SLURM_NTASKS``,
    ``SLURM_CPUS_PER_TASK``... left by a job recon itself runs in would reshape the step).
    ``SLURM_CONF`` stays: it says where the cluster is."""
    return {
        key: value
        for key, value in _own_environment(environ).items()
        if not key.startswith(("SLURM_", "SRUN_")) or key == "SLURM_CONF"
    }


def _own_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """The caller's environment minus what would change a command behind recon's back.

    ``SBATCH_*`` and ``SALLOC_*`` outrank a script's ``#SBATCH`` lines (a stray
    ``SBATCH_PARTITION`` would move every job), so the rendered script, which the spec
    hash covers, must be the only source of options. ``SLURM_TIME_FORMAT`` is pinned by
    the caller: another format would break the parsers.
    """
    return {
        key: value for key, value in environ.items() if not key.startswith(("SBATCH_", "SALLOC_"))
    }
