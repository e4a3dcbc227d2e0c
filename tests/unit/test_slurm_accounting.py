# ruff: noqa: E501  (Slurm's rows are kept verbatim, whatever their length)
"""Accounting read from sacct's own text: ``ElapsedRaw``, ``TimelimitRaw`` and
``AllocTRES`` parsed, and a job's usage (``scheduler/usage``) made of its rows.

The text is literal ``sacct --parsable2 --noheader --format=<SACCT_FIELDS>`` output from
the dev cluster (Slurm 22.05.8): a GPU job with a step, a failed job, a job array of three
tasks, a het job cancelled while both halves ran (one with a GPU), a held job cancelled
before it started, an allocation (``salloc --no-shell``) with one 3-second step, and a
job cancelled while it waited; then a GPU job caught running. Those captures predate
the MaxRSS and TotalCPU columns (blank in them); ``HUNGRY`` holds them, captured on both
dev clusters with an accounting gatherer.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

import pytest

from reconciler.scheduler.base import Held, JobRecord, ObservedJob
from reconciler.scheduler.slurm.parse import parse_sacct, parse_tres
from reconciler.scheduler.tag import Tag
from reconciler.scheduler.usage import JobUsage, usage_of

ENDED = """\
3585|3585|COMPLETED|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:41|gpu1|gpu|10|5|billing=2,cpu=2,gres/gpu=2,mem=500M,node=1|||/tmp/costcap|costcap-gpu|costcap
3585.batch|3585.batch|COMPLETED|0:0||2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:41|gpu1||10||cpu=2,gres/gpu=2,mem=500M,node=1||||batch|
3585.0|3585.0|COMPLETED|0:0||2026-12-02T16:38:39|2026-12-02T16:38:39|2026-12-02T16:38:41|gpu1||2||cpu=2,gres/gpu=2,mem=500M,node=1||||sleep|
3586|3586|FAILED|3:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:34|cpu2|cpu|3|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/costcap|costcap-fail|costcap
3586.batch|3586.batch|FAILED|3:0||2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:34|cpu2||3||cpu=1,mem=100M,node=1||||batch|
3588+0|3588|CANCELLED by 0|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:52|cpu2|cpu|21|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/costcap|costcap-het|costcap
3588+0.batch|3588.batch|CANCELLED|0:15||2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:52|cpu2||21||cpu=1,mem=100M,node=1||||batch|
3588+1|3589|CANCELLED by 0|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:52|gpu1|gpu|21|5|billing=2,cpu=2,gres/gpu=1,mem=200M,node=1|||/tmp/costcap|costcap-het|costcap
3590|3590|CANCELLED by 0|0:0|JobHeldUser|2026-12-02T16:38:31|None|2026-12-02T16:38:42|None assigned|cpu|0|5||||/tmp/costcap|costcap-pend|costcap
3591|3591|CANCELLED by 0|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:32|2026-12-02T16:38:52|gpu1|gpu|20|5|billing=2,cpu=2,gres/gpu=1,mem=300M,node=1|||/tmp/costcap|costcap-alloc|costcap
3591.0|3591.0|COMPLETED|0:0||2026-12-02T16:38:33|2026-12-02T16:38:33|2026-12-02T16:38:36|gpu1||3||cpu=2,gres/gpu=1,mem=300M,node=1||||sleep|
3587_0|3592|COMPLETED|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:35|cpu2|cpu|4|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/costcap|costcap-arr|costcap
3587_0.batch|3592.batch|COMPLETED|0:0||2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:35|cpu2||4||cpu=1,mem=100M,node=1||||batch|
3587_1|3593|COMPLETED|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:35|cpu2|cpu|4|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/costcap|costcap-arr|costcap
3587_1.batch|3593.batch|COMPLETED|0:0||2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:35|cpu2||4||cpu=1,mem=100M,node=1||||batch|
3587_2|3587|COMPLETED|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:35|cpu2|cpu|4|5|billing=1,cpu=1,mem=100M,node=1|||/tmp/costcap|costcap-arr|costcap
3587_2.batch|3587.batch|COMPLETED|0:0||2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:35|cpu2||4||cpu=1,mem=100M,node=1||||batch|
3594|3594|CANCELLED by 0|0:0|None|2026-12-02T16:39:06|None|2026-12-02T16:39:21|None assigned|cpu|0|5||||/tmp/costcap|costcap-run|costcap
"""

RUNNING = """\
3632|3632|RUNNING|0:0|None|2026-12-02T16:42:36|2026-12-02T16:42:36|Unknown|gpu1|gpu|3|5|billing=1,cpu=1,gres/gpu=1,mem=100M,node=1|||/tmp/costcap|costcap-run|
3632.batch|3632.batch|RUNNING|0:0||2026-12-02T16:42:36|2026-12-02T16:42:36|Unknown|gpu1||3||cpu=1,gres/gpu=1,mem=100M,node=1||||batch|
3632.0|3632.0|RUNNING|0:0||2026-12-02T16:42:36|2026-12-02T16:42:36|Unknown|gpu1||3||cpu=1,gres/gpu=1,mem=100M,node=1||||sleep|
"""

Result = subprocess.CompletedProcess[str]
TAG = Tag(project="costcap", deployment="0123456789ab", kind="run", name="x", spec_hash="0" * 16)


def jobs(text: str) -> dict[str, ObservedJob]:
    parsed = parse_sacct(text, UTC)
    assert parsed.rejected == ()
    tops: dict[str, list[JobRecord]] = {}
    for row in parsed.records:
        tops.setdefault(row.top_id, []).append(row)
    return {top: ObservedJob(job_id=top, tag=TAG, rows=tuple(rows)) for top, rows in tops.items()}


def test_the_accounting_columns_read_as_slurm_wrote_them() -> None:
    gpu = jobs(ENDED)["3585"]
    job, _batch, step = gpu.rows
    assert job.held == Held(cpus=2, gpus=2, memory_mb=500, nodes=1)
    assert (job.elapsed, job.time_limit) == (timedelta(seconds=10), timedelta(minutes=5))
    assert step.held == Held(cpus=2, gpus=2, memory_mb=500, nodes=1)
    assert (step.elapsed, step.time_limit) == (timedelta(seconds=2), None)
    never = jobs(ENDED)["3590"].rows[0]  # held, cancelled before it started
    assert (never.held, never.elapsed, never.start) == (None, timedelta(0), None)


@pytest.mark.parametrize(
    ("text", "held"),
    [
        (
            "billing=2,cpu=2,gres/gpu=2,mem=500M,node=1",
            Held(cpus=2, gpus=2, memory_mb=500, nodes=1),
        ),
        ("cpu=1,mem=100M,node=1", Held(cpus=1, memory_mb=100, nodes=1)),
        # clusters that account GPU types: the untyped count wins, else the typed ones add up
        (
            "cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=2G,node=2",
            Held(cpus=8, gpus=2, memory_mb=2048, nodes=2),
        ),
        (
            "cpu=8,gres/gpu:a100=2,gres/gpu:v100=1,mem=1.5G,node=1",
            Held(cpus=8, gpus=3, memory_mb=1536, nodes=1),
        ),
        ("", None),
    ],
)
def test_alloc_tres_forms(text: str, held: Held | None) -> None:
    assert parse_tres(text) == held


def test_an_unreadable_tres_rejects_the_row_not_the_pass() -> None:
    line = ENDED.splitlines()[0].replace("mem=500M", "mem=lots")
    parsed = parse_sacct(line + "\n" + ENDED, UTC)
    assert [r.line for r in parsed.rejected] == [line]
    assert "memory" in parsed.rejected[0].why


def test_a_gpu_job_holds_its_gpus_for_its_elapsed_time() -> None:
    usage = usage_of(jobs(ENDED)["3585"])
    assert usage is not None
    assert (usage.gpus, usage.cpus, usage.elapsed_s) == (2, 2, 10)
    assert (usage.gpu_s, usage.cpu_s, usage.wait_s) == (20, 20, 0)
    assert usage.time_limit_s == 300 and usage.idle_s == 0


def test_a_het_job_sums_its_components() -> None:
    usage = usage_of(jobs(ENDED)["3588"])
    assert usage is not None
    # +0: 1 CPU for 21 s; +1: 2 CPUs and 1 GPU for 21 s
    assert (usage.gpus, usage.cpus, usage.gpu_s, usage.cpu_s) == (1, 3, 21, 63)


def test_an_array_sums_its_tasks_and_each_task_is_its_own() -> None:
    array = jobs(ENDED)["3587"]
    usage = usage_of(array)
    assert usage is not None and (usage.cpu_s, usage.elapsed_s) == (12, 4)
    task = usage_of(array.tasks()[1])
    assert task is not None and (task.cpu_s, task.elapsed_s) == (4, 4)


def test_a_job_that_never_started_held_nothing_and_waited_until_it_ended() -> None:
    usage = usage_of(jobs(ENDED)["3594"])
    assert usage is not None
    assert (usage.gpu_s, usage.cpu_s, usage.started) == (0, 0, None)
    assert usage.wait_s == 15  # submitted 16:39:06, cancelled 16:39:21


def test_an_allocation_is_idle_while_no_step_of_its_own_runs() -> None:
    allocation = jobs(ENDED)["3591"]
    usage = usage_of(allocation, allocation=True)
    assert usage is not None
    # held 20 s with 1 GPU and 2 CPUs; its one step ran 16:38:33-16:38:36
    assert (usage.gpu_s, usage.cpu_s, usage.wait_s) == (20, 40, 1)
    assert (usage.idle_s, usage.idle_gpu_s, usage.idle_cpu_s) == (17, 17, 34)
    plain = usage_of(allocation)  # the same job as a run's: no idle time
    assert plain is not None and (plain.gpu_s, plain.idle_s) == (20, 0)


def test_a_running_job_has_held_its_gpu_so_far() -> None:
    usage = usage_of(jobs(RUNNING)["3632"])
    assert usage is not None
    assert (usage.gpu_s, usage.ended) == (3, None)


def test_usage_reads_back_from_its_json() -> None:
    usage = usage_of(jobs(ENDED)["3591"], allocation=True)
    assert usage is not None
    assert JobUsage.from_json(usage.to_json()) == usage
    assert usage.started == datetime(2026, 12, 2, 16, 38, 32, tzinfo=UTC)


def test_rows_without_accounting_give_no_usage() -> None:
    text = "\n".join(
        "|".join([*cells[:10], "", "", "", *cells[13:]])
        for cells in (line.split("|") for line in ENDED.splitlines()[:3])
    )
    assert usage_of(jobs(text)["3585"]) is None


def test_what_a_cancel_freed_is_what_its_cancelled_components_held() -> None:
    both = usage_of(jobs(ENDED)["3588"])  # cancelled while both halves ran
    assert both is not None and (both.cancelled_gpus, both.cancelled_cpus) == (1, 3)
    # the same het job, its GPU half having failed 10 s before the teardown
    gpu_half_failed = ENDED.replace(
        "3588+1|3589|CANCELLED by 0|0:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:52|gpu1|gpu|21",
        "3588+1|3589|FAILED|1:0|None|2026-12-02T16:38:31|2026-12-02T16:38:31|2026-12-02T16:38:42|gpu1|gpu|11",
    )
    usage = usage_of(jobs(gpu_half_failed)["3588"])
    assert usage is not None and (usage.gpus, usage.gpu_s, usage.cpu_s) == (1, 11, 43)
    assert (usage.cancelled_gpus, usage.cancelled_cpus) == (0, 1)
    done = usage_of(jobs(ENDED)["3585"])  # completed: its cancel freed nothing
    assert done is not None and (done.cancelled_gpus, done.cancelled_cpus) == (0, 0)


def test_a_running_allocation_is_idle_so_far_while_no_step_runs() -> None:
    # held 3 s so far (ElapsedRaw); its step started 1 s in and still runs
    text = RUNNING.replace(
        "3632.0|3632.0|RUNNING|0:0||2026-12-02T16:42:36|2026-12-02T16:42:36",
        "3632.0|3632.0|RUNNING|0:0||2026-12-02T16:42:37|2026-12-02T16:42:37",
    )
    usage = usage_of(jobs(text)["3632"], allocation=True)
    assert usage is not None and usage.ended is None
    assert (usage.gpu_s, usage.idle_s, usage.idle_gpu_s) == (3, 1, 1)


def test_usage_journalled_before_the_cancelled_split_reads_back_without_it() -> None:
    usage = usage_of(jobs(ENDED)["3588"])
    assert usage is not None
    older = {k: v for k, v in usage.to_json().items() if not k.startswith("cancelled_")}
    read = JobUsage.from_json(older)
    assert (read.gpu_s, read.cancelled_gpus, read.cancelled_cpus) == (21, None, None)


def test_the_accounting_of_named_jobs_is_asked_in_bounded_sacct_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`recon cost`'s back-fill: the jobs named by the ids sbatch returned (a step's, an
    array task's and a het component's own ids named by their job's), steps included, in
    the records' window; one sacct call per NAMED_JOBS_MAX jobs, no squeue."""
    from reconciler.errors import ObservationError
    from reconciler.scheduler.slurm import adapter
    from reconciler.scheduler.slurm.testing import ScriptedRunner, failed, ok

    tagged = ENDED.replace("|costcap\n", f"|{TAG.format()}\n")
    monkeypatch.setattr(adapter, "NAMED_JOBS_MAX", 2)

    def sacct(argv: Sequence[str], _stdin: str | None) -> Result:
        """sacct's rows of the jobs named, as it lists them."""
        named = next(a for a in argv if a.startswith("--jobs=")).split("=")[1].split(",")
        return ok("".join(f"{line}\n" for line in tagged.splitlines() if _top(line) in named))

    runner = ScriptedRunner(sacct=[sacct])
    slurm = adapter.SlurmScheduler(runner, tz=UTC, user="tester", project="costcap")
    since, until = datetime(2026, 12, 2, 15, tzinfo=UTC), datetime(2026, 12, 2, 18, tzinfo=UTC)
    listed = slurm.accounting(["3585", "3586", "3588+1", "3587_1", "3591.0"], since, until)
    assert runner.commands() == ["sacct", "sacct", "sacct"]  # 5 jobs, 2 a call
    named = [next(a for a in argv if a.startswith("--jobs=")) for argv, _ in runner.calls]
    assert named == ["--jobs=3585,3586", "--jobs=3587,3588", "--jobs=3591"]
    first = runner.calls[0][0]
    assert "--starttime=2026-12-02T15:00:00" in first and "--endtime=2026-12-02T18:00:00" in first
    assert "--allocations" not in first  # steps: an allocation's idle time needs them
    het = next(job for job in listed.jobs if job.job_id == "3588")
    usage = usage_of(het)
    assert usage is not None and (usage.gpu_s, usage.cpu_s) == (21, 63)
    assert {job.job_id for job in listed.jobs} >= {"3585", "3586", "3587", "3588", "3591"}
    broken = adapter.SlurmScheduler(
        ScriptedRunner(sacct=[failed("slurmdbd down")]), tz=UTC, user="tester"
    )
    with pytest.raises(ObservationError, match="sacct failed, usage not read: slurmdbd down"):
        broken.accounting(["3585"], since, until)


