"""The parsers on the same jobs as two Slurm releases printed them: 22.05.8 (Debian 12)
and 24.11.5 (Debian 13), captured on this project's two dev clusters, each in the same
minute with the same commands (recon's column lists).

The jobs: a het job whose second component ran a step on gpu1; a job that failed and its
dependent, cancelled by Slurm; an array of five tasks, two at a time, task 4 failing; a
job with an `srun --overlap` step, cancelled by the user while running; a held job
cancelled while pending; and a job asking more CPUs than any node has. The releases print
every one alike except the last (see test_a_job_no_node_can_hold, docs/arrays.md).

sacct's rows were read again from the same jobs, later the same day, once recon's column
list gained ElapsedRaw, TimelimitRaw and AllocTRES; the one job still pending when first
captured (22.05's 3721) keeps the row it had then, with what sacct prints for a pending
job in those columns (0, its limit, nothing allocated). The two columns asked for since
right-sizing, MaxRSS and TotalCPU, came after both captures and are left blank here;
tests/unit/test_slurm_accounting.py reads them from rows that hold them.
"""

# ruff: noqa: E501  (Slurm's rows are kept verbatim, whatever their length)

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC

import pytest

from reconciler.scheduler.slurm.parse import parse_sacct, parse_squeue, parse_squeue_steps
from reconciler.scheduler.slurm.release import parse_release
from reconciler.scheduler.states import SlurmState
from reconciler.scheduler.tag import Tag

TAG = "recon2:probe:0123456789ab:run:het:0123456789abcdef"


@dataclass(frozen=True)
class Capture:
    version: str  # `sinfo --version`
    ids: dict[str, str]  # what sbatch --parsable returned for each job
    sacct: str  # sacct --parsable2 --noheader --format=<SACCT_FIELDS> --state=<all> ...
    squeue: str  # squeue --noheader --me --states=all --format=<SQUEUE_FORMAT>
    steps: str  # squeue --noheader --me --steps -O <SQUEUE_STEP_FORMAT>


SLURM_22_05 = Capture(
    version="slurm-wlm 22.05.8\n",
    ids={
        "het": "3714",
        "up": "3716",
        "down": "3717",
        "arr": "3718",
        "run": "3719",
        "held": "3720",
        "huge": "3721",
    },
    sacct=f"""\
3714+0|3714|COMPLETED|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:14|cpu2|cpu|16|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2205|probe.het|{TAG}
3714+0.batch|3714.batch|COMPLETED|0:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:14|cpu2||16||cpu=1,mem=100M,node=1||||batch|
3714+1|3715|COMPLETED|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:14|gpu1|gpu|16|5|billing=1,cpu=1,gres/gpu=2,mem=100M,node=1|||/tmp/s24/cap2205|probe.het|{TAG}
3714+1.0|3715.0|COMPLETED|0:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:59|gpu1||1||cpu=1,gres/gpu=2,mem=100M,node=1||||bash|
3716|3716|FAILED|1:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2|cpu|0|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2205|wrap|capt-up
3716.batch|3716.batch|FAILED|1:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2||0||cpu=1,mem=100M,node=1||||batch|
3717|3717|CANCELLED|0:0|None|2026-12-02T16:49:58|None|2026-12-02T16:49:59|None assigned|cpu|0|5||||/tmp/s24/cap2205|wrap|capt-down
3719|3719|CANCELLED by 0|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:04|cpu2|cpu|6|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2205|wrap|capt-run
3719.batch|3719.batch|CANCELLED|0:15||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:04|cpu2||6||cpu=1,mem=100M,node=1||||batch|
3719.0|3719.0|CANCELLED|0:15||2026-12-02T16:49:59|2026-12-02T16:49:59|2026-12-02T16:50:04|cpu2||5||cpu=1,mem=100M,node=1||||sleep|
3720|3720|CANCELLED by 0|0:0|None|2026-12-02T16:49:58|None|2026-12-02T16:50:04|None assigned|cpu|0|5||||/tmp/s24/cap2205|wrap|capt-held
3718_3|3722|COMPLETED|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:18|cpu2|cpu|20|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2205|wrap|capt-arr
3718_3.batch|3722.batch|COMPLETED|0:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:18|cpu2||20||cpu=1,mem=100M,node=1||||batch|
3718_4|3723|FAILED|1:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2|cpu|0|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2205|wrap|capt-arr
3718_4.batch|3723.batch|FAILED|1:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2||0||cpu=1,mem=100M,node=1||||batch|
3718_5|3724|COMPLETED|0:0|JobArrayTaskLimit|2026-12-02T16:49:58|2026-12-02T16:49:59|2026-12-02T16:50:19|cpu2|cpu|20|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2205|wrap|capt-arr
3718_5.batch|3724.batch|COMPLETED|0:0||2026-12-02T16:49:59|2026-12-02T16:49:59|2026-12-02T16:50:19|cpu2||20||cpu=1,mem=100M,node=1||||batch|
3721|3721|PENDING|0:0|None|2026-12-02T16:49:58|Unknown|Unknown|None assigned|cpu|0|5||||/tmp/s24/cap2205|wrap|
""",
    squeue=f"""\
3717|3717|CANCELLED|DependencyNeverSatisfied||cpu|2026-12-02T16:49:58|2026-12-02T16:49:59|5:00|/tmp/s24/cap2205|wrap|capt-down
3716|3716|FAILED|NonZeroExitCode|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|5:00|/tmp/s24/cap2205|wrap|capt-up
3718_4|3723|FAILED|NonZeroExitCode|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|5:00|/tmp/s24/cap2205|wrap|capt-arr
3718_[6-7%2]|3718|PENDING|JobArrayTaskLimit||cpu|2026-12-02T16:49:58|N/A|5:00|/tmp/s24/cap2205|wrap|capt-arr
3721|3721|PENDING|PartitionConfig||cpu|2026-12-02T16:49:58|N/A|5:00|/tmp/s24/cap2205|wrap|capt-huge
3720|3720|PENDING|JobHeldUser||cpu|2026-12-02T16:49:58|N/A|5:00|/tmp/s24/cap2205|wrap|capt-held
3714+0|3714|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2205|probe.het|{TAG}
3718_5|3724|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:59|4:55|/tmp/s24/cap2205|wrap|capt-arr
3718_3|3722|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2205|wrap|capt-arr
3719|3719|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2205|wrap|capt-run
3714+1|3715|RUNNING|None|gpu1|gpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2205|probe.het|{TAG}
""",
    steps="""\
3714.batch|RUNNING|2026-12-02T16:49:58|cpu2|batch
3719.0|RUNNING|2026-12-02T16:49:59|cpu2|sleep
3719.batch|RUNNING|2026-12-02T16:49:58|cpu2|batch
3718_3.batch|RUNNING|2026-12-02T16:49:58|cpu2|batch
3718_5.batch|RUNNING|2026-12-02T16:49:59|cpu2|batch
""",
)

