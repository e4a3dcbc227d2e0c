"""A run's folder: every path recon, and the jobs it submits, use under a run's directory.

    <run dir>/
      logs/slurm-<job>.out, .err            the job's stdout and stderr (``log_paths``);
                                            an array task's: slurm-<array>_<index>.out
      logs/step-<spec hash>.sh              a run started as a step of an allocation,
      logs/slurm-<job>.<step>.out, .err     and its output (``step_log_paths``)
      inputs/<input>.list                   every path an input reads: ``{inputs.X.list}``
      inputs/unchanged.sha256 (.folders, .entries)   what the skip check compares
      .recon-run/                           recon's bookkeeping (``BOOKKEEPING``):
        manifest.json                       the provenance of the latest success
        environment/<job>                   what the job had (the job writes it)
        skipped/<job>                       the job skipped its command (the job writes it)
        publishing/<job>                    the job is publishing its outputs (``publishing``)
        unwritten/<job>                     the outputs its command did not write (``unwritten``)
        checkpointed/<job>                  it ended after saving a checkpoint (``checkpointed``)
        arrays/<hash>.json                  a sweep's array map (in the sweep's directory)
        arrays/<hash>/<index>.sh            the batch script of the member a task runs
        arrays/<hash>/<index>.logs          the folder that member's logs go to

``logs/`` and ``inputs/`` are the user's to read. The bookkeeping folder is recon's; output
versions never look inside it (``NOT_OUTPUTS``), so a manifest written beside an output
never changes that output's version.

A staged output is written beside its published path, in the same folder, so that a
rename within one filesystem publishes it (``staging_path``, ``previous_path``):

    <output's folder>/.recon-staging/<name>    what the running job writes
    <output's folder>/.recon-previous/<name>   the published output, kept while publishing

Releases before this one named the bookkeeping folder ``.recon``, the name of the state
directory's default too: the two were one folder when a run's workdir was the project
folder. What they wrote is still read (``EARLIER_BOOKKEEPING``): the map of an array they
submitted, the manifest of a success they settled, and the environment record and
skipped marker of a job they submitted, whose script has that folder written in it.
Readers look in ``READ_FROM``, newest first; nothing is written there any more.

Pure: paths only, no I/O. Below the renderer (which writes them into scripts), the state
layer (outputs, provenance) and the engine (apply, settle), which all share it.
"""

from __future__ import annotations

import os
import posixpath
from pathlib import Path

StrPath = str | os.PathLike[str]

LOGS = "logs"
INPUTS = "inputs"
BOOKKEEPING = ".recon-run"
EARLIER_BOOKKEEPING = ".recon"  # written by earlier releases: read, never written
READ_FROM = (BOOKKEEPING, EARLIER_BOOKKEEPING)  # where readers look, newest first
# Folder names an output's version skips at any depth: recon's bookkeeping, by either
# name (``.recon`` is also the state directory's default name, at the project folder).
NOT_OUTPUTS = frozenset(READ_FROM)

MANIFEST_FILE = "manifest.json"
_ENVIRONMENT, _SKIPPED, _ARRAYS = "environment", "skipped", "arrays"
_PUBLISHING, _PUBLISHED, _UNWRITTEN = "publishing", "published", "unwritten"
_CHECKPOINTED = "checkpointed"
STAGING, PREVIOUS = ".recon-staging", ".recon-previous"
# Relative to the run's directory, as the job's script writes them.
ENVIRONMENT_DIR = f"{BOOKKEEPING}/{_ENVIRONMENT}"
SKIPPED_DIR = f"{BOOKKEEPING}/{_SKIPPED}"
PUBLISHING_DIR = f"{BOOKKEEPING}/{_PUBLISHING}"
PUBLISHED_DIR = f"{BOOKKEEPING}/{_PUBLISHED}"
UNWRITTEN_DIR = f"{BOOKKEEPING}/{_UNWRITTEN}"
CHECKPOINTED_DIR = f"{BOOKKEEPING}/{_CHECKPOINTED}"
ARRAYS_DIR = f"{BOOKKEEPING}/{_ARRAYS}"

# What a job that may rerun compares its inputs with, beside their lists in inputs/:
# ``.sha256`` (sha256sum's --check format, absolute paths) for every file; for inputs
# that are folders, ``.folders`` (their paths) and ``.entries`` (every entry below them,
# as the skip check's find prints it, sorted bytewise). Written by apply only for a run
# that may rerun, and removed before any other submission of the run.
SKIP_CHECK_SUFFIXES = (".sha256", ".folders", ".entries")


def logs_dir(run_dir: StrPath) -> Path:
    return Path(run_dir, LOGS)


def log_paths(run_dir: StrPath, *, array: bool = False) -> tuple[str, str]:
    """The ``--output`` and ``--error`` file patterns, as Slurm reads them (``%j``: job id;
    for a job array's tasks ``%A_%a``: array id and task index, one pair of files per task).

    A ``%`` of the run directory itself is written ``%%``, which Slurm reads as one ``%``.
    """
    logs = posixpath.join(os.fspath(run_dir).replace("%", "%%"), LOGS)
    name = "slurm-%A_%a" if array else "slurm-%j"
    return f"{logs}/{name}.out", f"{logs}/{name}.err"


