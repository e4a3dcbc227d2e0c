"""Which Slurm command failures are worth retrying, told apart by Slurm's own words. Pure.

Slurm's client commands exit 1 for nearly everything, so the message is all there is.
A failure is transient only when Slurm says it could not be reached or was too busy;
anything else is Slurm refusing the request itself, and retrying would only repeat it.
"""

from __future__ import annotations

import subprocess

from reconciler.errors import PermanentSchedulerError, TransientSchedulerError

TRANSIENT_MARKERS: tuple[str, ...] = (
    "socket timed out",
    "unable to contact slurm controller",
    "temporarily unable to accept job",
    "resource temporarily unavailable",
    "transient",
    "communication connection failure",
    "zero bytes were transmitted or received",
    "timed out after",  # the runner's own timeout
)

# scancel's words for a job that is already over or already forgotten: cancel is then done.
GONE_MARKERS: tuple[str, ...] = (
    "invalid job id specified",
    "already completing or completed",
)


def failure(
    result: subprocess.CompletedProcess[str],
) -> TransientSchedulerError | PermanentSchedulerError:
    """The error a failed command stands for, carrying Slurm's own message."""
    command = result.args[0] if isinstance(result.args, list) and result.args else "slurm"
    message = message_of(result)
    text = f"{command} failed (exit {result.returncode}): {message}"
    lowered = message.lower()
    if any(marker in lowered for marker in TRANSIENT_MARKERS):
        return TransientSchedulerError(text)
    return PermanentSchedulerError(text)


def is_gone(result: subprocess.CompletedProcess[str]) -> bool:
    """True when scancel failed only because the job is already over or unknown."""
    lowered = message_of(result).lower()
    return any(marker in lowered for marker in GONE_MARKERS)


def message_of(result: subprocess.CompletedProcess[str]) -> str:
    """Slurm's message: stderr's lines joined, or stdout's when stderr is empty."""
    text = result.stderr.strip() or result.stdout.strip() or "no message"
    return " / ".join(line.strip() for line in text.splitlines() if line.strip())
