"""Every error recon raises on purpose, typed by how the caller should handle it.

    ReconError                      anything recon reports without a traceback
    ├── SpecError                   the repo's YAML is wrong; carries every SpecIssue found
    │   └── NoProjectError              there is no recon.yaml at all
    ├── UnknownTarget               a run named on the command line is no run of the project
    ├── RepoError                   the repo or revision cannot be read (not a git repo, bad rev)
    ├── SchedulerError              the scheduler refused or failed a call
    │   ├── TransientSchedulerError     worth retrying (slurmctld busy or restarting)
    │   └── PermanentSchedulerError     retrying is useless (bad partition, bad gres)
    ├── ObservationError            the cluster could not be observed at all
    ├── LockedError                 another apply holds the project's lock (exit code 3)
    ├── StalePlanError              a saved plan no longer matches the commit or the cluster
    ├── PruneRefusedError           a plan's prunes would empty the project: nothing was done
    ├── PlanFileError               a plan file cannot be written, or is not a plan to apply
    ├── JournalError                the journal database is unreadable, corrupt or too new
    ├── StateDirError               the state directory cannot be made, or is someone else's
    ├── OutputError                 an output exists but cannot be read (its version unknown)
    ├── ManifestError               a provenance manifest could not be written
    ├── PathError                   a folder recon writes to cannot be made (--out, runs_dir)
    └── DevClusterError             the local dev cluster could not be brought up or down

The CLI maps each branch to an exit code in one place (``reconciler.cli``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from reconciler.words import plural


class ReconError(Exception):
    """Base of every error recon reports to the user as a message, not a traceback."""


@dataclass(frozen=True, order=True)
class SpecIssue:
    """One problem in one spec file: where it is and what to do about it."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}:{self.line}"
        field = f" {self.field}:" if self.field else ""
        return f"{where}:{field} {self.message}"


class SpecError(ReconError):
    """The desired state is invalid. Holds every issue found, not just the first."""

    def __init__(self, issues: list[SpecIssue]) -> None:
        self.issues = sorted(issues, key=lambda i: (i.file, i.line or 0, i.field, i.message))
        count = len(self.issues)
        head = f"{plural(count, 'problem')} in the specs"
        super().__init__("\n".join([head, *(f"  {issue}" for issue in self.issues)]))


class NoProjectError(SpecError):
    """The revision holds no recon.yaml: not (yet) a recon project."""


class UnknownTarget(ReconError):
    """A target names no run of the project."""


class RepoError(ReconError):
    """The git repository or the requested revision cannot be read."""


class SchedulerError(ReconError):
    """A scheduler call failed; the message is the scheduler's own where it gave one."""


class TransientSchedulerError(SchedulerError):
    """The scheduler is busy or restarting: the same call may succeed later."""


class PermanentSchedulerError(SchedulerError):
    """The scheduler refused the request itself: retrying will not help."""


class ObservationError(ReconError):
    """The cluster could not be observed at all (not even squeue answered)."""


class LockedError(ReconError):
    """Another recon process holds the project's lock; nothing was done."""


class StalePlanError(ReconError):
    """A saved plan was made against another commit or another observed state."""


class PruneRefusedError(ReconError):
    """A plan's prunes look like an accident (the commit declares nothing, or they would
    cancel more than one job and more than prune_limit allows), and no one confirmed them:
    nothing was carried out."""


class OverBudgetError(ReconError):
    """A plan's submissions are forecast to take more GPU-hours than recon.yaml's budget
    allows, and no one confirmed them: nothing was carried out."""


class SuspendedError(ReconError):
    """`apply --wait` follows runs that are suspended: nothing of them is carried out
    until a commit takes `suspend` away, so there is nothing to wait for."""


class PlanFileError(ReconError):
    """A plan file cannot be written, or what is read is not a plan this recon applies."""


class JournalError(ReconError):
    """The project's journal cannot be opened or used; the message says what to do."""


class StateDirError(ReconError):
    """The project's state directory cannot be made or used, or another user owns it."""


class OutputError(ReconError):
    """An output exists but cannot be read, so its version is unknown."""


class ManifestError(ReconError):
    """A manifest could not be written."""


class PathError(ReconError):
    """A folder recon has to create or write into cannot be used; the message names it,
    where it was set, and why."""


RUNS_DIR_HINT = "it is under runs_dir in recon.yaml: set it to a folder you can write"


def cannot_create(path: Path, error: OSError, where: str) -> PathError:
    """The message for a folder that could not be made: `where` says what set it."""
    reason = error.strerror or str(error)
    if isinstance(error, FileExistsError | NotADirectoryError):
        reason = "it or a folder above it is a file"
    return PathError(f"cannot create the folder {path} ({reason}): {where}")


class DevClusterError(ReconError):
    """The local development cluster could not be brought up, down or inspected."""
