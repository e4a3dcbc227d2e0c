"""sacct's second call on the real dev cluster: naming recon's jobs (``--jobs``) and, past
``NAMED_JOBS_MAX`` of them, asking for the whole window must observe the same jobs, rows
and steps: array tasks (ended, running, one under the array's own id), a het job, a failed
job and a job cancelled while pending."""

from __future__ import annotations

import time
from dataclasses import replace
from datetime import UTC
from pathlib import Path
from typing import NamedTuple

import pytest

from reconciler.scheduler.base import ArrayRequest, JobRecord, Observation, SubmitRequest
from reconciler.scheduler.slurm import SlurmScheduler, adapter
from reconciler.scheduler.slurm.parse import SACCT_FIELDS, parse_squeue, recon_rows
from reconciler.scheduler.slurm.testing import RecordingRunner
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag
from tests.integration.test_slurm_adapter import HEADER, HET, Harness, final

pytestmark = pytest.mark.slurm

TIMEOUT = 60.0
TASKS = 8
# The last task sleeps: a running task under its own id, beside tasks that ended.
TASK_BODY = (
    f'#SBATCH --partition=cpu\nif [ "$SLURM_ARRAY_TASK_ID" = {TASKS - 1} ]; then sleep 300; fi\n'
)


def test_naming_recons_jobs_and_the_whole_window_observe_the_same(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recording = RecordingRunner()
    harness = Harness(tmp_path, SlurmScheduler(recording))
    # One sacct call after the other, to compare what the second one names and lists.
    harness.scheduler = SlurmScheduler(recording, project=harness.project, history_at_once=False)
    array = harness.scheduler.submit(
        SubmitRequest(
            script=HEADER + f"#SBATCH --output={tmp_path}/sweep-%A_%a.out\n" + TASK_BODY,
            workdir=tmp_path,
            tag=harness.tag("sweep"),
            array=ArrayRequest(indices=tuple(range(TASKS))),
        )
    )
    made = [array]
    try:
        made.append(harness.submit("ok", "#SBATCH --partition=cpu\ntrue\n"))
        made.append(harness.submit("bad", "#SBATCH --partition=cpu\nexit 3\n"))
        made.append(harness.submit("het", HET))
        held = harness.submit("held", "#SBATCH --partition=cpu\n#SBATCH --hold\ntrue\n")
        made.append(held)
        harness.scheduler.cancel(held)
        _settled(harness, recording)

        # Named: at the default limit, the second call names the project's jobs.
        named = _observe(harness, recording)
        (jobs_arg,) = [arg for arg in named.second_call if arg.startswith("--jobs=")]
        ours = jobs_arg.removeprefix("--jobs=").split(",")
        assert set(made) <= set(ours)
        # A job array is named once, by its id, however many tasks it has (and a running
        # task by the id squeue lists it under): the limit counts jobs, not tasks, and an
        # array of more tasks than the limit is still named.
        assert len(ours) <= len(made) + 1 < TASKS
        monkeypatch.setattr(adapter, "NAMED_JOBS_MAX", len(ours))
        assert _observe(harness, recording).second_call == named.second_call
        lines = named.sacct.splitlines()
        assert len(lines) == len(set(lines)), "sacct listed a row twice"
        listed = {line.partition("|")[0] for line in lines}
        # Naming the array's id lists every task, ended or running, each with its batch step.
        for task in range(TASKS):
            assert {f"{array}_{task}", f"{array}_{task}.batch"} <= listed, task
        het = made[3]
        assert {f"{het}+0", f"{het}+0.batch", f"{het}+1", f"{het}+1.0"} <= listed

        # Whole window: more of the project's jobs than the limit.
        monkeypatch.setattr(adapter, "NAMED_JOBS_MAX", len(ours) - 1)
        whole = _observe(harness, recording)
        assert not any(arg.startswith("--jobs=") for arg in whole.second_call)

        def kept(one: _Pass) -> set[str]:
            rows = recon_rows(one.sacct, one.squeue, harness.project).splitlines()
            return {_elapsed_left_out(line) for line in rows}

        assert kept(named) == kept(whole)

        def project_of(observation: Observation) -> dict[str, tuple[object, ...]]:
            """Its jobs of this project: others' (squeue lists every project's) move on."""
            return {
                job_id: seen
                for job_id, seen in _content(observation).items()
                if isinstance(seen[0], Tag) and seen[0].project == harness.project
            }

        assert project_of(named.observation) == project_of(whole.observation)
        assert named.observation.complete and whole.observation.complete
        # The jobs squeue lists asked for beside the first call, as a watch does (then
        # all of them after it: the ended ones are not listed): the same observation.
        at_once = SlurmScheduler(recording, project=harness.project).observe(harness.since)
        assert recording.commands()[-4:] == ["squeue", "sacct", "sacct", "sacct"]

        assert project_of(at_once) == project_of(named.observation)

        sweep = harness.job(named.observation, "sweep")
        assert sweep is not None
        healths = {index: task.health for index, task in sweep.tasks().items()}
        assert healths == {
            **{index: Health.SUCCEEDED for index in range(TASKS - 1)},
            TASKS - 1: Health.RUNNING,
        }
        states = {
            name: harness.job(named.observation, name) for name in ("ok", "bad", "het", "held")
        }
        assert {name: job.health for name, job in states.items() if job is not None} == {
            "ok": Health.SUCCEEDED,
            "bad": Health.FAILED,
            "het": Health.SUCCEEDED,
            "held": Health.CANCELLED,
        }
    finally:
        for job_id in made:
            harness.scheduler.cancel(job_id)


class _Pass(NamedTuple):
    observation: Observation
    squeue: tuple[JobRecord, ...]  # squeue's rows, as read
    sacct: str  # the second sacct call's text
    second_call: list[str]


def _settled(harness: Harness, recording: RecordingRunner) -> None:
    """Observe until nothing of the project's changes any more: every job over, accounted
    and forgotten by squeue (its rows then come from sacct alone), but the sweep's last
    task, running with its batch step accounted."""
    deadline = time.monotonic() + TIMEOUT
    seen = None
    while time.monotonic() < deadline:
        seen = harness.scheduler.observe(harness.since)
        jobs = {name: harness.job(seen, name) for name in ("ok", "bad", "het", "held")}
        sweep = harness.job(seen, "sweep")
        tasks = sweep.tasks() if sweep is not None else {}
        running = tasks.get(TASKS - 1)
        over = [*jobs.values(), *(tasks.get(index) for index in range(TASKS - 1))]
        if (
            running is not None
            and running.health is Health.RUNNING
            and any(step.step == "batch" and step.source == "sacct" for step in running.steps)
            and all(
                job is not None
                and final(job)
                and all(row.source == "sacct" for row in job.components)
                for job in over
            )
        ):
            return
        time.sleep(0.5)
    raise AssertionError(f"the project's jobs never settled in {TIMEOUT} s: {seen}")


def _observe(harness: Harness, recording: RecordingRunner) -> _Pass:
    recording.calls.clear()
    observation = harness.scheduler.observe(harness.since)
    assert recording.commands() == ["squeue", "sacct", "sacct"]
    squeue = parse_squeue(recording.stdout["squeue"], UTC).records
    return _Pass(observation, squeue, recording.stdout["sacct"], recording.calls[2])


def _content(observation: Observation) -> dict[str, tuple[object, ...]]:
    """Each job's tag and rows, in a fixed order; squeue's time left and a running job's
    elapsed time (which tick between two passes) left out."""
    return {
        job.job_id: (
            job.tag,
            job.health,
            tuple(
                sorted(
                    (
                        replace(row, time_left=None, elapsed=row.elapsed if row.end else None)
                        for row in job.rows
                    ),
                    key=repr,
                )
            ),
        )
        for job in observation.jobs
    }


def _elapsed_left_out(line: str) -> str:
    """A sacct line with its ElapsedRaw blank while the row has no end: it ticks."""
    cells = line.split("|")
    if len(cells) < len(SACCT_FIELDS) or cells[SACCT_FIELDS.index("End")] != "Unknown":
        return line
    cells[SACCT_FIELDS.index("ElapsedRaw")] = ""
    return "|".join(cells)
