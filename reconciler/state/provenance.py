"""Provenance: a manifest beside each run's outputs saying how they were made.

The manifest names the commit and spec hash the job ran, the sha256 of its rendered batch
script, the version of every input it read and every output it left, the job ids of its
het components or array tasks with their nodes, times, exit codes and Slurm states, and
who ran recon where. Anyone who finds the outputs finds this next to them, even without
the repository or the journal.

It lives at ``<run_dir>/.recon-run/manifest.json`` (``runfolder.manifest_file``), not as a
file beside the outputs:

- output versions skip ``.recon-run`` (see ``outputs``), so writing a manifest never changes
  the version of an output that is the run directory itself, which would otherwise make
  the run stale forever;
- the run directory stays the user's: ``ls`` shows their outputs and the job's logs;
- recon's later files for a run (a copy of the rendered script, say) have a place too.

``manifest_from`` is a pure builder; ``write_manifest`` and ``read_manifest`` are the I/O.
Reading never raises: a missing, damaged or newer-format manifest reads as None, since a
user may edit or truncate a file in their run directory and recon must carry on. A run
whose latest success an earlier release settled has its manifest in ``.recon/``, where
that release wrote it: it is read there until a new success writes one in ``.recon-run/``.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import socket
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from reconciler import __version__
from reconciler.desired.desired import DesiredRun, EnvironmentKind
from reconciler.errors import ManifestError
from reconciler.scheduler.base import JobRecord, ObservedJob
from reconciler.scheduler.runfolder import (
    MANIFEST_FILE,
    READ_FROM,
    environment_record,
    manifest_file,
)
from reconciler.scheduler.states import Health, SlurmState
from reconciler.state.outputs import OutputVersion

_FROZEN = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


class InputUsed(BaseModel):
    """One input as the job read it."""

    model_config = _FROZEN

    from_: str | None = Field(None, alias="from", description="RUN.OUTPUT, for another run's")
    path: str = Field(description="absolute, as the job was given it")
    version: OutputVersion | None = Field(description="None: missing when it was looked at")


class OutputMade(BaseModel):
    """One declared output as the job left it."""

    model_config = _FROZEN

    path: str = Field(description="absolute")
    version: OutputVersion | None = Field(description="None: the job did not leave it")


class AttemptMade(BaseModel):
    """One job of a run with a checkpoint since its last success: those that ended to be
    resumed (saved their checkpoint, timed out, preempted), then the one that finished."""

    model_config = _FROZEN

    job_id: str
    ending: str | None = Field(
        description="how it ended beyond its health (checkpointed, timeout, preempted); "
        "None: it finished"
    )
    elapsed_s: float | None = Field(description="how long it ran; None where not measured")


class ComponentRun(BaseModel):
    """One het component or array task of the job (the job itself when it has neither)."""

    model_config = _FROZEN

    job_id: str = Field(description="as Slurm prints it: 12, 12+1, 12_4")
    het_offset: int | None = None
    array_task: str | None = None
    state: SlurmState
    exit_code: int | None = None
    signal: int | None = None
    nodes: str | None = None
    partition: str | None = None
    submit: AwareDatetime | None = None
    start: AwareDatetime | None = None
    end: AwareDatetime | None = None


class EnvironmentUsed(BaseModel):
    """The environment the job had: what its run declared, and what the job itself
    recorded having (``render.ENVIRONMENT_RECORD``). Names and versions, never a passed
    variable's value."""

    model_config = _FROZEN

    kind: EnvironmentKind = Field(
        description="none: the clean base alone; declared: the base and what the run "
        "declares; inherit: the environment of whoever applied"
    )
    modules: tuple[str, ...] = ()
    venv: str | None = None
    conda: str | None = None
    files: dict[str, str] = Field(
        default_factory=dict, description="each declared file's git blob id at the commit"
    )
    passed: tuple[str, ...] = Field((), description="the names passed from the applier")
    had: dict[str, str] | None = Field(
        None,
        description="what the job recorded: python (its version), modules (loaded), venv, "
        "conda, path; None when it recorded nothing",
    )


def environment_used(run: DesiredRun, had: Mapping[str, str] | None) -> EnvironmentUsed:
    """The environment section of a manifest of ``run``'s current spec."""
    declared = run.spec.environment
    if declared is None:
        return EnvironmentUsed(kind=EnvironmentKind.NONE, had=dict(had) if had else None)
    return EnvironmentUsed(
        kind=EnvironmentKind.of(declared),
        modules=declared.modules,
        venv=declared.venv,
        conda=declared.conda,
        files=run.environment_files,
        passed=tuple(sorted(declared.pass_)),
        had=dict(had) if had else None,
    )


