"""Pure parsers of ``sacct --parsable2 --noheader`` and ``squeue -h -o`` text into JobRecords.

No I/O here: each parser takes the command's stdout and returns the rows it could read plus
the lines it could not, so one odd row from someone else's job never hides recon's.

The column lists live here, beside the code that reads them; ``argv`` imports them, so the
command asked for and the text parsed cannot drift apart. The two free-text columns (job
name, comment) come last: a ``|`` inside a foreign job's name or comment then only blurs
those two columns, never shifts the state or the times. recon's own names and tags never
hold ``|``, so its rows are always read exactly.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from datetime import datetime, timedelta, tzinfo
from typing import NamedTuple

from pydantic import BaseModel, ConfigDict

from reconciler.desired.resources import mig_fraction
from reconciler.scheduler.arrays import expand
from reconciler.scheduler.base import Held, JobRecord
from reconciler.scheduler.states import HEALTH, Health, SlurmState, parse_state
from reconciler.scheduler.tag import PREFIX, Tag

SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobIDRaw",
    "State",
    "ExitCode",
    "Reason",
    "Submit",
    "Start",
    "End",
    "NodeList",
    "Partition",
    "ElapsedRaw",
    "TimelimitRaw",
    "AllocTRES",
    "MaxRSS",
    "TotalCPU",
    "WorkDir",
    "JobName",
    "Comment",
)

# squeue -o codes, in the same spirit: fixed columns first, free text (name, comment) last.
SQUEUE_FIELDS: tuple[str, ...] = (
    "%i",  # job id: 12, 4+1, 12_4, 12_[3-5%2]
    "%A",  # the component's or task's own numeric id (sacct's JobIDRaw)
    "%T",  # state, long form
    "%r",  # reason
    "%N",  # nodes
    "%P",  # partition
    "%V",  # submit time
    "%S",  # start time (an estimate while pending)
    "%L",  # time left
    "%Z",  # working directory
    "%j",  # job name
    "%k",  # comment
)
SQUEUE_FORMAT = "|".join(SQUEUE_FIELDS)

# squeue --steps -O fields (its -o codes for steps have no state), each printed whole and
# followed by ``|``; the step's name, free text, last and unbounded.
SQUEUE_STEP_FIELDS: tuple[str, ...] = ("StepId", "StepState", "StartTime", "Nodes", "StepName")
SQUEUE_STEP_FORMAT = ",".join(f"{field}:|" for field in SQUEUE_STEP_FIELDS[:-1]) + (
    f",{SQUEUE_STEP_FIELDS[-1]}:"
)

_JOB_ID = re.compile(
    r"^(?P<top>\d+)"
    r"(?:\+(?P<het>\d+)|_(?P<array>\d+|\[[^\]]+\]))?"
    r"(?:\.(?P<step>[^.\s|]+))?$"
)
_TIME_LEFT = re.compile(r"^(?:(?P<d>\d+)-)?(?:(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+)$")
_EXIT_CODE = re.compile(r"^(?P<code>\d+):(?P<signal>\d+)$")
# What Slurm prints for "no value", column by column.
_NO_TIME = {"", "Unknown", "None", "N/A", "NONE"}
_NO_TEXT = {"", "None", "(null)", "None assigned", "n/a"}
_NO_TIME_LEFT = {"", "UNLIMITED", "NOT_SET", "INVALID", "N/A"}


class Rejected(BaseModel):
    """A line that could not be read, and why."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    line: str
    why: str


