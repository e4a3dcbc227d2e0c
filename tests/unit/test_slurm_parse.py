"""The sacct and squeue parsers, on literal text as Slurm 22.05 printed it."""

# ruff: noqa: E501  (Slurm's rows are kept verbatim, whatever their length)

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from reconciler.scheduler.base import JobRecord
from reconciler.scheduler.slurm import parse
from reconciler.scheduler.slurm.parse import (
    SACCT_FIELDS,
    SQUEUE_FIELDS,
    parse_granted,
    parse_sacct,
    parse_squeue,
    parse_submitted,
    recon_rows,
)
from reconciler.scheduler.states import SlurmState
from reconciler.scheduler.tag import Tag

TAG = "recon2:probe:0123456789ab:run:het:0123456789abcdef"


def at(hh_mm_ss: str) -> datetime:
    return datetime.fromisoformat(f"2026-11-29T{hh_mm_ss}").replace(tzinfo=UTC)


# sacct --parsable2 --noheader --format=JobID,JobIDRaw,State,ExitCode,Reason,Submit,Start,End,
#   NodeList,Partition,JobName,Comment  (a het job, a failed upstream, its cancelled dependent,
#   an array with one failed task, a user cancel, a held job cancelled while pending)
SACCT = f"""\
5+0|5|COMPLETED|0:0|None|2026-11-29T22:41:04|2026-11-29T22:41:04|2026-11-29T22:41:07|cpu1|cpu|||||||probe.het|{TAG}
5+0.batch|5.batch|COMPLETED|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|2026-11-29T22:41:07|cpu1||||||||batch|
5+1|6|COMPLETED|0:0|None|2026-11-29T22:41:04|2026-11-29T22:41:04|2026-11-29T22:41:07|gpu1|gpu|||||||probe.het|{TAG}
5+1.0|6.0|COMPLETED|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|2026-11-29T22:41:04|gpu1||||||||bash|
7|7|FAILED|1:0|None|2026-11-29T22:41:18|2026-11-29T22:41:18|2026-11-29T22:41:18|cpu1|cpu|||||||sbatch|probe-up
7.batch|7.batch|FAILED|1:0||2026-11-29T22:41:18|2026-11-29T22:41:18|2026-11-29T22:41:18|cpu1||||||||batch|
8|8|CANCELLED|0:0|Dependency|2026-11-29T22:41:18|2026-11-29T22:41:18|2026-11-29T22:41:18|None assigned|cpu|||||||sbatch|probe-down
9_5|13|FAILED|1:0|JobArrayTaskLimit|2026-11-29T22:41:18|2026-11-29T22:41:21|2026-11-29T22:41:23|cpu1|cpu|||||||sbatch|probe-arr
9_5.batch|13.batch|FAILED|1:0||2026-11-29T22:41:21|2026-11-29T22:41:21|2026-11-29T22:41:23|cpu1||||||||batch|
9_[6-7%2]|9|PENDING|0:0|JobArrayTaskLimit|2026-11-29T22:41:18|Unknown|Unknown|None assigned|cpu|||||||sbatch|probe-arr
15|15|CANCELLED by 0|0:0|None|2026-11-29T22:41:38|2026-11-29T22:41:38|2026-11-29T22:41:41|cpu1|cpu|||||||sbatch|probe-run
15.batch|15.batch|CANCELLED|0:15||2026-11-29T22:41:38|2026-11-29T22:41:38|2026-11-29T22:41:41|cpu1||||||||batch|
15.extern|15.extern|CANCELLED+|0:0||2026-11-29T22:41:38|2026-11-29T22:41:38|2026-11-29T22:41:41|cpu1||||||||extern|
10|10|CANCELLED by 0|0:0|JobHeldUser|2026-11-29T22:41:18|None|2026-11-29T22:41:54|None assigned|cpu|||||||sbatch|probe-held
"""

# squeue --noheader --me --states=all --format=%i|%A|%T|%r|%N|%P|%V|%S|%L|%j|%k
SQUEUE = f"""\
8|8|CANCELLED|DependencyNeverSatisfied||cpu|2026-11-29T22:41:18|2026-11-29T22:41:18|5:00||sbatch|probe-down
9_[5-7%2]|9|PENDING|JobArrayTaskLimit||cpu|2026-11-29T22:41:18|N/A|5:00||sbatch|probe-arr
10|10|PENDING|JobHeldUser||cpu|2026-11-29T22:41:18|N/A|5:00||sbatch|probe-held
9_3|11|RUNNING|None|cpu1|cpu|2026-11-29T22:41:18|2026-11-29T22:41:18|4:59||sbatch|probe-arr
16+0|16|RUNNING|None|cpu1|cpu|2026-11-29T22:41:38|2026-11-29T22:41:38|1-02:03:04||probe.het|{TAG}
16+1|17|RUNNING|None|gpu1|gpu|2026-11-29T22:41:38|2026-11-29T22:41:38|UNLIMITED||probe.het|{TAG}
19|19|PENDING|PartitionConfig||cpu|2026-11-29T22:41:50|2026-11-30T01:00:00|5:00||sbatch|(null)
"""


