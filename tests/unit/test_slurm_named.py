"""sacct's second call names a job array by the ids the first call and squeue give, on
text captured from the dev cluster (Slurm 22.05) two seconds into a six-task array
(``--array=0-5%3``): tasks 0 and 1 ended, 2 to 4 running, 5 waiting.

In those seconds the window's jobs' own rows (``--allocations``) show the ended tasks
only under their own ids (``61835``, JobName ``allocation``, no partition: slurmdbd has
not tied them to the array yet) and the running ones not at all, while ``--jobs`` with
those ids and the array's lists every started task as the array's (``61834_0``), with
its batch step, once. Captured with the adapter's own commands; another project's rows
(``ktt2``) left as they came, two of many.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from reconciler.scheduler.base import Observation
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.slurm.testing import Result, ScriptedRunner, ok
from reconciler.scheduler.states import Health

TAG = "recon2:capture:0123456789ab:run:sweep:0123456789abcdef"
OTHER = "recon2:ktt2:a1d9373c9d2b:run:r198:a061b601284aa6a2"
NOW = datetime(2026, 12, 2, 0, 30, 16, tzinfo=UTC)

SQUEUE = f"""\
61833|61833|COMPLETED|None|cpu1|cpu|2026-12-02T00:30:07|2026-12-02T00:30:10|1:00|/tmp/approf/kt/runs/r198|ktt2.r198|{OTHER}
61834_0|61835|COMPLETED|None|cpu1|cpu|2026-12-02T00:30:13|2026-12-02T00:30:14|2:00|/tmp/sacctlive|capture.sweep|{TAG}
61834_1|61836|COMPLETED|None|cpu1|cpu|2026-12-02T00:30:13|2026-12-02T00:30:14|2:00|/tmp/sacctlive|capture.sweep|{TAG}
61834_5|61834|PENDING|JobArrayTaskLimit||cpu|2026-12-02T00:30:13|N/A|2:00|/tmp/sacctlive|capture.sweep|{TAG}
61834_3|61838|RUNNING|None|cpu1|cpu|2026-12-02T00:30:13|2026-12-02T00:30:15|1:58|/tmp/sacctlive|capture.sweep|{TAG}
61834_4|61839|RUNNING|None|cpu1|cpu|2026-12-02T00:30:13|2026-12-02T00:30:15|1:58|/tmp/sacctlive|capture.sweep|{TAG}
61834_2|61837|RUNNING|None|cpu1|cpu|2026-12-02T00:30:13|2026-12-02T00:30:14|1:57|/tmp/sacctlive|capture.sweep|{TAG}
"""

ALLOCATIONS = f"""\
61833|61833|COMPLETED|0:0|None|2026-12-02T00:30:07|2026-12-02T00:30:10|2026-12-02T00:30:10|cpu1|cpu||||||/tmp/approf/kt/runs/r198|ktt2.r198|{OTHER}
61835|61835|COMPLETED|0:0|None|2026-12-02T00:30:13|2026-12-02T00:30:14|2026-12-02T00:30:14|cpu1||||||||allocation|{TAG}
61836|61836|COMPLETED|0:0|None|2026-12-02T00:30:13|2026-12-02T00:30:14|2026-12-02T00:30:14|cpu1||||||||allocation|{TAG}
"""

NAMED = f"""\
61834_0|61835|COMPLETED|0:0|None|2026-12-02T00:30:13|2026-12-02T00:30:14|2026-12-02T00:30:14|cpu1|cpu||||||/tmp/sacctlive|capture.sweep|{TAG}
61834_0.batch|61835.batch|COMPLETED|0:0||2026-12-02T00:30:14|2026-12-02T00:30:14|2026-12-02T00:30:14|cpu1||||||||batch|
61834_1|61836|COMPLETED|0:0|None|2026-12-02T00:30:13|2026-12-02T00:30:14|2026-12-02T00:30:14|cpu1|cpu||||||/tmp/sacctlive|capture.sweep|{TAG}
61834_1.batch|61836.batch|COMPLETED|0:0||2026-12-02T00:30:14|2026-12-02T00:30:14|2026-12-02T00:30:14|cpu1||||||||batch|
61834_2|61837|RUNNING|0:0|None|2026-12-02T00:30:13|2026-12-02T00:30:14|Unknown|cpu1|cpu||||||/tmp/sacctlive|capture.sweep|
61834_2.batch|61837.batch|RUNNING|0:0||2026-12-02T00:30:14|2026-12-02T00:30:14|Unknown|cpu1||||||||batch|
61834_3|61838|RUNNING|0:0|JobArrayTaskLimit|2026-12-02T00:30:13|2026-12-02T00:30:15|Unknown|cpu1|cpu||||||/tmp/sacctlive|capture.sweep|
61834_3.batch|61838.batch|RUNNING|0:0||2026-12-02T00:30:15|2026-12-02T00:30:15|Unknown|cpu1||||||||batch|
61834_4|61839|RUNNING|0:0|JobArrayTaskLimit|2026-12-02T00:30:13|2026-12-02T00:30:15|Unknown|cpu1|cpu||||||/tmp/sacctlive|capture.sweep|
61834_4.batch|61839.batch|RUNNING|0:0||2026-12-02T00:30:15|2026-12-02T00:30:15|Unknown|cpu1||||||||batch|
"""


def _observed(squeue: str, named_rows: str) -> tuple[Observation, list[str], ScriptedRunner]:
    """One observation over the captured window: squeue's text, the first sacct call's
    ALLOCATIONS, and ``named_rows`` for the second; with the ``--jobs=`` it named."""
    named: list[str] = []

    def second(argv: Sequence[str], stdin: str | None) -> Result:
        named.extend(arg for arg in argv if arg.startswith("--jobs="))
        return ok(named_rows)

    runner = ScriptedRunner(squeue=[ok(squeue)], sacct=[ok(ALLOCATIONS), second])
    scheduler = SlurmScheduler(
        runner,
        clock=lambda: NOW,
        tz=UTC,
        user="root",
        project="capture",
        launches=lambda: (),
        history_at_once=False,  # the answers are scripted in order
    )
    return scheduler.observe(NOW - timedelta(minutes=5)), named, runner


def test_an_array_is_named_by_its_id_and_its_tasks_own_ids_and_every_task_is_observed() -> None:
    observation, named, runner = _observed(SQUEUE, NAMED)
    assert runner.commands() == ["squeue", "sacct", "sacct"]
    # The array's id (squeue's pending range holds it), the ended tasks' own ids (the
    # first call's tagged rows), the running tasks' own ids (squeue's %A); not ktt2's.
    assert named == ["--jobs=61834,61835,61836,61837,61838,61839"]
    assert observation.complete, observation.problems
    (job,) = observation.find("capture", "sweep")
    assert job.job_id == "61834"
    assert {index: task.health for index, task in job.tasks().items()} == {
        0: Health.SUCCEEDED,
        1: Health.SUCCEEDED,
        2: Health.RUNNING,
        3: Health.RUNNING,
        4: Health.RUNNING,
        5: Health.PENDING,
    }
    assert {task.job_id: [step.step for step in task.steps] for task in job.tasks().values()} == {
        **{f"61834_{index}": ["batch"] for index in range(5)},
        "61834_5": [],
    }


def test_tasks_the_first_call_shows_only_under_their_own_ids_are_named_by_them() -> None:
    """Once squeue has forgotten the ended tasks (MinJobAge) while the window's own rows
    still show them only under their own ids, those ids alone are named; ``sacct --jobs``
    lists a task named by its own id as the array's (``--jobs=29502`` printed
    ``29489_1|29502|...`` and its batch step on the dev cluster), so both are observed,
    as tasks of the array."""
    observation, named, _runner = _observed("", "".join(NAMED.splitlines(keepends=True)[:4]))
    assert named == ["--jobs=61835,61836"]
    assert observation.complete, observation.problems
    (job,) = observation.find("capture", "sweep")
    assert job.job_id == "61834"
    assert {index: task.health for index, task in job.tasks().items()} == {
        0: Health.SUCCEEDED,
        1: Health.SUCCEEDED,
    }