class Manifest(BaseModel):
    """How one run's outputs were made. Times are UTC."""

    model_config = _FROZEN

    format_version: Literal[1] = 1
    project: str
    run: str
    commit: str | None = Field(description="None when the specs were read from a work tree")
    remote: str | None = Field(description="the repository's remote URL, without credentials")
    spec_hash: str
    script_sha256: str = Field(
        description="of the batch script the job was sent, #SBATCH lines and all, as "
        "journalled with its intent; rendered again for a job an earlier release sent"
    )
    command: str | None = Field(description="the run's command, as the spec gives it")
    script: str | None = Field(description="or its script, a path in the repository")
    run_dir: str
    inputs: dict[str, InputUsed]
    outputs: dict[str, OutputMade]
    job_id: str
    health: Health = Field(description="all components and steps folded by the one rule")
    components: tuple[ComponentRun, ...]
    submit: AwareDatetime | None = Field(description="the earliest component's")
    start: AwareDatetime | None = Field(description="the earliest component's")
    end: AwareDatetime | None = Field(description="the last component's; None until all ended")
    user: str
    host: str = Field(description="where the recon process that wrote this ran")
    recon_version: str
    created_at: AwareDatetime
    environment: EnvironmentUsed | None = Field(
        None, description="the job's environment; None in manifests of older releases"
    )
    raised: dict[str, int | None] | None = Field(
        None,
        description="what the job asked for beyond its spec, a retry's raise after running "
        "out of memory or time: memory_mb, time_s (None: as declared); None: as its spec",
    )
    attempts: tuple[AttemptMade, ...] = Field(
        (),
        description="for a run with a checkpoint: every job since its last success, this "
        "one last; empty for other runs",
    )


    def as_json(self) -> str:
        """The manifest as written. What only some runs have (a checkpoint's attempts, a
        retry's raise) is left out when they have none: any other run's reads as before."""
        unset = {name for name in ("raised", "attempts") if not getattr(self, name)}
        return self.model_dump_json(by_alias=True, indent=2, exclude=unset) + "\n"


def manifest_from(
    run: DesiredRun,
    job: ObservedJob,
    inputs: Mapping[str, OutputVersion | None],
    outputs: Mapping[str, OutputVersion | None],
    *,
    run_dir: Path,
    input_paths: Mapping[str, Path],
    commit: str | None,
    remote: str | None,
    script_sha256: str,
    now: datetime,
    user: str,
    host: str,
    recon_version: str = __version__,
    environment: EnvironmentUsed | None = None,
    attempts: Sequence[AttemptMade] = (),
    raised: Mapping[str, int | None] | None = None,
) -> Manifest:
    """The manifest of ``job``, a job of ``run``'s current spec. Pure: every observation
    and the clock are arguments. Refuses (ValueError) a job of another run or spec hash,
    or versions that do not name exactly the run's inputs and outputs: a manifest that
    mixed two versions of a run would be worse than none."""
    if (job.tag.kind, job.tag.name, job.tag.spec_hash) != ("run", run.name, run.spec_hash):
        raise ValueError(
            f"job {job.job_id} is {job.tag.kind} {job.tag.name} at {job.tag.spec_hash}, "
            f"not run {run.name} at {run.spec_hash}"
        )
    _same_names("input versions", inputs, run.inputs)
    _same_names("input paths", input_paths, run.inputs)
    _same_names("output versions", outputs, run.outputs)
    components = tuple(_component(row) for row in job.components)
    return Manifest(
        project=job.tag.project,
        run=run.name,
        commit=commit,
        remote=_without_credentials(remote),
        spec_hash=run.spec_hash,
        script_sha256=script_sha256,
        command=run.spec.command,
        script=run.spec.script,
        run_dir=str(run_dir),
        inputs={
            name: InputUsed(
                from_=spec_input.from_, path=str(input_paths[name]), version=inputs[name]
            )
            for name, spec_input in run.inputs.items()
        },
        outputs={
            name: OutputMade(path=str(run_dir / output.path), version=outputs[name])
            for name, output in run.outputs.items()
        },
        job_id=job.job_id,
        health=job.health,
        components=components,
        submit=_earliest(c.submit for c in components),
        start=_earliest(c.start for c in components),
        end=_last_end([c.end for c in components]),
        user=user,
        host=host,
        recon_version=recon_version,
        created_at=_utc(now),
        environment=environment,
        attempts=tuple(attempts),
        raised=None if raised is None else dict(raised),
    )


