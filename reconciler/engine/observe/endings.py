"""How each finished job of the project ended, as recon judges it: read, never written.

Judged once per pass, before planning, so the plan sees the same judgement whichever
command made it (``judge``); only apply writes it down (engine/apply/settle.py):
- a job that COMPLETED without its declared outputs (or markers) counts as failed, with
  that reason, whatever sacct says; so does a job whose script found its command had not
  written a staged output (it failed, publishing nothing, and named them:
  scheduler/runfolder.py ``unwritten``);
- a successful job of the current spec gets the versions of its inputs and outputs, for
  the journal and the provenance manifest apply writes next to its outputs;
- a job that skipped its command, its inputs being those of the run's last success
  (its marker, scheduler/runfolder.py ``skipped_marker``), is a success of the current spec
  that read what that success read and left its outputs as they were: it is judged
  with that success's input versions and ending ``EndingKind.SKIPPED``, and its manifest,
  which describes how the outputs were made, is left as it is.

``as_recorded`` and ``with_setups`` give the journal's records as they read once the
judgement is recorded: what plan and status plan against, without writing. A job the
journal has already settled is not judged again.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from reconciler.desired.desired import Desired, DesiredRun
from reconciler.scheduler.base import Observation, ObservedJob, job_order
from reconciler.scheduler.render import SKIPPED
from reconciler.scheduler.runfolder import (
    checkpointed,
    published_marker,
    skipped_markers,
    unwritten,
)
from reconciler.scheduler.states import (
    ENDED,
    ENDED_BADLY,
    ENDINGS,
    Health,
    aggregate,
    waited_for_dependency,
)
from reconciler.scheduler.usage import JobUsage, usage_of
from reconciler.state.outputs import (
    OutputsSeen,
    OutputVersion,
    gathered,
    observe_inputs,
    observe_outputs,
)
from reconciler.state.paths import run_path
from reconciler.state.provenance import AttemptMade
from reconciler.state.records import (
    NO_OUTPUTS,
    PUBLISHED_BEFORE_IT_ENDED,
    SAVED_CHECKPOINT,
    EndingKind,
    SetupRecord,
    SubmissionRecord,
)


@dataclass(frozen=True)
class Ending:
    """How one finished job of the project ended, as recon judges it: Slurm's word, except
    that a job which COMPLETED without its outputs failed. ``kind``: how it ended beyond
    its health, as the journal records it (``reason`` says it in words). For a job of the
    current spec, the versions its inputs had, and for a success the versions its outputs
    came out with."""

    job: ObservedJob
    record: SubmissionRecord
    health: Health
    exit_code: int | None
    reason: str | None
    inputs: Mapping[str, OutputVersion | None] | None = None
    outputs: Mapping[str, OutputVersion | None] | None = None
    # a job that skipped its command: the input versions it matched (its run's last
    # success's), recorded instead of ``inputs``
    matched: Mapping[str, str | None] | None = None
    kind: EndingKind | None = None
    # a success of a run with a checkpoint: every job since the run's last success, for
    # its manifest (``_attempts``)
    attempts: tuple[AttemptMade, ...] = ()

    @property
    def usage(self) -> JobUsage | None:
        """What the job held, from the scheduler's rows (``scheduler/usage``)."""
        return usage_of(self.job, allocation=self.job.tag.kind == "alloc")

    def read(self) -> dict[str, str | None]:
        """The input versions to record for a success."""
        assert self.inputs is not None
        return dict(self.matched) if self.matched is not None else digests(self.inputs)


