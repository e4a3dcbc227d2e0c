"""Test doubles for the one seam the Slurm adapter runs commands through (``runner.Runner``),
shipped beside it, as httpx ships ``MockTransport``: tests hand ``SlurmScheduler`` a real
object with the runner's signature instead of patching ``subprocess``.

- ``ScriptedRunner`` answers each command by its name from scripted results, records
  every call, and fails the test on a command nothing was scripted for.
- ``RecordingRunner`` runs the real commands (or those of another runner), records them,
  and can make one command fail, to drive the adapter on a real cluster into a corner.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Mapping, Sequence

from reconciler.scheduler.slurm.runner import Runner, run

Result = subprocess.CompletedProcess[str]
Answer = Result | Callable[[Sequence[str], str | None], Result]


def ok(stdout: str = "", stderr: str = "") -> Result:
    """A command that succeeded and printed ``stdout`` (and ``stderr``)."""
    return subprocess.CompletedProcess([], 0, stdout, stderr)


def failed(stderr: str, code: int = 1) -> Result:
    """A command that failed with ``stderr``."""
    return subprocess.CompletedProcess([], code, "", stderr)


class ScriptedRunner:
    """Answers each command by its name (``squeue=[ok(...), ...]``) from a queue of results
    or callables; the last answer repeats. A command with nothing scripted raises
    AssertionError: it must not have been called."""

    def __init__(self, **answers: list[Answer]) -> None:
        self.answers = answers
        self.calls: list[tuple[list[str], str | None]] = []
        self.environments: list[Mapping[str, str] | None] = []  # each call's env

    def __call__(
        self, argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> Result:
        self.calls.append((list(argv), stdin))
        self.environments.append(env)
        queue = self.answers.get(argv[0])
        if not queue:
            raise AssertionError(f"{argv[0]} must not be called here: {list(argv)}")
        answer = queue.pop(0) if len(queue) > 1 else queue[0]
        result = answer(argv, stdin) if callable(answer) else answer
        return subprocess.CompletedProcess(
            list(argv), result.returncode, result.stdout, result.stderr
        )

    def commands(self) -> list[str]:
        """The names of the commands run, in order."""
        return [argv[0] for argv, _ in self.calls]


class RecordingRunner:
    """The real runner (or ``inner``), remembering each command line and each command's
    last output; a command named in ``fail`` is not run and fails with that message."""

    def __init__(self, fail: dict[str, str] | None = None, inner: Runner = run) -> None:
        self.fail = fail or {}
        self.inner = inner
        self.calls: list[list[str]] = []
        self.stdout: dict[str, str] = {}

    def __call__(
        self, argv: Sequence[str], stdin: str | None = None, env: Mapping[str, str] | None = None
    ) -> Result:
        self.calls.append(list(argv))
        if argv[0] in self.fail:
            return subprocess.CompletedProcess(list(argv), 1, "", self.fail[argv[0]])
        result = self.inner(argv, stdin) if env is None else self.inner(argv, stdin, env)
        self.stdout[argv[0]] = result.stdout
        return result

    def commands(self) -> list[str]:
        """The names of the commands run, in order."""
        return [argv[0] for argv in self.calls]