def _top(line: str) -> str:
    return line.split("|")[0].partition(".")[0].partition("_")[0].partition("+")[0]


# The same job on both dev clusters with an accounting gatherer (jobacct_gather/linux,
# JobAcctGatherFrequency=task=2), in recon's columns: a batch script that wrote 200 MiB
# and kept one CPU busy for 3 s. MaxRSS is on the step, TotalCPU on the job and its step.
HUNGRY = {
    "22.05.8": """\
24|24|COMPLETED|0:0|None|2026-12-07T16:52:53|2026-12-07T16:52:54|2026-12-07T16:52:57|cpu1|cpu|3|525600|billing=1,cpu=1,mem=1G,node=1||00:03.067|/tmp/i39probe|probe.hungry|i39probe
24.batch|24.batch|COMPLETED|0:0||2026-12-07T16:52:54|2026-12-07T16:52:54|2026-12-07T16:52:57|cpu1||3||cpu=1,mem=1G,node=1|221264K|00:03.067||batch|
""",
    "24.11.5": """\
13|13|COMPLETED|0:0|None|2026-12-07T16:53:09|2026-12-07T16:53:09|2026-12-07T16:53:12|cpu1|cpu|3|525600|billing=1,cpu=1,mem=1G,node=1||00:03.056|/tmp/i39probe|probe.hungry|i39probe
13.batch|13.batch|COMPLETED|0:0||2026-12-07T16:53:09|2026-12-07T16:53:09|2026-12-07T16:53:12|cpu1||3||cpu=1,mem=1G,node=1|216488K|00:03.056||batch|
""",
}