def judge(
    desired: Desired,
    observation: Observation,
    records: Sequence[SubmissionRecord],
    outputs_seen: OutputsSeen | None = None,
) -> list[Ending]:
    """The end of every finished job of the project the journal has not settled yet.

    Reads the filesystem (outputs), writes nothing: plan and status judge exactly as apply
    does, and only apply records the judgement (``record``). `outputs_seen`: the pass's
    outputs found so far (``observe_outputs``), each looked at once."""
    outputs_seen = {} if outputs_seen is None else outputs_seen
    # A record is a job's when the id and what the job's tag names agree: Slurm hands a lost
    # job's id to a later job, maybe another run's, and that job's end is not the record's.
    settled = {_key(r) for r in records if r.job_id is not None and r.final_health is not None}
    by_job = {_key(r): r for r in records if r.job_id is not None}
    endings = []
    successes = _successes(records)
    for job in observation.jobs:
        if job.tag.project != desired.project.project or not job.finished:
            continue
        if job.health not in ENDED:
            continue  # its parts disagree (accounting lags): never a non-final state as final
        key = (job.job_id, job.tag.kind, job.tag.name)
        if key in settled or key not in by_job:
            continue  # already settled, or not ours yet (adopted first, settled next pass)
        ending = _judge_job(desired, job, by_job[key], outputs_seen)
        if ending.outputs is not None and (run := desired.runs.get(job.tag.name)) is not None:
            ending = _attempts(run, ending, records)
        endings.append(_skipped(desired, ending, successes))
    return endings


def _attempts(run: DesiredRun, ending: Ending, records: Sequence[SubmissionRecord]) -> Ending:
    """A success of a run with a checkpoint, with every job of its spec since the run's
    last success (those that ended to be resumed, and this one) for its manifest."""
    if run.spec.checkpoint is None:
        return ending
    job = ending.job
    before = sorted(
        (
            record
            for record in records
            if record.name == run.name
            and record.kind == "run"
            and record.spec_hash == run.spec_hash
            and record.job_id is not None
            and job_order(record.job_id) < job_order(job.job_id)
        ),
        key=lambda record: job_order(record.job_id or ""),
    )
    since: list[SubmissionRecord] = []
    for record in before:
        since = [] if record.final_health is Health.SUCCEEDED else [*since, record]
    earlier = [
        AttemptMade(
            job_id=record.job_id or "",
            ending=None if record.ending is None else record.ending.value,
            elapsed_s=record.usage.elapsed_s if record.usage is not None else None,
        )
        for record in since
    ]
    usage = ending.usage
    last = AttemptMade(
        job_id=job.job_id, ending=None, elapsed_s=usage.elapsed_s if usage is not None else None
    )
    return replace(ending, attempts=(*earlier, last))


def _key(record: SubmissionRecord) -> tuple[str | None, str, str]:
    return (record.job_id, record.kind, record.name)


def as_recorded(
    records: Sequence[SubmissionRecord], endings: Sequence[Ending]
) -> list[SubmissionRecord]:
    """The journal's records as they read once ``endings`` are recorded: what plan and
    status plan against, without writing."""
    by_record = {ending.record.id: ending for ending in endings}
    return [_recorded(record, by_record.get(record.id)) for record in records]


def _recorded(record: SubmissionRecord, ending: Ending | None) -> SubmissionRecord:
    if ending is None:
        return record
    ended = replace(
        record,
        final_health=ending.health,
        exit_code=ending.exit_code,
        reason=ending.reason,
        ending=ending.kind,
        usage_json=_usage_json(ending.usage) or record.usage_json,
    )
    if ending.inputs is None:
        return ended
    if ending.outputs is None:
        return replace(ended, input_versions=digests(ending.inputs))
    return replace(
        ended,
        input_versions=ending.read(),
        output_versions=digests(ending.outputs),
    )


def judge_setups(observation: Observation, setups: Sequence[SetupRecord]) -> list[SetupRecord]:
    """Each allocation setup not ended yet as it now stands: its step id once Slurm lists
    it, and how it ended once it has. Only the setups that changed are returned."""
    jobs = {job.job_id: job for job in observation.jobs if job.tag.kind == "alloc"}
    changed = []
    for setup in setups:
        job = jobs.get(setup.allocation_job)
        if setup.final_health is not None or job is None:
            continue
        steps = [row for row in job.steps if row.step_tag == job.tag]
        now = setup
        if steps and setup.step_id is None:
            now = now.model_copy(update={"step_id": steps[-1].job_id})
        if steps and all(row.health in ENDED for row in steps):
            code = next((row.exit_code for row in steps if row.exit_code), None)
            health = aggregate(row.health for row in steps)
            now = now.model_copy(update={"final_health": health, "exit_code": code})
        elif not steps and job.finished:
            why = "the allocation ended before its setup step was seen"
            now = now.model_copy(update={"final_health": Health.CANCELLED, "reason": why})
        if now != setup:
            changed.append(now)
    return changed


