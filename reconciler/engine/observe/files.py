"""The files a plan compares: the versions on disk of outputs and external inputs
(``file_state``), and the committed code at the commits older jobs ran (``code_at``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.desired.desired import Desired
from reconciler.desired.source import committed_blobs
from reconciler.engine.plan.inputs import FileState
from reconciler.scheduler.base import Observation
from reconciler.scheduler.states import Health
from reconciler.state.outputs import OutputsSeen, observe_inputs, observe_outputs
from reconciler.state.records import SubmissionRecord


def file_state(
    desired: Desired,
    records: Sequence[SubmissionRecord],
    observation: Observation,
    outputs_seen: OutputsSeen | None = None,
    moving: Mapping[str, str] | None = None,
) -> FileState:
    """The versions on disk of what currency depends on: the outputs of runs that have
    succeeded (a run never run has nothing to look at), and external inputs. `moving`:
    a renamed run whose folder is still under its old name -> that folder."""
    succeeded = {
        r.name for r in records if r.kind == "run" and r.final_health is Health.SUCCEEDED
    } | {
        job.tag.name
        for job in observation.jobs
        if job.tag.project == desired.project.project
        and job.tag.kind == "run"
        and job.health is Health.SUCCEEDED
    }
    succeeded &= set(desired.runs)
    outputs = observe_outputs(desired, sorted(succeeded), outputs_seen, moving)
    inputs = observe_inputs(desired, sorted(succeeded))
    return FileState(
        outputs={key: v.digest if v else None for key, v in outputs.items()},
        inputs={key: v.digest if v else None for key, v in inputs.items()},
    )


def code_at(
    desired: Desired, records: Sequence[SubmissionRecord]
) -> dict[str, dict[str, str | None]]:
    """The committed files' blob ids at each commit the planner needs them for: that of
    a job of a run's current spec whose record does not carry the versions of every code
    file the run has now (a record an older recon wrote), so the files are compared with
    what that job ran. One `git ls-tree` per such commit, each commit once per process."""
    needed: set[str] = set()
    for record in records:
        if (
            record.kind != "run"
            or record.commit is None
            or record.commit == desired.commit
            or record.commit in needed
            or record.job_id is None
            or record.name not in desired.runs
        ):
            continue
        run = desired.runs[record.name]
        if record.spec_hash == run.spec_hash and any(
            path not in record.code_versions for path in run.code
        ):
            needed.add(record.commit)
    listed = {commit: committed_blobs(desired.root, commit) for commit in sorted(needed)}
    return {commit: files for commit, files in listed.items() if files is not None}