class Parsed(BaseModel):
    """What one command printed: the rows read and the lines rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    records: tuple[JobRecord, ...]
    rejected: tuple[Rejected, ...]


class JobIdParts(NamedTuple):
    """A job id taken apart: ``4+1.0`` is job 4, het offset 1, step 0."""

    top_id: str
    het_offset: int | None
    array_task: str | None
    step: str | None


class _Unreadable(ValueError):
    """One field of one line does not read; the line is rejected with this message."""


def parse_sacct(text: str, tz: tzinfo) -> Parsed:
    """Rows of ``sacct --parsable2 --noheader --format=<SACCT_FIELDS>``; times are in ``tz``."""
    cells = _Cells(tz)
    return _parse_lines(text, len(SACCT_FIELDS), _split, lambda row: _sacct_row(row, cells))


def recon_rows(text: str, live: Iterable[JobRecord], project: str | None = None) -> str:
    """The lines of sacct's text that may belong to recon's jobs, before any is parsed.

    A user's sacct can list a million rows, most of them other work: building a record
    of each cost seconds and gigabytes. Kept are the rows that hold a tag (a job's
    comment, or a step named with one), and every row of a job one of them or squeue
    (``live``) tags: a job's steps carry no comment, and sacct shows a running job's
    comment only once it ends. A row under a component's own id (``42.0`` for ``41+1.0``,
    see ``combine``) is kept when squeue lists that id for a job of recon's. With
    ``project``, only that project's tags count: a user's other projects' jobs are not read.
    """
    marker = _marker(project)
    tops, heads = _tagged(text, live, project)
    kept = []
    for line in text.splitlines(keepends=True):
        head = line.partition("|")[0].partition(".")[0]
        if head in heads or _top_of(head) in tops or marker in line:
            kept.append(line)
    return "".join(kept)


def recon_jobs(text: str, live: Iterable[JobRecord], project: str | None = None) -> list[str]:
    """The ids of recon's jobs (of ``project``'s, with one) that sacct's text tags or
    squeue (``live``) tags, with the component ids squeue lists for them: whose rows,
    steps included, ``recon_rows`` keeps. Read from the jobs' own rows (``sacct
    --allocations``), they say which jobs to ask sacct for in full (asking for a het job
    and its component both lists each row once)."""
    tops, heads = _tagged(text, live, project)
    return sorted(tops | heads, key=lambda job: (len(job), job))


def _marker(project: str | None) -> str:
    return f"{PREFIX}:" if project is None else f"{PREFIX}:{project}:"


def _tagged(text: str, live: Iterable[JobRecord], project: str | None) -> tuple[set[str], set[str]]:
    """The top ids of the jobs squeue or a tag in the text says are recon's, and the
    component ids squeue lists for them."""
    marker = _marker(project)
    live = list(live)
    tops = {
        row.top_id
        for row in live
        if row.tag is not None and (project is None or row.tag.project == project)
    }
    heads = {row.raw_id for row in live if row.raw_id and row.top_id in tops}
    found = text.find(marker)
    while found != -1:  # the tagged rows, found without splitting every line
        start = text.rfind("\n", 0, found) + 1
        end = text.find("\n", found)
        end = len(text) if end == -1 else end
        first = text.find("|", start, end)
        tops.add(_top_of(text[start : end if first == -1 else first]))
        found = text.find(marker, end)
    return tops, heads


def _top_of(job_id: str) -> str:
    """The id sbatch returned, from any id Slurm prints: 12 of 12+1, 12_4 or 12.batch."""
    return job_id.partition(".")[0].partition("+")[0].partition("_")[0]


def parse_squeue(text: str, tz: tzinfo) -> Parsed:
    """Rows of ``squeue -h -o <SQUEUE_FORMAT>``; times are in ``tz``."""
    cells = _Cells(tz)
    return _parse_lines(text, len(SQUEUE_FIELDS), _split, lambda row: _squeue_row(row, cells))


def parse_squeue_steps(text: str, tz: tzinfo) -> Parsed:
    """Rows of ``squeue --steps --noheader --Format=<SQUEUE_STEP_FORMAT>``: the steps
    slurmctld holds, read as steps of their jobs (a step's name may hold a tag)."""
    cells = _Cells(tz)
    width = len(SQUEUE_STEP_FIELDS)
    return _parse_lines(text, width, _split_name_last, lambda row: _squeue_step_row(row, cells))


class _Cells:
    """One command's cells read once per distinct text: the rows of a job array's tasks
    repeat the same few times, states and tag thousands of times over (a 10,000-task
    array's pass read each anew in two thirds of its time)."""

    def __init__(self, tz: tzinfo) -> None:
        self.tz = tz
        self._times: dict[str, datetime | None] = {}
        self._states: dict[str, tuple[SlurmState, int | None]] = {}
        self._tags: dict[str, Tag | None] = {}
        self._texts: dict[str, str | None] = {}
        self._exit_codes: dict[str, tuple[int | None, int | None]] = {}
        self._held: dict[str, Held | None] = {}
        self._cpu_times: dict[str, timedelta | None] = {}

    def text(self, text: str) -> str | None:
        """A free-text cell (reason, nodes, partition, working directory): None when empty."""
        try:
            return self._texts[text]
        except KeyError:
            read = self._texts[text] = _text(text)
            return read

    def exit_code(self, text: str) -> tuple[int | None, int | None]:
        try:
            return self._exit_codes[text]
        except KeyError:
            read = self._exit_codes[text] = _exit_code(text)
            return read

    # Each: one dict lookup when the text was read before (millions of cells a pass).
    def time(self, text: str) -> datetime | None:
        try:
            return self._times[text]
        except KeyError:
            read = self._times[text] = _time(text, self.tz)
            return read

    def state(self, text: str) -> tuple[SlurmState, int | None]:
        try:
            return self._states[text]
        except KeyError:
            read = self._states[text] = _state(text)
            return read

    def held(self, text: str) -> Held | None:
        if text not in self._held:
            self._held[text] = parse_tres(text)
        return self._held[text]

    def cpu_time(self, text: str) -> timedelta | None:
        """TotalCPU: a job's row repeats its one step's, and a pending job's is 00:00:00."""
        try:
            return self._cpu_times[text]
        except KeyError:
            read = self._cpu_times[text] = _cpu_time(text)
            return read

    def tag(self, text: str) -> Tag | None:
        try:
            return self._tags[text]
        except KeyError:
            read = self._tags[text] = Tag.parse(text)
            return read


def _parse_lines(
    text: str,
    width: int,
    split: Callable[[str, int], list[str] | None],
    read: Callable[[list[str]], JobRecord],
) -> Parsed:
    records: list[JobRecord] = []
    rejected: list[Rejected] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = split(line, width)
        if cells is None:
            rejected.append(Rejected(line=line, why=f"expected {width} '|'-separated fields"))
            continue
        try:
            records.append(read(cells))
        except _Unreadable as error:
            rejected.append(Rejected(line=line, why=str(error)))
    return Parsed(records=tuple(records), rejected=tuple(rejected))


def _split(line: str, width: int) -> list[str] | None:
    """Cells of a line; extra ``|`` belong to the job name, the one column that may hold them
    for recon's purposes (a tag never does, so the comment is always the last cell)."""
    cells = line.split("|")
    if len(cells) == width:  # no `|` in the name: what nearly every line is
        return cells
    if len(cells) < width:
        return None
    name = "|".join(cells[width - 2 : -1])
    return [*cells[: width - 2], name, cells[-1]]


def _split_name_last(line: str, width: int) -> list[str] | None:
    """Cells of a line whose one free-text column, the name, comes last."""
    cells = line.split("|")
    if len(cells) < width:
        return None
    return [*cells[: width - 1], "|".join(cells[width - 1 :])]


def _sacct_row(row: list[str], cells: _Cells) -> JobRecord:
    job_id, raw_id, state_text, exit_code, reason, submit, start, end = row[:8]
    nodes, partition, elapsed, limit, tres, max_rss, total_cpu, workdir, name, comment = row[8:]
    ids = _job_id(job_id)
    state, cancelled_by = cells.state(state_text)
    code, signal = cells.exit_code(exit_code)
    # Every field set here, without JobRecord's generated __init__: a frozen dataclass's
    # sets each field through a lookup of object.__setattr__ and checks the top id,
    # which _job_id has read as digits already; 300,000 rows of a sweep's tasks took 0.4 s
    # longer that way (tests/unit/test_slurm_parse.py checks every field is set).
    record = _new(JobRecord)
    _set(record, "job_id", job_id)
    _set(record, "top_id", ids.top_id)
    _set(record, "raw_id", raw_id or None)
    _set(record, "het_offset", ids.het_offset)
    _set(record, "array_task", ids.array_task)
    _set(record, "step", ids.step)
    _set(record, "name", name)
    _set(record, "tag", cells.tag(comment))
    _set(record, "state", state)
    _set(record, "cancelled_by", cancelled_by)
    _set(record, "exit_code", code)
    _set(record, "signal", signal)
    _set(record, "reason", cells.text(reason))
    _set(record, "submit", cells.time(submit))
    _set(record, "start", _start(start, state, nodes, cells))
    _set(record, "end", cells.time(end))
    _set(record, "time_left", None)
    _set(record, "nodes", cells.text(nodes))
    _set(record, "partition", cells.text(partition))
    _set(record, "workdir", cells.text(workdir))
    _set(record, "elapsed", _seconds(elapsed))
    _set(record, "time_limit", _minutes(limit))
    _set(record, "held", cells.held(tres))
    _set(record, "peak_memory_mb", _peak_megabytes(max_rss))
    _set(record, "cpu_time", cells.cpu_time(total_cpu))
    _set(record, "source", "sacct")
    return record


_new = object.__new__
_set = object.__setattr__


def _squeue_row(row: list[str], cells: _Cells) -> JobRecord:
    job_id, raw_id, state_text, reason, nodes, partition, submit, start, left = row[:9]
    workdir, name, comment = row[9:]
    ids = _job_id(job_id)
    state, _ = cells.state(state_text)
    return JobRecord(
        job_id=job_id,
        raw_id=raw_id or None,
        top_id=ids.top_id,
        het_offset=ids.het_offset,
        array_task=ids.array_task,
        step=ids.step,
        name=name,
        tag=cells.tag(comment),
        state=state,
        reason=_text(reason),
        submit=cells.time(submit),
        start=_start(start, state, nodes, cells),
        # Time left means something only while the job holds its allocation (squeue keeps
        # printing it, frozen, for a finished job).
        time_left=_time_left(left) if HEALTH[state] is Health.RUNNING else None,
        nodes=_text(nodes),
        partition=_text(partition),
        workdir=_text(workdir),
        source="squeue",
    )


def _squeue_step_row(row: list[str], cells: _Cells) -> JobRecord:
    step_id, state_text, start, nodes, name = row
    ids = _job_id(step_id)
    if ids.step is None:
        raise _Unreadable(f"not a step id {step_id!r}")
    state, _ = cells.state(state_text)
    return JobRecord(
        job_id=step_id,
        top_id=ids.top_id,
        het_offset=ids.het_offset,
        array_task=ids.array_task,
        step=ids.step,
        name=name,
        state=state,
        start=_start(start, state, nodes, cells),
        nodes=_text(nodes),
        source="squeue",
    )


def parse_submitted(stdout: str) -> str | None:
    """The job id ``sbatch --parsable`` printed: ``12345`` or ``12345;cluster``."""
    match = re.fullmatch(r"(\d+)(?:;\S+)?", stdout.strip())
    return match[1] if match else None


def parse_max_array_size(config: str) -> int | None:
    """MaxArraySize from ``scontrol show config`` (``MaxArraySize            = 1001``)."""
    match = re.search(r"^MaxArraySize\s*=\s*(\d+)\s*$", config, re.MULTILINE)
    return int(match[1]) if match else None


def parse_granted(stderr: str) -> str | None:
    """The job id of ``salloc: Granted job allocation 21`` (salloc talks on stderr)."""
    match = re.search(r"Granted job allocation (\d+)", stderr)
    return match[1] if match else None


def _start(text: str, state: SlurmState, nodes: str, cells: _Cells) -> datetime | None:
    """When the job really started, or None: a pending job's start is squeue's estimate,
    and a job cancelled before it got nodes shows its cancel time as its start in sacct."""
    if HEALTH[state] is Health.PENDING or cells.text(nodes) is None:
        return None
    return cells.time(text)


def job_id_parts(text: str) -> JobIdParts | None:
    """The parts of a job id as Slurm prints it, or None for a form Slurm does not print."""
    # The forms of nearly every row (a job, a task, either's step: 12, 12_4, 12_4.batch)
    # read without the pattern, as it reads them: 300,000 rows of a sweep's tasks.
    head, dot, step = text.partition(".")
    top, underscore, task = head.partition("_")
    if top.isdecimal() and (not underscore or task.isdecimal()) and (not dot or step.isalnum()):
        return JobIdParts(top, None, task if underscore else None, step if dot else None)
    match = _JOB_ID.match(text)
    if match is None:
        return None
    het = match["het"]
    return JobIdParts(
        match["top"], None if het is None else int(het), match["array"], match["step"]
    )


def _job_id(text: str) -> JobIdParts:
    parts = job_id_parts(text)
    if parts is None:
        raise _Unreadable(f"unknown job id form {text!r}")
    if parts.array_task is not None and not parts.array_task.isdigit():
        try:  # a pending range is read once here, so that no later reading of it fails
            expand(parts.array_task)
        except ValueError:
            raise _Unreadable(f"unknown array task range in job id {text!r}") from None
    return parts


def _state(text: str) -> tuple[SlurmState, int | None]:
    parsed = parse_state(text)
    if parsed is None:
        raise _Unreadable(f"unknown state {text!r}")
    return parsed


def _exit_code(text: str) -> tuple[int | None, int | None]:
    if not text:
        return None, None
    match = _EXIT_CODE.match(text)
    if match is None:
        raise _Unreadable(f"unknown exit code {text!r}")
    return int(match["code"]), int(match["signal"])


def _time(text: str, tz: tzinfo) -> datetime | None:
    if text in _NO_TIME:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise _Unreadable(f"unknown time {text!r}") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=tz)