def with_setups(setups: Sequence[SetupRecord], changed: Sequence[SetupRecord]) -> list[SetupRecord]:
    """The setups as they read once ``changed`` is recorded."""
    by_id = {setup.id: setup for setup in changed}
    return [by_id.get(setup.id, setup) for setup in setups]


def _judge_job(
    desired: Desired, job: ObservedJob, record: SubmissionRecord, outputs_seen: OutputsSeen
) -> Ending:
    rows = job.components
    exit_code = next((row.exit_code for row in rows if row.exit_code), None)
    reason = next((row.reason for row in rows if row.reason), None)
    kind = None
    if job.in_words in ENDINGS:  # "timed out", "node failed": more than "failed" says
        reason = f"{job.in_words}: {reason}" if reason else job.in_words
        # the state of the component that says it (every state of ENDINGS has a kind)
        kind = EndingKind.of_states(row.state for row in rows)
    elif job.health in ENDED_BADLY and waited_for_dependency(reason):
        kind = EndingKind.DEPENDENCY
    run = desired.runs.get(job.tag.name) if job.tag.kind == "run" else None
    current = run is not None and run.spec_hash == job.tag.spec_hash
    health = job.health
    if run is not None and health is not Health.SUCCEEDED and _published(desired, run, job):
        # Killed in the moment between publishing its last output and exiting: its
        # command succeeded and every output is in place, as from a job Slurm calls done.
        health, exit_code, kind = Health.SUCCEEDED, None, None
        reason = f"{PUBLISHED_BEFORE_IT_ENDED} ({job.in_words or job.health.value})"
    if job.tag.kind == "alloc":
        # An allocation's own end: a run that failed inside it is the run's failure.
        health = aggregate(row.health for row in rows)
        return Ending(job, record, health, exit_code, reason, kind=kind)
    if run is None or not current:
        return Ending(job, record, health, exit_code, reason, kind=kind)
    # What it read, success or not: a failure counts against retries only while its
    # inputs keep these versions (engine/plan/history.failed_attempts).
    inputs = _input_versions(desired, run, outputs_seen)
    if health is not Health.SUCCEEDED:
        if run.spec.checkpoint is not None and _checkpointed(desired, run, job):
            # Its command saved its progress when warned: a requeue, whatever Slurm's
            # word (failed with its exit status, or timed out, preempted once it exited).
            said = job.in_words or health.value
            why = f"{SAVED_CHECKPOINT} ({said})"
            return Ending(job, record, health, exit_code, why, inputs, kind=EndingKind.CHECKPOINTED)
        if unwritten := _unwritten(desired, run, job):  # the script's own check failed
            why = f"{NO_OUTPUTS}: {', '.join(unwritten)}"
            return Ending(
                job, record, Health.FAILED, exit_code, why, inputs, kind=EndingKind.NO_OUTPUTS
            )
        return Ending(job, record, health, exit_code, reason, inputs, kind=kind)
    outputs = _versions(observe_outputs(desired, [run.name], outputs_seen), run.name)
    missing = sorted(name for name, version in outputs.items() if version is None)
    if missing:
        why = f"{NO_OUTPUTS}: {', '.join(missing)}"
        return Ending(
            job, record, Health.FAILED, exit_code, why, inputs, kind=EndingKind.NO_OUTPUTS
        )
    return Ending(job, record, Health.SUCCEEDED, exit_code, reason, inputs, outputs)