def manifest_path(run_dir: Path) -> Path:
    """The manifest to read: where this release writes it, else where an earlier one did,
    else (none written yet) where this release writes it."""
    for folder in READ_FROM:
        path = manifest_file(run_dir, folder)
        if os.path.lexists(path):
            return path
    return manifest_file(run_dir)


def write_manifest(manifest: Manifest, run_dir: Path) -> Path:
    """Write the manifest where ``runfolder.manifest_file`` says; a reader sees the old one
    or the new one, never half. The run directory must exist: it is the job's, not recon's
    to make."""
    target = manifest_file(run_dir)
    text = manifest.as_json()
    try:
        target.parent.mkdir(exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{MANIFEST_FILE}.")
    except OSError as error:
        raise _unwritable(target, error) from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())  # the rename must not land before the bytes do
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise _unwritable(target, error) from None
    return target


def read_manifest(run_dir: Path) -> Manifest | None:
    """The run directory's manifest; None when there is none, or what is there is not a
    manifest this recon reads (damaged, hand-edited, or from a newer recon)."""
    try:
        return Manifest.model_validate_json(manifest_path(run_dir).read_bytes())
    except (OSError, ValueError):  # ValueError: bad JSON, bad UTF-8, failed validation
        return None


# What a job's environment record may say (``render.ENVIRONMENT_RECORD``); nothing else
# it holds is read.
RECORDED = ("python", "modules", "venv", "conda", "path")


def read_environment_record(run_dir: Path, job_id: str) -> dict[str, str] | None:
    """What job ``job_id`` recorded of its environment, where its script wrote it (an
    earlier release's job: in ``.recon/``); None when it recorded nothing (a job of a
    release before the records, or one that could not write it). Never raises."""
    for folder in READ_FROM:
        try:
            text = environment_record(run_dir, job_id, folder).read_text(errors="replace")
            break
        except OSError:
            continue
    else:
        return None
    found = dict(line.partition("=")[::2] for line in text.splitlines() if "=" in line)
    return {key: found[key] for key in RECORDED if key in found}


def local_identity() -> tuple[str, str]:
    """(user, host) of this process, for ``manifest_from``. The user falls back to the
    numeric uid where no name is known (a container without a passwd entry)."""
    try:
        user = getpass.getuser()
    except (KeyError, OSError):
        user = str(os.getuid())
    return user, socket.gethostname()


def _component(row: JobRecord) -> ComponentRun:
    return ComponentRun(
        job_id=row.job_id,
        het_offset=row.het_offset,
        array_task=row.array_task,
        state=row.state,
        exit_code=row.exit_code,
        signal=row.signal,
        nodes=row.nodes,
        partition=row.partition,
        submit=_utc(row.submit),
        start=_utc(row.start),
        end=_utc(row.end),
    )


def _same_names(what: str, given: Mapping[str, object], declared: Mapping[str, object]) -> None:
    if set(given) != set(declared):
        raise ValueError(f"{what} given for {sorted(given)}, but the run has {sorted(declared)}")


def _earliest(times: Iterable[datetime | None]) -> datetime | None:
    known = [t for t in times if t is not None]
    return min(known) if known else None


def _last_end(ends: list[datetime | None]) -> datetime | None:
    """The last component's end; None while any component has not ended."""
    ended = [e for e in ends if e is not None]
    return max(ended) if ended and len(ended) == len(ends) else None


def _utc(moment: datetime | None) -> datetime | None:
    # A naive time is the machine's local time, as Slurm prints it.
    return moment.astimezone(UTC) if moment is not None else None


def _without_credentials(remote: str | None) -> str | None:
    """The remote URL with any user and password left out: a token in an https remote
    must not travel into every run directory and every exported crate. An scp-like
    remote (git@host:org/repo) has no scheme and keeps its conventional user."""
    if remote is None:
        return None
    parts = urlsplit(remote)
    if not parts.scheme or "@" not in parts.netloc:
        return remote
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=host))


def _unwritable(target: Path, error: OSError) -> ManifestError:
    return ManifestError(
        f"cannot write the provenance manifest {target}: {error.strerror or error}. "
        "The run's outputs are untouched; make its directory writable and reconcile again"
    )