def parse_tres(text: str) -> Held | None:
    """sacct's ``AllocTRES``: ``billing=2,cpu=2,gres/gpu=2,mem=500M,node=1``; None when
    empty (a job that never started holds nothing). GPUs are the untyped ``gres/gpu``
    count, or where only typed counts are accounted (``gres/gpu:a100=2``) their sum;
    MIG slices typed so (``gres/gpu:1g.10gb=1``) are valued at their share of a GPU, and
    GPU shards (``gres/shard=2``) are counted;
    other TRES (billing, energy, licences) are not read."""
    if not text.strip():
        return None
    counts: dict[str, str] = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        if not sep:
            raise _Unreadable(f"unknown TRES {item!r} in {text!r}")
        counts[key.strip()] = value.strip()
    typed = {
        key.removeprefix("gres/gpu:"): _count(value)
        for key, value in counts.items()
        if key.startswith("gres/gpu:")
    }
    gpus = _count(counts["gres/gpu"]) if "gres/gpu" in counts else sum(typed.values())
    # A MIG slice is worth its compute slices of a GPU (desired/resources.mig_fraction);
    # GPUs sacct does not type are whole ones.
    whole = max(gpus - sum(typed.values()), 0)
    worth = whole + sum(count * mig_fraction(kind) for kind, count in typed.items())
    shards = counts.get("gres/shard")
    return Held(
        cpus=_count(counts.get("cpu", "0")),
        gpus=gpus,
        memory_mb=_megabytes(counts.get("mem", "0")),
        nodes=_count(counts.get("node", "0")),
        gpu_value=None if worth == gpus else worth,
        shards=_count(shards) if shards is not None else 0,
    )