@pytest.mark.parametrize("release", sorted(HUNGRY))
def test_peak_memory_and_cpu_time_read_alike_on_both_releases(release: str) -> None:
    text = HUNGRY[release]
    (job,) = jobs(text).values()
    top, batch = job.rows
    assert (top.peak_memory_mb, batch.peak_memory_mb is not None) == (None, True)
    usage = usage_of(job)
    assert usage is not None and usage.node_memory_mb == 1024
    peak = 221264 / 1024 if release == "22.05.8" else 216488 / 1024
    assert usage.peak_memory_mb == pytest.approx(peak)
    # the job's row repeats its steps' CPU time (Slurm fills it from them): counted once
    seconds = 3.067 if release == "22.05.8" else 3.056
    assert usage.cpu_time_s == pytest.approx(seconds)


def test_without_a_gatherer_nothing_used_is_known_not_zero() -> None:
    """jobacct_gather/none (the dev cluster before it had one): every row has an empty
    MaxRSS and a TotalCPU of 00:00:00, whatever ran."""
    off = HUNGRY["22.05.8"].replace("221264K", "").replace("00:03.067", "00:00:00")
    usage = usage_of(next(iter(jobs(off).values())))
    assert usage is not None and usage.elapsed_s == 3
    assert (usage.peak_memory_mb, usage.cpu_time_s) == (None, None)


