"""Settle finished jobs into the journal: write down how each ended, what it read and
what it made (as engine/observe/endings.py judged them, before the plan), and a
provenance manifest next to the outputs of each success of the current spec.

Only apply writes (``record``, ``record_setups``); plan and status plan against the same
judgement without writing it (``endings.as_recorded``). A job that skipped its command
(``endings``, ending ``EndingKind.SKIPPED``) has its success recorded with the input
versions it matched, and its manifest, which describes how the outputs were made, is left
as it is. A manifest names the digest of the script its job was sent, journalled with the
intent before sbatch (``Journal.record_intents``), not one rendered after the fact.

A job killed while it published its staged outputs (between two renames) left a marker:
its publishing is rolled back before anything looks at its outputs
(``roll_back_publishing``, ``state/publishing``), so it is judged, and its run planned,
with the outputs as they were before it.

Outcomes are recorded once; a job the journal has already settled is not looked at again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from reconciler.desired.desired import Desired, DesiredRun
from reconciler.engine.apply.scripts import script_sha256
from reconciler.engine.observe.endings import Ending, digests
from reconciler.engine.plan.actions import Raised
from reconciler.engine.plan.raises import raised_resources
from reconciler.scheduler.base import Observation
from reconciler.scheduler.runfolder import (
    checkpointed,
    published_marker,
    skipped_markers,
    unwritten,
)
from reconciler.scheduler.states import ENDED
from reconciler.state.journal import Journal
from reconciler.state.paths import input_paths, run_dir, run_path
from reconciler.state.provenance import (
    environment_used,
    local_identity,
    manifest_from,
    read_environment_record,
    write_manifest,
)
from reconciler.state.publishing import roll_back_ended
from reconciler.state.records import EndingKind, SetupRecord, SubmissionRecord

CodeDir = Callable[[str | None], Path]


def roll_back_publishing(
    desired: Desired, observation: Observation, records: Sequence[SubmissionRecord]
) -> list[Path]:
    """Roll back what jobs of the project that ended without the journal's judgement yet
    left half published, in the folder of each run with no job alive; the markers rolled
    back. Writes: apply's passes only, before they look."""
    settled = {r.job_id for r in records if r.job_id is not None and r.final_health is not None}
    ended, alive = set(), set()
    for job in observation.jobs:
        if job.tag.project != desired.project.project or job.tag.kind != "run":
            continue
        if not job.finished or job.health not in ENDED:
            alive.add(job.tag.name)
        elif job.job_id not in settled:
            ended.add(job.tag.name)
    runs = sorted((ended - alive) & set(desired.runs))
    return roll_back_ended(Path(run_path(desired, desired.runs[name])) for name in runs)


def record(
    journal: Journal,
    desired: Desired,
    endings: Sequence[Ending],
    now: datetime,
    code_dir: CodeDir,
    remote: str | None = None,
) -> None:
    """Write each ending into the journal, and a provenance manifest beside the outputs
    of each success of the current spec."""
    for ending in endings:
        _record(journal, desired, ending, now, code_dir, remote)
        job = ending.job
        if job.tag.kind == "run" and (run := desired.runs.get(job.tag.name)) is not None:
            # Once the journal says how it ended (a pass killed before then judges again).
            # What it kept aside stays: another job of the run may be publishing beside
            # it, and the run's next publishing removes it first.
            published_marker(run_dir(desired, run), job.job_id).unlink(missing_ok=True)
            checkpointed(run_dir(desired, run), job.job_id).unlink(missing_ok=True)


def _record(
    journal: Journal,
    desired: Desired,
    ending: Ending,
    now: datetime,
    code_dir: CodeDir,
    remote: str | None,
) -> None:
    job_id = ending.job.job_id
    journal.record_final(
        job_id,
        ending.health,
        ending.exit_code,
        ending.reason,
        now,
        ending=ending.kind,
        record_id=ending.record.id,
        usage=ending.usage,
    )
    if ending.inputs is None:
        return
    if ending.outputs is None:  # a failure: what it read, no outputs
        journal.record_inputs(job_id, digests(ending.inputs), now)
        if ending.kind is EndingKind.NO_OUTPUTS:
            run = desired.runs[ending.job.tag.name]
            unwritten(run_dir(desired, run), job_id).unlink(missing_ok=True)
        return
    journal.record_versions(job_id, ending.read(), digests(ending.outputs), now)
    run = desired.runs[ending.job.tag.name]
    if ending.matched is None:
        _write_manifest(journal, desired, run, ending, now, code_dir, remote)
    else:
        for marker in skipped_markers(run_dir(desired, run), job_id):
            marker.unlink(missing_ok=True)


def record_setups(journal: Journal, changed: Sequence[SetupRecord], now: datetime) -> None:
    for setup in changed:
        if setup.step_id is not None:
            journal.record_setup_step(setup.id, setup.step_id, now)
        if setup.final_health is not None:
            journal.record_setup_end(
                setup.id, setup.final_health, setup.exit_code, setup.reason, now
            )


def _write_manifest(
    journal: Journal,
    desired: Desired,
    run: DesiredRun,
    ending: Ending,
    now: datetime,
    code_dir: CodeDir,
    remote: str | None,
) -> None:
    assert ending.inputs is not None and ending.outputs is not None
    user, host = local_identity()
    directory = run_dir(desired, run)
    manifest = manifest_from(
        run,
        ending.job,
        ending.inputs,
        ending.outputs,
        run_dir=directory,
        input_paths=input_paths(desired, run),
        commit=ending.record.commit,
        remote=remote,
        script_sha256=_script_sha256(journal, desired, run, ending.record, code_dir),
        now=now,
        user=user,
        host=host,
        environment=environment_used(run, read_environment_record(directory, ending.job.job_id)),
        attempts=ending.attempts,
        raised=ending.record.raised,
    )
    write_manifest(manifest, directory)


def _script_sha256(
    journal: Journal, desired: Desired, run: DesiredRun, record: SubmissionRecord, code_dir: CodeDir
) -> str:
    """The digest of the script the job was sent, as journalled with its intent; for a
    job an earlier release submitted (none journalled), the script rendered again, which
    is right while this release renders it as that one did."""
    sent = journal.script_sent(record.id)
    if sent is not None:
        return sent.sha256
    return script_sha256(desired, _as_ran(run, record), code_dir(record.commit))


def _as_ran(run: DesiredRun, record: SubmissionRecord) -> DesiredRun:
    """The run as its job ran it: with what its retry raised (the script it was sent)."""
    if not record.raised:
        return run
    memory, time_s = record.raised.get("memory_mb"), record.raised.get("time_s")
    raise_ = Raised(memory_mb=memory, time_s=time_s, words="")
    return run.with_resources(raised_resources(run.spec.resources, raise_))