_MEMORY = re.compile(r"^(?P<amount>\d+(?:\.\d+)?)(?P<unit>[KMGTP]?)$")
_MEBIBYTES = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


def _count(text: str) -> int:
    if not text.isdigit():
        raise _Unreadable(f"unknown TRES count {text!r}")
    return int(text)


def _megabytes(text: str) -> int:
    match = _MEMORY.match(text)
    if match is None:
        raise _Unreadable(f"unknown memory {text!r}")
    return round(float(match["amount"]) * _MEBIBYTES[match["unit"]])


def _seconds(text: str) -> timedelta | None:
    """ElapsedRaw: whole seconds; empty on rows that predate it."""
    if not text.strip():
        return None
    if not text.isdigit():
        raise _Unreadable(f"unknown elapsed seconds {text!r}")
    return timedelta(seconds=int(text))


def _peak_megabytes(text: str) -> float | None:
    """MaxRSS: the most resident memory one task of a step held, ``123456K`` (Slurm picks
    the unit: K, M, G...); empty on a job's own row, on a step that had no gatherer
    (``JobAcctGatherType=jobacct_gather/none``) and on rows that predate it."""
    if not text:
        return None
    if text[-1] == "K" and text[:-1].isdigit():  # what nearly every step prints
        return int(text[:-1]) / 1024
    match = _MEMORY.match(text)
    if match is None:
        raise _Unreadable(f"unknown MaxRSS {text!r}")
    return float(match["amount"]) * _MEBIBYTES[match["unit"]]