def _published(desired: Desired, run: DesiredRun, job: ObservedJob) -> bool:
    """Whether the job's script published every staged output before the job ended
    (``runfolder.published_marker``)."""
    return published_marker(run_path(desired, run), job.job_id).is_file()


def _checkpointed(desired: Desired, run: DesiredRun, job: ObservedJob) -> bool:
    """Whether the job's script found its command exited after the warning signal
    (``runfolder.checkpointed``)."""
    return checkpointed(run_path(desired, run), job.job_id).is_file()


def _unwritten(desired: Desired, run: DesiredRun, job: ObservedJob) -> list[str]:
    """The staged outputs a failed job's command did not write, as its script found
    (``runfolder.unwritten``); none for a job that failed otherwise."""
    try:
        names = unwritten(run_path(desired, run), job.job_id).read_text().split()
    except OSError:
        return []
    return sorted(set(names) & set(run.outputs))


def _successes(
    records: Sequence[SubmissionRecord],
) -> dict[tuple[str, str], list[SubmissionRecord]]:
    """The journal's recorded successes of each run and spec."""
    found: dict[tuple[str, str], list[SubmissionRecord]] = {}
    for record in records:
        if record.kind == "run" and record.final_health is Health.SUCCEEDED:
            found.setdefault((record.name, record.spec_hash), []).append(record)
    return found


def _skipped(
    desired: Desired,
    ending: Ending,
    successes: Mapping[tuple[str, str], list[SubmissionRecord]],
) -> Ending:
    """The ending as a skip, when the job left its marker and the success it matched is
    in the journal; else as it is (recorded as if it had run: what it read is what is
    there now)."""
    if ending.health is not Health.SUCCEEDED or ending.inputs is None:
        return ending
    job = ending.job
    run = desired.runs[job.tag.name]
    # The run's folder unresolved: one stat per success, as for its outputs.
    markers = skipped_markers(run_path(desired, run), job.job_id)  # an earlier release's too
    if not any(os.path.exists(marker) for marker in markers):
        return ending
    earlier = [
        record
        for record in successes.get((run.name, run.spec_hash), ())
        if record.job_id is not None and job_order(record.job_id) < job_order(job.job_id)
    ]
    if not earlier:
        return ending
    matched = max(earlier, key=lambda record: job_order(record.job_id or "")).input_versions
    if not set(run.inputs) <= set(matched):
        return ending  # what it matched is not known in full: judged as if it ran
    return replace(ending, reason=SKIPPED, matched=matched, kind=EndingKind.SKIPPED)


def _usage_json(usage: JobUsage | None) -> str | None:
    return None if usage is None else json.dumps(usage.to_json())


def digests(versions: Mapping[str, OutputVersion | None]) -> dict[str, str | None]:
    return {name: v.digest if v else None for name, v in versions.items()}


def _versions(
    observed: dict[tuple[str, str], OutputVersion | None], run: str
) -> dict[str, OutputVersion | None]:
    return {name: version for (owner, name), version in observed.items() if owner == run}


def _input_versions(
    desired: Desired, run: DesiredRun, outputs_seen: OutputsSeen
) -> dict[str, OutputVersion | None]:
    """The versions the run's inputs have now: what the job just read, as near as can be
    told after the fact (upstreams do not change while their downstream runs)."""
    external = _versions(observe_inputs(desired, [run.name]), run.name)
    versions: dict[str, OutputVersion | None] = {}
    for name, spec_input in run.inputs.items():
        if name in run.gathers:
            output = spec_input.upstream[1] if spec_input.upstream else name
            members = observe_outputs(desired, run.gathers[name], outputs_seen)
            versions[name] = gathered(
                {member: members[(member, output)] for member in run.gathers[name]}
            )
        elif spec_input.upstream is None:
            versions[name] = external.get(name)
        else:
            upstream, output = spec_input.upstream
            versions[name] = observe_outputs(desired, [upstream], outputs_seen)[(upstream, output)]
    return versions