SLURM_24_11 = Capture(
    version="slurm-wlm 24.11.5\n",
    ids={
        "het": "63",
        "up": "65",
        "down": "66",
        "arr": "67",
        "run": "68",
        "held": "69",
        "huge": "70",
    },
    sacct=f"""\
63+0|63|COMPLETED|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:13|cpu2|cpu|15|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2411|probe.het|{TAG}
63+0.batch|63.batch|COMPLETED|0:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:13|cpu2||15||cpu=1,mem=100M,node=1||||batch|
63+1|64|COMPLETED|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:13|gpu1|gpu|15|5|billing=1,cpu=1,gres/gpu=2,mem=100M,node=1|||/tmp/s24/cap2411|probe.het|{TAG}
63+1.0|64.0|COMPLETED|0:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|gpu1||0||cpu=1,gres/gpu=2,mem=100M,node=1||||bash|
65|65|FAILED|1:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2|cpu|0|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2411|wrap|capt-up
65.batch|65.batch|FAILED|1:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2||0||cpu=1,mem=100M,node=1||||batch|
66|66|CANCELLED|0:0|None|2026-12-02T16:49:58|None|2026-12-02T16:49:58|None assigned|cpu|0|5||||/tmp/s24/cap2411|wrap|capt-down
68|68|CANCELLED by 0|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:04|cpu2|cpu|6|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2411|wrap|capt-run
68.batch|68.batch|CANCELLED|0:15||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:04|cpu2||6||cpu=1,mem=100M,node=1||||batch|
68.0|68.0|CANCELLED|0:15||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:04|cpu2||6||cpu=1,mem=100M,node=1||||sleep|
69|69|CANCELLED by 0|0:0|None|2026-12-02T16:49:58|None|2026-12-02T16:50:04|None assigned|cpu|0|5||||/tmp/s24/cap2411|wrap|capt-held
70|70|FAILED|1:0|None|2026-12-02T16:49:58|None|2026-12-02T16:49:58|None assigned|cpu|0|5||||/tmp/s24/cap2411|wrap|capt-huge
67_3|71|COMPLETED|0:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:18|cpu2|cpu|20|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2411|wrap|capt-arr
67_3.batch|71.batch|COMPLETED|0:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:18|cpu2||20||cpu=1,mem=100M,node=1||||batch|
67_4|72|FAILED|1:0|None|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2|cpu|0|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2411|wrap|capt-arr
67_4.batch|72.batch|FAILED|1:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:49:58|cpu2||0||cpu=1,mem=100M,node=1||||batch|
67_5|73|COMPLETED|0:0|JobArrayTaskLimit|2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:19|cpu2|cpu|21|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/s24/cap2411|wrap|capt-arr
67_5.batch|73.batch|COMPLETED|0:0||2026-12-02T16:49:58|2026-12-02T16:49:58|2026-12-02T16:50:19|cpu2||21||cpu=1,mem=100M,node=1||||batch|
""",
    squeue=f"""\
66|66|CANCELLED|DependencyNeverSatisfied||cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|5:00|/tmp/s24/cap2411|wrap|capt-down
65|65|FAILED|NonZeroExitCode|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|5:00|/tmp/s24/cap2411|wrap|capt-up
70|70|FAILED|BadConstraints||cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|5:00|/tmp/s24/cap2411|wrap|capt-huge
67_4|72|FAILED|NonZeroExitCode|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|5:00|/tmp/s24/cap2411|wrap|capt-arr
67_[6-7%2]|67|PENDING|JobArrayTaskLimit||cpu|2026-12-02T16:49:58|N/A|5:00|/tmp/s24/cap2411|wrap|capt-arr
69|69|PENDING|JobHeldUser||cpu|2026-12-02T16:49:58|N/A|5:00|/tmp/s24/cap2411|wrap|capt-held
63+0|63|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2411|probe.het|{TAG}
67_3|71|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2411|wrap|capt-arr
68|68|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2411|wrap|capt-run
67_5|73|RUNNING|None|cpu2|cpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2411|wrap|capt-arr
63+1|64|RUNNING|None|gpu1|gpu|2026-12-02T16:49:58|2026-12-02T16:49:58|4:54|/tmp/s24/cap2411|probe.het|{TAG}
""",
    steps="""\
63.batch|RUNNING|2026-12-02T16:49:58|cpu2|batch
68.0|RUNNING|2026-12-02T16:49:58|cpu2|sleep
68.batch|RUNNING|2026-12-02T16:49:58|cpu2|batch
67_3.batch|RUNNING|2026-12-02T16:49:58|cpu2|batch
67_5.batch|RUNNING|2026-12-02T16:49:58|cpu2|batch
""",
)