def step_log_paths(log_dir: StrPath) -> tuple[str, str]:
    """srun's ``--output`` and ``--error`` patterns for a step in an allocation (``%j.%s``:
    job and step id), in ``log_dir``: a run's logs, or an allocation's setup logs (in the
    state directory). ``log_files`` finds them by the step's id (``12.3``)."""
    logs = os.fspath(log_dir).replace("%", "%%")
    return f"{logs}/slurm-%j.%s.out", f"{logs}/slurm-%j.%s.err"


def log_files(run_dir: StrPath, job_id: str) -> tuple[Path, Path]:
    """The files a job's stdout and stderr go to; for a het job, the id sbatch returned;
    for an array task, its task id (``123_4``); for a step, ``<job>.<step>``."""
    logs = logs_dir(run_dir)
    return logs / f"slurm-{job_id}.out", logs / f"slurm-{job_id}.err"


def step_script(run_dir: StrPath, spec_hash: str) -> Path:
    """The batch script a run started in an allocation runs as its step."""
    return logs_dir(run_dir) / f"step-{spec_hash}.sh"


def input_list_file(run_dir: StrPath, name: str) -> Path:
    """The file listing every path an input reads, one per line: ``{inputs.X.list}``."""
    return Path(run_dir, INPUTS, f"{name}.list")


def skip_check_file(run_dir: StrPath, suffix: str) -> Path:
    return Path(run_dir, INPUTS, f"unchanged{suffix}")


def manifest_file(run_dir: StrPath, folder: str = BOOKKEEPING) -> Path:
    """The run's provenance manifest; ``folder``: one of ``READ_FROM``."""
    return Path(run_dir, folder, MANIFEST_FILE)


def environment_record(run_dir: StrPath, job_id: str, folder: str = BOOKKEEPING) -> Path:
    """Where job ``job_id`` records its environment (``render.ENVIRONMENT_RECORD``)."""
    return Path(run_dir, folder, _ENVIRONMENT, job_id)


def skipped_marker(run_dir: StrPath, job_id: str, folder: str = BOOKKEEPING) -> Path:
    """The file a job leaves when it skipped its command, by recon's id of the job (an
    array task's is ``<array id>_<index>``); settle reads and removes it."""
    return Path(run_dir, folder, _SKIPPED, job_id)


def skipped_markers(run_dir: StrPath, job_id: str) -> tuple[Path, ...]:
    """The job's skipped marker wherever a release may have written it."""
    return tuple(skipped_marker(run_dir, job_id, folder) for folder in READ_FROM)


def map_file(sweep_dir: StrPath, digest: str, folder: str = BOOKKEEPING) -> Path:
    """A job array's map (index -> member), in the sweep's directory."""
    return Path(sweep_dir, folder, _ARRAYS, f"{digest}.json")


def tasks_dir(sweep_dir: StrPath, digest: str) -> Path:
    """The folder of an array's task files (``task_script``, ``task_logs``)."""
    return Path(sweep_dir, ARRAYS_DIR, digest)


def task_script(sweep_dir: StrPath, digest: str, index: int) -> Path:
    return tasks_dir(sweep_dir, digest) / f"{index}.sh"


def task_logs(sweep_dir: StrPath, digest: str, index: int) -> Path:
    """The file naming the folder a task's output goes to: its member's logs."""
    return tasks_dir(sweep_dir, digest) / f"{index}.logs"


def staging_path(published: str) -> str:
    """Where a job writes a staged output (absolute ``published``, as the script names
    it): beside it, so publishing is a rename within one filesystem, under the same name
    (a tool that reads the format from the file's extension still can)."""
    return _beside(published, STAGING)


def previous_path(published: str) -> str:
    """Where the published output is kept while a job publishes its new one, until the
    job has published them all (or a pass rolls the publishing back)."""
    return _beside(published, PREVIOUS)


def _beside(published: str, folder: str) -> str:
    parent, name = posixpath.split(published.rstrip("/"))
    return posixpath.join(parent, folder, name) + ("/" if published.endswith("/") else "")


def publishing_dir(run_dir: StrPath) -> Path:
    """The markers of jobs publishing their outputs: one file per job (``<job>``), listing
    each staged output as ``<1 if it had a published version, else 0> <published path>``
    ended by a NUL, written before the first rename and removed after the last."""
    return Path(run_dir, PUBLISHING_DIR)


def published_marker(run_dir: StrPath, job_id: str) -> Path:
    """The marker of a job that published every staged output: its publishing marker,
    moved here in one rename once the last output was in place. A job killed after that
    (a cancel, its time limit, its node lost, in the moment before it exits) ended
    badly for Slurm, yet its command succeeded and its outputs are published: settle
    counts it a success (``published before it ended``) and removes the marker."""
    return Path(run_dir, PUBLISHED_DIR, job_id)


def unwritten(run_dir: StrPath, job_id: str) -> Path:
    """The file a job leaves when its command succeeded without writing every staged
    output: their names, space-separated. The job then fails and publishes nothing;
    settle reads it (``completed without its declared outputs``) and removes it."""
    return Path(run_dir, UNWRITTEN_DIR, job_id)


def checkpointed(run_dir: StrPath, job_id: str) -> Path:
    """The marker a job of a run with a checkpoint leaves when its command exited
    non-zero after the warning signal (or a preemption's SIGTERM): it saved its progress
    and published nothing. Settle reads it (a requeue, ``EndingKind.CHECKPOINTED``) and
    removes it."""
    return Path(run_dir, CHECKPOINTED_DIR, job_id)