_CPU_TIME = re.compile(r"^(?:(?:(?P<d>\d+)-)?(?P<h>\d+):)?(?P<m>\d+):(?P<s>\d+(?:\.\d+)?)$")


def _cpu_time(text: str) -> timedelta | None:
    """TotalCPU: user and system CPU time, ``[DD-[HH:]]MM:SS[.mmm]`` (``00:03.123``,
    ``01:02:03``, ``1-02:03:04``); empty on rows that predate it."""
    if not text:
        return None
    head, _, tail = text.partition(":")
    if head.isdigit() and tail.replace(".", "", 1).isdigit():  # MM:SS.mmm: most rows
        return timedelta(seconds=int(head) * 60 + float(tail))
    match = _CPU_TIME.match(text)
    if match is None:
        raise _Unreadable(f"unknown TotalCPU {text!r}")
    days, hours, minutes = (int(match[key] or 0) for key in ("d", "h", "m"))
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=float(match["s"]))


def _minutes(text: str) -> timedelta | None:
    """TimelimitRaw: minutes; empty on steps, ``UNLIMITED`` or ``Partition_Limit``
    where no limit of the job's own is set."""
    if not text.strip() or not text.isdigit():
        return None
    return timedelta(minutes=int(text))


def _time_left(text: str) -> timedelta | None:
    if text in _NO_TIME_LEFT:
        return None
    match = _TIME_LEFT.match(text)
    if match is None:
        raise _Unreadable(f"unknown time left {text!r}")
    days, hours, minutes, seconds = (int(match[key] or 0) for key in ("d", "h", "m", "s"))
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


def _text(text: str) -> str | None:
    return None if text.strip() in _NO_TEXT else text.strip()