CAPTURES = [pytest.param(SLURM_22_05, id="22.05"), pytest.param(SLURM_24_11, id="24.11")]


def test_the_captures_name_their_releases() -> None:
    assert parse_release(SLURM_22_05.version) == (22, 5)
    assert parse_release(SLURM_24_11.version) == (24, 11)
    assert parse_release("slurm 23.02.7") == (23, 2)
    assert parse_release("sinfo: command not found") is None


@pytest.mark.parametrize("capture", CAPTURES)
def test_every_row_of_every_command_is_read(capture: Capture) -> None:
    for parsed, text in (
        (parse_sacct(capture.sacct, UTC), capture.sacct),
        (parse_squeue(capture.squeue, UTC), capture.squeue),
        (parse_squeue_steps(capture.steps, UTC), capture.steps),
    ):
        assert parsed.rejected == ()
        assert len(parsed.records) == len(text.splitlines())


@pytest.mark.parametrize("capture", CAPTURES)
def test_het_components_read_alike(capture: Capture) -> None:
    het = capture.ids["het"]
    second = str(int(het) + 1)
    rows = {r.job_id: r for r in parse_sacct(capture.sacct, UTC).records}
    leader, step = rows[f"{het}+0"], rows[f"{het}+1.0"]
    assert (leader.top_id, leader.het_offset, leader.raw_id) == (het, 0, het)
    assert (step.top_id, step.het_offset, step.step, step.raw_id) == (het, 1, "0", f"{second}.0")
    assert leader.tag == rows[f"{het}+1"].tag == Tag.parse(TAG)
    live = {r.job_id: r for r in parse_squeue(capture.squeue, UTC).records}
    assert (live[f"{het}+1"].raw_id, live[f"{het}+1"].nodes) == (second, "gpu1")