def test_the_column_lists_are_what_the_fixtures_hold() -> None:
    assert len(SACCT_FIELDS) == 18 and SACCT_FIELDS[-3:] == ("WorkDir", "JobName", "Comment")
    assert len(SQUEUE_FIELDS) == 12 and SQUEUE_FIELDS[-3:] == ("%Z", "%j", "%k")


def test_sacct_every_row_is_read() -> None:
    parsed = parse_sacct(SACCT, UTC)
    assert parsed.rejected == ()
    assert [r.job_id for r in parsed.records] == [line.split("|")[0] for line in SACCT.splitlines()]


def test_sacct_het_components_and_their_steps() -> None:
    rows = {r.job_id: r for r in parse_sacct(SACCT, UTC).records}
    leader, batch, second, step = rows["5+0"], rows["5+0.batch"], rows["5+1"], rows["5+1.0"]
    assert (leader.top_id, leader.het_offset, leader.step, leader.raw_id) == ("5", 0, None, "5")
    assert (batch.top_id, batch.het_offset, batch.step) == ("5", 0, "batch")
    assert (second.top_id, second.het_offset, second.raw_id) == ("5", 1, "6")
    assert (step.top_id, step.het_offset, step.step, step.raw_id) == ("5", 1, "0", "6.0")
    assert leader.tag == second.tag == Tag.parse(TAG)
    assert batch.tag is None and step.tag is None  # steps carry no comment
    assert (second.partition, second.nodes, step.partition) == ("gpu", "gpu1", None)
    assert leader.start == at("22:41:04") and leader.end == at("22:41:07")
    assert leader.reason is None and batch.reason is None  # "None" and "" both mean none


def test_sacct_exit_codes_and_signals() -> None:
    rows = {r.job_id: r for r in parse_sacct(SACCT, UTC).records}
    assert (rows["7"].state, rows["7"].exit_code, rows["7"].signal) == (SlurmState.FAILED, 1, 0)
    assert (rows["15.batch"].exit_code, rows["15.batch"].signal) == (0, 15)


def test_sacct_cancellations() -> None:
    rows = {r.job_id: r for r in parse_sacct(SACCT, UTC).records}
    by_user, by_slurm = rows["15"], rows["8"]
    assert (by_user.state, by_user.cancelled_by) == (SlurmState.CANCELLED, 0)
    assert (by_slurm.state, by_slurm.cancelled_by, by_slurm.reason) == (
        SlurmState.CANCELLED,
        None,
        "Dependency",
    )
    # Never ran: no nodes, and sacct's "start" (the cancel time) is not reported as one.
    assert by_slurm.nodes is None and by_slurm.start is None
    assert rows["15.extern"].state is SlurmState.CANCELLED  # "CANCELLED+", cut to width
    held = rows["10"]
    assert (held.start, held.end, held.reason) == (None, at("22:41:54"), "JobHeldUser")


def test_sacct_array_tasks_and_pending_range() -> None:
    rows = {r.job_id: r for r in parse_sacct(SACCT, UTC).records}
    task, step, pending = rows["9_5"], rows["9_5.batch"], rows["9_[6-7%2]"]
    assert (task.top_id, task.array_task, task.raw_id, task.het_offset) == ("9", "5", "13", None)
    assert (step.top_id, step.array_task, step.step) == ("9", "5", "batch")
    assert (pending.top_id, pending.array_task, pending.state) == (
        "9",
        "[6-7%2]",
        SlurmState.PENDING,
    )
    assert (pending.start, pending.end, pending.nodes) == (None, None, None)


def test_squeue_rows() -> None:
    parsed = parse_squeue(SQUEUE, UTC)
    assert parsed.rejected == ()
    rows = {r.job_id: r for r in parsed.records}
    assert all(r.source == "squeue" and r.exit_code is None for r in parsed.records)
    dependent = rows["8"]
    assert (dependent.state, dependent.reason) == (
        SlurmState.CANCELLED,
        "DependencyNeverSatisfied",  # squeue's word; sacct says "Dependency"
    )
    assert dependent.time_left is None  # frozen at 5:00 for a finished job: meaningless
    het = rows["16+1"]
    assert (het.top_id, het.het_offset, het.raw_id, het.nodes) == ("16", 1, "17", "gpu1")
    assert het.tag == Tag.parse(TAG) and het.time_left is None  # UNLIMITED
    assert rows["16+0"].time_left == timedelta(days=1, hours=2, minutes=3, seconds=4)
    assert rows["9_3"].time_left == timedelta(minutes=4, seconds=59)
    assert rows["9_[5-7%2]"].array_task == "[5-7%2]"
    # A pending job's start in squeue is an estimate, not a fact.
    assert rows["19"].start is None and rows["19"].tag is None
    assert rows["10"].submit == at("22:41:18")