@pytest.mark.parametrize(
    ("max_rss", "total_cpu", "peak_mb", "cpu_s"),
    [
        ("204800K", "00:03.215", 200.0, 3.215),
        ("1.50G", "01:02:03", 1536.0, 3723.0),
        ("2048M", "1-02:03:04", 2048.0, 93784.0),
        ("0", "00:00.001", 0.0, 0.001),
    ],
)
def test_max_rss_and_total_cpu_in_each_form_slurm_prints(
    max_rss: str, total_cpu: str, peak_mb: float, cpu_s: float
) -> None:
    line = HUNGRY["24.11.5"].splitlines()[1].split("|")
    line[13:15] = [max_rss, total_cpu]
    (row,) = parse_sacct("|".join(line), UTC).records
    assert row.peak_memory_mb == pytest.approx(peak_mb)
    assert row.cpu_time is not None and row.cpu_time.total_seconds() == pytest.approx(cpu_s)


def test_an_unreadable_max_rss_or_total_cpu_rejects_the_line() -> None:
    line = HUNGRY["24.11.5"].splitlines()[1].split("|")
    for cell, bad in ((13, "lots"), (14, "3 s")):
        broken = [*line]
        broken[cell] = bad
        parsed = parse_sacct("|".join(broken), UTC)
        assert parsed.records == () and bad in parsed.rejected[0].why
