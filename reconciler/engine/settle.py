"""Settle finished jobs into the journal: how each ended, what it read and what it made.

Run once per pass, before planning, so the plan sees the journal's judgement:
- a job that COMPLETED without its declared outputs (or markers) counts as failed, with
  that reason, whatever sacct says;
- a successful job of the current spec gets its input and output versions recorded and
  a provenance manifest written next to its outputs.

Outcomes are recorded once; a job the journal has already settled is not looked at again.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from reconciler.scheduler.base import Observation, ObservedJob
from reconciler.scheduler.render import RenderContext, render_batch_script
from reconciler.scheduler.states import ENDINGS, Health, aggregate
from reconciler.scheduler.tag import Tag
from reconciler.spec.desired import Desired, DesiredRun
from reconciler.state.journal import FINAL_HEALTHS, Journal
from reconciler.state.outputs import OutputVersion, observe_inputs, observe_outputs
from reconciler.state.paths import input_paths, run_dir
from reconciler.state.provenance import local_identity, manifest_from, write_manifest
from reconciler.state.records import NO_OUTPUTS, SubmissionRecord

CodeDir = Callable[[str | None], Path]


def settle(
    journal: Journal,
    desired: Desired,
    observation: Observation,
    records: Sequence[SubmissionRecord],
    now: datetime,
    code_dir: CodeDir,
    remote: str | None = None,
) -> list[str]:
    """Record the end of every finished job of the project not settled yet; returns the
    job ids settled in this pass."""
    settled = {r.job_id for r in records if r.job_id is not None and r.final_health is not None}
    by_job = {r.job_id: r for r in records if r.job_id is not None}
    done = []
    for job in observation.jobs:
        if job.tag.project != desired.project.project or not job.finished:
            continue
        if job.health not in FINAL_HEALTHS:
            continue  # its parts disagree (accounting lags): never a non-final state as final
        if job.job_id in settled or job.job_id not in by_job:
            continue  # already settled, or not ours yet (adopted first, settled next pass)
        _settle_job(journal, desired, job, by_job[job.job_id], now, code_dir, remote)
        done.append(job.job_id)
    return done


def _settle_job(
    journal: Journal,
    desired: Desired,
    job: ObservedJob,
    record: SubmissionRecord,
    now: datetime,
    code_dir: CodeDir,
    remote: str | None,
) -> None:
    rows = job.components
    exit_code = next((row.exit_code for row in rows if row.exit_code), None)
    reason = next((row.reason for row in rows if row.reason), None)
    if job.in_words in ENDINGS:  # "timed out", "node failed": more than "failed" says
        reason = f"{job.in_words}: {reason}" if reason else job.in_words
    run = desired.runs.get(job.tag.name) if job.tag.kind == "run" else None
    current = run is not None and run.spec_hash == job.tag.spec_hash
    if job.tag.kind == "alloc":
        # An allocation's own end: a run that failed inside it is the run's failure.
        health = aggregate(row.health for row in rows)
        journal.record_final(job.job_id, health, exit_code, reason, now)
        return
    if job.health is not Health.SUCCEEDED or run is None or not current:
        journal.record_final(job.job_id, job.health, exit_code, reason, now)
        return
    outputs = _versions(observe_outputs(desired, [run.name]), run.name)
    missing = sorted(name for name, version in outputs.items() if version is None)
    if missing:
        journal.record_final(
            job.job_id,
            Health.FAILED,
            exit_code,
            f"{NO_OUTPUTS}: {', '.join(missing)}",
            now,
        )
        return
    inputs = _input_versions(desired, run)
    journal.record_final(job.job_id, Health.SUCCEEDED, exit_code, reason, now)
    journal.record_versions(
        job.job_id,
        {name: v.digest if v else None for name, v in inputs.items()},
        {name: v.digest if v else None for name, v in outputs.items()},
        now,
    )
    user, host = local_identity()
    directory = run_dir(desired, run)
    manifest = manifest_from(
        run,
        job,
        inputs,
        outputs,
        run_dir=directory,
        input_paths=input_paths(desired, run),
        commit=record.commit,
        remote=remote,
        script_sha256=_script_sha(desired, run, code_dir(record.commit)),
        now=now,
        user=user,
        host=host,
    )
    write_manifest(manifest, directory)


def _versions(
    observed: dict[tuple[str, str], OutputVersion | None], run: str
) -> dict[str, OutputVersion | None]:
    return {name: version for (owner, name), version in observed.items() if owner == run}


def _input_versions(desired: Desired, run: DesiredRun) -> dict[str, OutputVersion | None]:
    """The versions the run's inputs have now: what the job just read, as near as can be
    told after the fact (upstreams do not change while their downstream runs)."""
    external = _versions(observe_inputs(desired, [run.name]), run.name)
    versions: dict[str, OutputVersion | None] = {}
    for name, spec_input in run.spec.inputs.items():
        if spec_input.upstream is None:
            versions[name] = external.get(name)
        else:
            upstream, output = spec_input.upstream
            versions[name] = observe_outputs(desired, [upstream])[(upstream, output)]
    return versions


def _script_sha(desired: Desired, run: DesiredRun, code: Path) -> str:
    """The sha256 of the batch script the job ran: rendering is pure, so the same inputs
    give the same bytes that were submitted."""
    tag = Tag(project=desired.project.project, kind="run", name=run.name, spec_hash=run.spec_hash)
    context = RenderContext(
        project=desired.project.project,
        code_dir=code,
        run_dir=run_dir(desired, run),
        tag=tag,
        input_paths=input_paths(desired, run),
    )
    return hashlib.sha256(render_batch_script(run, context).encode()).hexdigest()