@pytest.mark.parametrize(
    ("text", "tz_hours"),
    [("12|12|RUNNING|None|cpu1|cpu|2026-11-29T22:41:18|2026-11-29T22:41:19|1:00:00||x|y", 2)],
)
def test_times_are_read_in_the_zone_slurm_prints_them_in(text: str, tz_hours: int) -> None:
    from datetime import timezone

    zone = timezone(timedelta(hours=tz_hours))
    (row,) = parse_squeue(text, zone).records
    assert row.start == datetime(2026, 11, 29, 20, 41, 19, tzinfo=UTC)
    assert row.time_left == timedelta(hours=1)


@pytest.mark.parametrize("state", [s.value for s in SlurmState])
def test_every_state_reads_in_both_parsers(state: str) -> None:
    sacct = (
        f"3|3|{state}|0:0|None|2026-11-29T22:41:18|Unknown|Unknown|None assigned|cpu|||||||n|c\n"
    )
    squeue = f"3|3|{state}|None||cpu|2026-11-29T22:41:18|N/A|NOT_SET||n|c\n"
    assert parse_sacct(sacct, UTC).records[0].state == SlurmState(state)
    assert parse_squeue(squeue, UTC).records[0].state == SlurmState(state)


@pytest.mark.parametrize("text", ["", "\n", "\n\n  \n"])
def test_empty_output_is_no_rows(text: str) -> None:
    for parsed in (parse_sacct(text, UTC), parse_squeue(text, UTC)):
        assert parsed.records == () and parsed.rejected == ()


def test_unreadable_lines_are_skipped_and_reported_not_fatal() -> None:
    good = f"21|21|RUNNING|0:0|None|2026-11-29T22:41:50|2026-11-29T22:41:50|Unknown|cpu1|cpu|||||||a.b|{TAG}"
    bad = [
        "sacct: error: something odd",  # too few fields
        "22|22|EXPLODED|0:0|None|||Unknown|cpu1|cpu|||||||n|",  # unknown state
        "23|23|RUNNING|x:y|None|||Unknown|cpu1|cpu|||||||n|",  # bad exit code
        "24|24|RUNNING|0:0|None|yesterday||Unknown|cpu1|cpu|||||||n|",  # bad time
        "abc|24|RUNNING|0:0|None|||Unknown|cpu1|cpu|||||||n|",  # bad job id
    ]
    parsed = parse_sacct("\n".join([bad[0], good, *bad[1:]]), UTC)
    assert [r.job_id for r in parsed.records] == ["21"]
    assert [r.line for r in parsed.rejected] == bad
    assert "18" in parsed.rejected[0].why and "EXPLODED" in parsed.rejected[1].why


def test_a_pipe_in_a_foreign_name_or_comment_does_not_shift_the_columns() -> None:
    text = (
        "30|30|RUNNING|0:0|None|2026-11-29T22:41:50|2026-11-29T22:41:50|Unknown|cpu1|cpu||||||/w|a|b|c\n"
        f"31|31|FAILED|2:0|None|2026-11-29T22:41:50|2026-11-29T22:41:50|Unknown|cpu1|cpu||||||/w|x|y|{TAG}\n"
    )
    first, second = parse_sacct(text, UTC).records
    assert (first.state, first.name, first.tag) == (SlurmState.RUNNING, "a|b", None)
    assert (second.state, second.exit_code, second.tag) == (SlurmState.FAILED, 2, Tag.parse(TAG))


@pytest.mark.parametrize(
    ("stdout", "job_id"),
    [("12345\n", "12345"), ("12345;recondev\n", "12345"), ("", None), ("Submitted 1", None)],
)
def test_sbatch_parsable_output(stdout: str, job_id: str | None) -> None:
    assert parse_submitted(stdout) == job_id


def test_salloc_granted_message() -> None:
    stderr = (
        "salloc: Pending job allocation 21\n"
        "salloc: job 21 queued and waiting for resources\n"
        "salloc: job 21 has been allocated resources\n"
        "salloc: Granted job allocation 21\n"
    )
    assert parse_granted(stderr) == "21"
    assert parse_granted("salloc: Pending job allocation 21\n") is None