@pytest.mark.parametrize("capture", CAPTURES)
def test_endings_read_alike(capture: Capture) -> None:
    ids = capture.ids
    rows = {r.job_id: r for r in parse_sacct(capture.sacct, UTC).records}
    up, down, run, held = rows[ids["up"]], rows[ids["down"]], rows[ids["run"]], rows[ids["held"]]
    assert (up.state, up.exit_code, up.signal) == (SlurmState.FAILED, 1, 0)
    # Cancelled by Slurm (its dependency failed): no uid, never started.
    assert (down.state, down.cancelled_by, down.start, down.nodes) == (
        SlurmState.CANCELLED, None, None, None,
    )  # fmt: skip
    assert (run.state, run.cancelled_by) == (SlurmState.CANCELLED, 0)
    assert (rows[f"{ids['run']}.0"].exit_code, rows[f"{ids['run']}.0"].signal) == (0, 15)
    assert (held.state, held.cancelled_by, held.start) == (SlurmState.CANCELLED, 0, None)
    live = {r.job_id: r for r in parse_squeue(capture.squeue, UTC).records}
    assert (live[ids["down"]].state, live[ids["down"]].reason) == (
        SlurmState.CANCELLED, "DependencyNeverSatisfied",
    )  # fmt: skip
    assert (live[ids["held"]].state, live[ids["held"]].reason) == (
        SlurmState.PENDING, "JobHeldUser",
    )  # fmt: skip


@pytest.mark.parametrize("capture", CAPTURES)
def test_array_tasks_and_the_pending_range_read_alike(capture: Capture) -> None:
    arr = capture.ids["arr"]
    live = {r.job_id: r for r in parse_squeue(capture.squeue, UTC).records}
    pending = live[f"{arr}_[6-7%2]"]
    assert (pending.top_id, pending.array_task, pending.raw_id, pending.reason) == (
        arr, "[6-7%2]", arr, "JobArrayTaskLimit",
    )  # fmt: skip
    assert live[f"{arr}_4"].state is SlurmState.FAILED
    rows = {r.job_id: r for r in parse_sacct(capture.sacct, UTC).records}
    failed = rows[f"{arr}_4"]
    assert (failed.top_id, failed.array_task, failed.exit_code) == (arr, "4", 1)
    assert rows[f"{arr}_4.batch"].step == "batch"
    steps = {r.job_id: r for r in parse_squeue_steps(capture.steps, UTC).records}
    assert (steps[f"{arr}_3.batch"].top_id, steps[f"{arr}_3.batch"].array_task) == (arr, "3")


@pytest.mark.parametrize("capture", CAPTURES)
def test_steps_read_alike(capture: Capture) -> None:
    run = capture.ids["run"]
    steps = {r.job_id: r for r in parse_squeue_steps(capture.steps, UTC).records}
    assert (steps[f"{run}.0"].step, steps[f"{run}.0"].name, steps[f"{run}.0"].state) == (
        "0", "sleep", SlurmState.RUNNING,
    )  # fmt: skip
    assert steps[f"{capture.ids['het']}.batch"].top_id == capture.ids["het"]


def test_a_job_no_node_can_hold() -> None:
    """The one difference: `--cpus-per-task=4096` on nodes of 8 CPUs.

    22.05 accepts it and it waits for ever (PartitionConfig; sacct lists it PENDING with
    no reason). 24.11's sbatch refuses it ("Requested node configuration is not
    available", exit 1), yet slurmctld has made the job: squeue and sacct show it FAILED
    (BadConstraints, exit 1:0), never started, on no node, with the comment it was given.
    """
    old = SLURM_22_05.ids["huge"]
    live = {r.job_id: r for r in parse_squeue(SLURM_22_05.squeue, UTC).records}[old]
    assert (live.state, live.reason, live.start) == (SlurmState.PENDING, "PartitionConfig", None)
    done = {r.job_id: r for r in parse_sacct(SLURM_22_05.sacct, UTC).records}[old]
    assert (done.state, done.reason, done.tag) == (SlurmState.PENDING, None, None)

    new = SLURM_24_11.ids["huge"]
    live = {r.job_id: r for r in parse_squeue(SLURM_24_11.squeue, UTC).records}[new]
    assert (live.state, live.reason, live.nodes) == (SlurmState.FAILED, "BadConstraints", None)
    done = {r.job_id: r for r in parse_sacct(SLURM_24_11.sacct, UTC).records}[new]
    assert (done.state, done.exit_code, done.start, done.nodes) == (
        SlurmState.FAILED, 1, None, None,
    )  # fmt: skip