# --- which rows are read at all ---------------------------------------------------------

OTHERS = """\
40|40|COMPLETED|0:0|None|2026-11-29T22:41:04|2026-11-29T22:41:04|2026-11-29T22:41:07|cpu1|cpu|||||||analysis|
40.batch|40.batch|COMPLETED|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|2026-11-29T22:41:07|cpu1||||||||batch|
"""
RUNNING = """\
50|50|RUNNING|0:0|None|2026-11-29T22:41:04|2026-11-29T22:41:04|Unknown|cpu1|cpu|||||||probe.live|
50.batch|50.batch|RUNNING|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|Unknown|cpu1||||||||batch|
51|51|RUNNING|0:0|None|2026-11-29T22:41:04|2026-11-29T22:41:04|Unknown|cpu1|cpu|||||||probe.split|
51.0|51.0|RUNNING|0:0||2026-11-29T22:41:04|2026-11-29T22:41:04|Unknown|cpu1||||||||bash|
"""
# squeue: job 50 running with its tag (sacct shows no comment before the end), and a het
# job 49 whose component 49+1 has its own id 51 (sacct's 51 and 51.0 before it settles).
LIVE = f"""\
50|50|RUNNING|None|cpu1|cpu|2026-11-29T22:41:04|2026-11-29T22:41:04|9:00||probe.live|{TAG.replace("het", "live")}
49+1|51|RUNNING|None|gpu1|gpu|2026-11-29T22:41:04|2026-11-29T22:41:04|9:00||probe.split|{TAG}
"""


def test_only_rows_of_recons_jobs_are_kept_before_parsing() -> None:
    live = parse_squeue(LIVE, UTC).records
    kept = recon_rows(OTHERS + SACCT + RUNNING, live)
    ids = [line.split("|")[0] for line in kept.splitlines()]
    # Tagged jobs with all their rows (5+1.0 has no comment), the running job squeue
    # tags, and the component rows under their own id; job 40 and the untagged 7, 8, 9_5
    # are someone else's.
    assert ids == ["5+0", "5+0.batch", "5+1", "5+1.0", "50", "50.batch", "51", "51.0"]
    assert parse_sacct(kept, UTC).rejected == ()


def test_an_unreadable_row_that_holds_a_tag_is_kept_to_be_reported() -> None:
    kept = recon_rows(f"garbage|{TAG}\n" + OTHERS, ())
    assert kept == f"garbage|{TAG}\n"
    assert parse_sacct(kept, UTC).rejected[0].line == f"garbage|{TAG}"


def test_with_a_project_other_projects_rows_are_not_kept() -> None:
    other = TAG.replace("probe", "other")
    text = f"70|70|COMPLETED|0:0|None|||||cpu|||||||other.x|{other}\n70.batch|70.batch|COMPLETED|0:0|||||||||||||batch|\n"
    live = parse_squeue(LIVE, UTC).records
    assert recon_rows(text + SACCT, live, "other").splitlines()[:2] == text.splitlines()
    kept = recon_rows(text + SACCT + RUNNING, live, "probe")
    assert "70" not in [line.split("|")[0] for line in kept.splitlines()]
    assert kept == recon_rows(SACCT + RUNNING, live)


_ID_PART = st.text(alphabet="09٣²_.+[]-%ab \n|", max_size=4)


@given(
    st.one_of(
        st.text(alphabet="0123456789_.+[]-%abx \n|٣²", max_size=14),
        st.tuples(
            _ID_PART,
            st.sampled_from(["", "_", "+"]),
            _ID_PART,
            st.sampled_from(["", "."]),
            _ID_PART,
        ).map("".join),
    )
)
@example("²")
@example("1²_4")
@example("12_²")
@example("12.a b")
@example("12_4.batch.x")
@example("12\n")
def test_job_ids_read_without_the_pattern_read_as_the_pattern_reads_them(text: str) -> None:
    """job_id_parts reads the common forms (12, 12_4, 12_4.batch) without its pattern:
    every text must come out as the pattern alone reads it."""
    match = parse._JOB_ID.match(text)
    expected = (
        None
        if match is None
        else parse.JobIdParts(
            match["top"],
            None if match["het"] is None else int(match["het"]),
            match["array"],
            match["step"],
        )
    )
    assert parse.job_id_parts(text) == expected


def test_a_sacct_row_is_the_record_its_fields_make() -> None:
    """The sacct parser builds its records without JobRecord's __init__: each must equal
    the record __init__ makes of the same fields, every field set."""
    for record in parse_sacct(SACCT, UTC).records:
        fields = {field.name: getattr(record, field.name) for field in dataclasses.fields(record)}
        assert JobRecord(**fields) == record
