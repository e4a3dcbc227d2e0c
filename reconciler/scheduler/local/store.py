"""The local backend's state on disk: one directory per job, facts written once each.

    <state_dir>/local/
        lock                the store's flock: ids, starts, cancels and endings are decided
                            under it (reads take no lock: every file is written by rename)
        next_id             the next job id
        cpus                how many CPUs the dispatcher may hand out
        gpus                the GPUs it may hand out, by device id (JSON; none if missing)
        active/<id>         one empty file per job not yet final: what a dispatch pass
                            reads, so its cost does not grow with every job ever run
        bin/srun            the shim local jobs find first on their PATH
        jobs/<id>/
            job.json        what was submitted: name, tag, workdir, dependencies, CPUs and
                            memory, log files, time limit and the signal to send before
                            it (--signal), submit time, and for an array's task
                            its array id, index, the array's size and cap
            script          the batch script, run as it is (its shebang picks the shell)
            env.json        the environment it runs in (mode 0600: it may be the submitter's),
                            less the variables passed by name (``passed``)
            passed.json     the names of the variables passed from the submitter: their
                            values are never written here; the supervisor takes them from
                            its own environment, which is that of the process starting it
                            (the recon that submitted the job, or the supervisor of the job
                            it waited for, and so on back to a recon)
            alive           flocked by the job's supervisor for as long as it lives
            started.json    when the dispatcher started it, and the GPUs and cores it
                            handed the job (``decide.Grant``)
            pid.json        the supervisor's pid and the script's process group
            cancelled.json  when and by whom it was cancelled, and why
            ended.json      when its script ended, with what exit code or signal, and
                            whether its time limit or memory limit ended it
        final.marshal       the four JSON files above (job, started, cancelled, ended) of
                            every final job the last observation read: they never change,
                            and one read of this file replaces four opens per ended job

A job's state is never stored: ``decide`` derives it from which of these files exist.
Only the standard library is imported here: supervisors import this module, and their
start-up time is part of every job's start.
"""

from __future__ import annotations

import contextlib
import marshal
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

from reconciler.scheduler.local.decide import NO_GRANT, Cancel, Ending, Grant, JobFacts
from reconciler.scheduler.local.directives import Component, WarningSignal
from reconciler.scheduler.local.environment import SRUN_SHIM
from reconciler.scheduler.local.files import (
    JsonObject,
    flocked,
    hold,
    is_held,
    read_json,
    write_atomic,
    write_json,
)


@dataclass(frozen=True)
class ArrayTask:
    """Where a job stands in a job array. An array of n tasks is n jobs with consecutive
    ids, the first of which is the array's id; each runs the script once."""

    array_id: int
    index: int  # its SLURM_ARRAY_TASK_ID
    size: int  # how many tasks the array has: its jobs are array_id .. array_id + size - 1
    max_parallel: int | None  # at most this many of its tasks running at once

    @property
    def job_ids(self) -> range:
        """The ids of every task of the array."""
        return range(self.array_id, self.array_id + self.size)


@dataclass(frozen=True)
class JobSpec:
    """What was submitted; never changes after submit."""

    job_id: int
    name: str
    comment: str  # the tag, as Tag.format() wrote it
    workdir: str
    dependencies: tuple[int, ...]
    components: tuple[Component, ...]
    stdout: str  # absolute paths, %j and friends filled in
    stderr: str | None  # None: stderr goes to the stdout file
    time_limit: float | None  # seconds; None: no limit
    submitted: datetime
    array: ArrayTask | None = None  # None: the job is no array task
    warning: WarningSignal | None = None

    @property
    def cpus(self) -> int:
        return sum(component.cpus for component in self.components)

    @property
    def gpus(self) -> int:
        return sum(component.gpus for component in self.components)

    @property
    def memory_limit(self) -> int | None:
        """Bytes the job's processes may hold resident together; None: no limit."""
        asked = [component.memory_mb for component in self.components]
        if None in asked:
            return None
        return sum(m for m in asked if m is not None) << 20

    def to_json(self) -> JsonObject:
        return {
            "job_id": self.job_id,
            "name": self.name,
            "comment": self.comment,
            "workdir": self.workdir,
            "dependencies": list(self.dependencies),
            "components": [
                [c.cpus_per_task, c.tasks, c.memory_mb, c.gpus] for c in self.components
            ],
            "stdout": self.stdout,
            "stderr": self.stderr,
            "time_limit": self.time_limit,
            "submitted": self.submitted.isoformat(),
            "array": None if self.array is None else _array_json(self.array),
            "warning": None if self.warning is None else _warning_json(self.warning),
        }

    @classmethod
    def from_json(cls, data: JsonObject) -> JobSpec:
        return cls(
            job_id=int(data["job_id"]),
            name=str(data["name"]),
            comment=str(data["comment"]),
            workdir=str(data["workdir"]),
            dependencies=tuple(int(dep) for dep in data["dependencies"]),
            components=tuple(_component(values) for values in data["components"]),
            stdout=str(data["stdout"]),
            stderr=None if data["stderr"] is None else str(data["stderr"]),
            time_limit=None if data["time_limit"] is None else float(data["time_limit"]),
            submitted=datetime.fromisoformat(data["submitted"]),
            array=_array_task(data.get("array")),
            warning=_warning(data.get("warning")),
        )


def _component(values: list[int | None]) -> Component:
    # A job written before memory was kept lists [cpus per task, tasks] only; one written
    # before GPUs were, no GPU count.
    cpus_per_task, tasks, *rest = values
    memory_mb = rest[0] if rest else None
    gpus = int(rest[1] or 0) if len(rest) > 1 else 0
    return Component(int(cpus_per_task or 1), int(tasks or 1), memory_mb, gpus)


def _warning_json(warning: WarningSignal) -> JsonObject:
    return {
        "signal": warning.signum,
        "lead": warning.lead.total_seconds(),
        "batch_only": warning.batch_only,
    }


def _warning(data: JsonObject | None) -> WarningSignal | None:
    if data is None:
        return None
    lead = timedelta(seconds=float(data["lead"]))
    return WarningSignal(int(data["signal"]), lead, bool(data["batch_only"]))


def _array_json(task: ArrayTask) -> JsonObject:
    return {
        "array_id": task.array_id,
        "index": task.index,
        "size": task.size,
        "max_parallel": task.max_parallel,
    }


def _array_task(data: JsonObject | None) -> ArrayTask | None:
    if data is None:  # no array task, or a job written before arrays ran locally
        return None
    limit = data["max_parallel"]
    return ArrayTask(
        array_id=int(data["array_id"]),
        index=int(data["index"]),
        size=int(data["size"]),
        max_parallel=None if limit is None else int(limit),
    )


@dataclass(frozen=True)
class Snapshot:
    """Every job the store holds, as read once, and the ones that could not be read."""

    specs: dict[int, JobSpec]
    facts: dict[int, JobFacts]
    problems: tuple[str, ...] = ()


# A final job's files as JSON objects: job.json, started.json, cancelled.json, ended.json.
FinalFiles = tuple[JsonObject, JsonObject | None, JsonObject | None, JsonObject | None]
_FINAL_FILES = "final.marshal"


@dataclass
class Store:
    root: Path  # <state_dir>/local
    _specs: dict[int, JobSpec] = field(default_factory=dict, repr=False)
    _final: dict[int, JobFacts] = field(default_factory=dict, repr=False)
    # The final jobs' files: those gathered in final.marshal (read once, when first
    # needed), and those this process read from the jobs' own files.
    _gathered: dict[int, FinalFiles] | None = field(default=None, repr=False)
    _read_final: dict[int, FinalFiles] = field(default_factory=dict, repr=False)

    @property
    def jobs_dir(self) -> Path:
        return self.root / "jobs"

    @property
    def bin_dir(self) -> Path:
        return self.root / "bin"

    @property
    def active_dir(self) -> Path:
        return self.root / "active"

    def job_dir(self, job_id: int) -> Path:
        return self.jobs_dir / str(job_id)

    def prepare(self) -> None:
        """Create the layout and the srun shim (rewritten only when it changed)."""
        self.jobs_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.active_dir.mkdir(exist_ok=True)
        self.bin_dir.mkdir(exist_ok=True)
        shim = self.bin_dir / "srun"
        if not shim.exists() or shim.read_text() != SRUN_SHIM:
            write_atomic(shim, SRUN_SHIM, 0o755)

    @contextlib.contextmanager
    def locked(self, *, blocking: bool = True) -> Iterator[bool]:
        with flocked(self.root / "lock", blocking=blocking) as held:
            yield held

    # -- CPUs ------------------------------------------------------------------------------

    def total_cpus(self) -> int:
        try:
            return int((self.root / "cpus").read_text())
        except FileNotFoundError:
            return machine_cpus()

    def set_total_cpus(self, cpus: int) -> None:
        if cpus < 1:
            raise ValueError(f"cpus must be at least 1, got {cpus}")
        path = self.root / "cpus"
        if not path.exists() or path.read_text() != str(cpus):
            write_atomic(path, str(cpus))

    # -- GPUs ------------------------------------------------------------------------------

    def gpus(self) -> tuple[str, ...]:
        """The GPUs jobs may be handed, by device id; none until a submit declared some."""
        data = read_json(self.root / "gpus")
        return () if data is None else tuple(str(device) for device in data["devices"])

    def set_gpus(self, devices: tuple[str, ...]) -> None:
        if self.gpus() != devices or not (self.root / "gpus").exists():
            write_json(self.root / "gpus", {"devices": list(devices)})

    # -- submit (the caller holds the lock) ------------------------------------------------

    def create(
        self,
        build: Callable[[int, int], tuple[JobSpec, dict[str, str]]],
        script: str,
        count: int = 1,
        passed: Callable[[int], tuple[str, ...] | None] = lambda job_id: (),
    ) -> list[JobSpec]:
        """``count`` new jobs with consecutive ids (an array's tasks; one job otherwise):
        ``build(first id, id)`` makes each one's spec and environment, after which
        ``passed(id)`` names the variables of it passed by name (kept off the disk).

        The ids are taken before any directory is made, so a crash in between skips ids
        rather than reusing them; each directory appears whole, by rename, after its active
        marker (a crash between the two leaves a marker of no job, which passes skip). A
        crash part way through an array leaves the tasks made so far: an array of fewer
        tasks, none of them twice.
        """
        counter = self.root / "next_id"
        first = int(counter.read_text()) if counter.exists() else 1
        write_atomic(counter, str(first + count))
        made = []
        for job_id in range(first, first + count):
            spec, env = build(first, job_id)
            names = passed(job_id) or ()
            draft = self.jobs_dir / f".new-{job_id}"
            draft.mkdir()
            write_atomic(draft / "script", script, 0o700)
            kept = {key: value for key, value in env.items() if key not in names}
            write_json(draft / "env.json", kept, 0o600)
            if names:
                write_json(draft / "passed.json", {"names": list(names)})
            write_json(draft / "job.json", spec.to_json())
            (self.active_dir / str(job_id)).touch()
            os.rename(draft, self.job_dir(job_id))
            self._specs[job_id] = spec
            made.append(spec)
        return made

    # -- reading ---------------------------------------------------------------------------

    def ids(self) -> list[int]:
        """Every job's id, oldest first."""
        return _numbered(self.jobs_dir)

    def active_ids(self) -> list[int]:
        """The jobs that are not final yet (and perhaps a few that just became final)."""
        return _numbered(self.active_dir)

    def retire(self, job_id: int) -> None:
        """Take a final job off the active list (under the lock)."""
        (self.active_dir / str(job_id)).unlink(missing_ok=True)

    def submitted_since(self, since: datetime) -> list[int]:
        """The ids of jobs submitted at or after ``since``: ids are given out in submit
        order, so a binary search finds the first with a few reads, however many jobs
        the store holds."""
        ids = self.ids()
        low, high = 0, len(ids)
        while low < high:
            middle = (low + high) // 2
            spec = self.spec(ids[middle])
            if spec is not None and spec.submitted >= since:
                high = middle
            else:
                low = middle + 1
        return ids[low:]

    def spec(self, job_id: int) -> JobSpec | None:
        """The job's spec, or None for an id the store does not hold."""
        if job_id not in self._specs:
            gathered = (self._gathered or {}).get(job_id)
            if gathered is not None:
                data: JsonObject | None = gathered[0]
            else:
                data = read_json(os.path.join(self.root, "jobs", str(job_id), "job.json"))
            if data is None:
                return None
            self._specs[job_id] = JobSpec.from_json(data)
        return self._specs[job_id]

    def facts(self, spec: JobSpec) -> JobFacts:
        """What the job's files say now. A final job's facts are kept: they cannot change."""
        if spec.job_id in self._final:
            return self._final[spec.job_id]
        gathered = (self._gathered or {}).get(spec.job_id)
        if gathered is not None:
            _, started, cancelled, ended = gathered
            supervised = True
        else:
            started, cancelled, ended, supervised = self._read_facts(spec.job_id)
        facts = JobFacts(
            job_id=spec.job_id,
            cpus=spec.cpus,
            gpus=spec.gpus,
            dependencies=spec.dependencies,
            submitted=spec.submitted,
            array_id=None if spec.array is None else spec.array.array_id,
            max_parallel=None if spec.array is None else spec.array.max_parallel,
            started=None if started is None else datetime.fromisoformat(started["at"]),
            grant=None if started is None else _grant(started),
            cancelled=None if cancelled is None else _cancel(cancelled),
            ended=None if ended is None else _ending(ended),
            supervised=supervised,
        )
        if facts.final:
            self._final[spec.job_id] = facts
            if gathered is None:
                self._read_final[spec.job_id] = (spec.to_json(), started, cancelled, ended)
        return facts

    def _read_facts(
        self, job_id: int
    ) -> tuple[JsonObject | None, JsonObject | None, JsonObject | None, bool]:
        """started.json, cancelled.json, ended.json and whether the supervisor lives."""
        # Plain strings, not Path: pathlib's joins cost more than the reads.
        directory = os.path.join(self.root, "jobs", str(job_id))
        started = read_json(os.path.join(directory, "started.json"))
        cancelled = read_json(os.path.join(directory, "cancelled.json"))
        if started is None:
            return None, cancelled, None, True  # only a started job ends
        # Ask about the supervisor before reading the ending: it writes ended.json before
        # it exits, so "not alive" then "no ending" means it died without writing one.
        # A job that ended needs no asking.
        ended = read_json(os.path.join(directory, "ended.json"))
        if ended is not None:
            return started, cancelled, ended, True
        supervised = is_held(Path(directory) / "alive")
        ended = read_json(os.path.join(directory, "ended.json"))
        return started, cancelled, ended, supervised

    def _final_files(self) -> dict[int, FinalFiles]:
        if self._gathered is None:
            self._gathered = _load_final_files(self.root / _FINAL_FILES)
        return self._gathered

    def _gather_final(self, ids: Iterable[int]) -> None:
        """Write final.marshal anew with the files of the final jobs among ``ids`` (the
        ones an observation read), unless it holds exactly those already. Only ever a
        shortcut: when it cannot be written, the jobs' own files are read next time."""
        known = self._final_files()
        final = {
            job_id: known.get(job_id) or self._read_final[job_id]
            for job_id in ids
            if job_id in known or job_id in self._read_final
        }
        if final.keys() != known.keys():
            with contextlib.suppress(OSError, ValueError):
                write_atomic(self.root / _FINAL_FILES, marshal.dumps(final))
        # The jobs' specs and facts are kept (``_specs``, ``_final``); their raw files are
        # not needed again in this process.
        self._gathered = None
        self._read_final.clear()

    def snapshot(self, ids: Iterable[int], *, gathered: bool = False) -> Snapshot:
        """The facts of the jobs ``ids`` and of every dependency of the waiting ones among
        them (a waiting job's state depends on its dependencies').

        `gathered`: read the final jobs from final.marshal, and write it anew with those
        read: an observation's window of jobs. A dispatch pass, which reads the few
        active jobs, neither reads nor writes it."""
        specs: dict[int, JobSpec] = {}
        facts: dict[int, JobFacts] = {}
        problems: list[str] = []
        if gathered:
            self._final_files()
        to_read = sorted(set(ids), reverse=True)
        while to_read:
            job_id = to_read.pop()
            if job_id in facts:
                continue
            try:
                spec = self.spec(job_id)
                if spec is None:
                    continue
                specs[job_id], facts[job_id] = spec, self.facts(spec)
            except (OSError, ValueError, KeyError, TypeError) as error:
                where = self.job_dir(job_id)
                problems.append(f"local job {job_id} cannot be read ({where}): {error}")
                continue
            if facts[job_id].started is None and facts[job_id].cancelled is None:
                to_read += [dep for dep in spec.dependencies if dep not in facts]
        if gathered:
            self._gather_final(facts)
        else:
            self._read_final.clear()
        return Snapshot(specs, facts, tuple(problems))

    def environment(self, job_id: int, passed_from: Mapping[str, str]) -> dict[str, str]:
        """The job's environment: what was written at submit, and each variable passed by
        name with its value in ``passed_from`` (the starting process's environment)."""
        data = read_json(self.job_dir(job_id) / "env.json") or {}
        env = {str(key): str(value) for key, value in data.items()}
        names = (read_json(self.job_dir(job_id) / "passed.json") or {}).get("names", [])
        env.update({name: passed_from[name] for name in names if name in passed_from})
        return env

    def grant(self, job_id: int) -> Grant:
        """The GPUs and cores the job was handed when it started."""
        started = read_json(self.job_dir(job_id) / "started.json")
        return NO_GRANT if started is None else _grant(started)

    def is_cancelled(self, job_id: int) -> bool:
        return (self.job_dir(job_id) / "cancelled.json").exists()

    def process_group(self, job_id: int) -> int | None:
        pids = read_json(self.job_dir(job_id) / "pid.json")
        return None if pids is None else int(pids["group"])

    # -- facts (written once each) ---------------------------------------------------------

    def hold_alive(self, job_id: int) -> int:
        """A descriptor holding the job's alive lock, to be handed to its supervisor."""
        return hold(self.job_dir(job_id) / "alive")

    def write_started(self, job_id: int, at: datetime, grant: Grant = NO_GRANT) -> None:
        value = {"at": at.isoformat(), "gpus": list(grant.gpus), "cores": list(grant.cores)}
        write_json(self.job_dir(job_id) / "started.json", value)

    def write_pids(self, job_id: int, supervisor: int, group: int) -> None:
        write_json(self.job_dir(job_id) / "pid.json", {"supervisor": supervisor, "group": group})

    def write_cancelled(self, job_id: int, cancel: Cancel) -> None:
        value = {"at": cancel.at.isoformat(), "by": cancel.by, "reason": cancel.reason}
        write_json(self.job_dir(job_id) / "cancelled.json", value)
        if not (self.job_dir(job_id) / "started.json").exists():
            self.retire(job_id)  # final: it never ran and never will

    def write_ended(self, job_id: int, ending: Ending) -> None:
        value = {
            "at": ending.at.isoformat(),
            "exit_code": ending.exit_code,
            "signal": ending.signal,
            "timed_out": ending.timed_out,
            "out_of_memory": ending.out_of_memory,
            "peak_memory_mb": ending.peak_memory_mb,
            "cpu_time_s": ending.cpu_time_s,
        }
        write_json(self.job_dir(job_id) / "ended.json", value)
        self.retire(job_id)


def _numbered(directory: Path) -> list[int]:
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    return sorted(int(name) for name in names if name.isdigit())


def machine_cores() -> tuple[int, ...]:
    """The cores this process may run on, to pin jobs to; none where that cannot be told
    (not on Linux): jobs then run unpinned."""
    try:
        return tuple(sorted(os.sched_getaffinity(0)))
    except AttributeError:
        return ()


def machine_cpus() -> int:
    """The CPUs this process may run on (a container's or taskset's share, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def _grant(started: JsonObject) -> Grant:
    # A job started by an older recon was handed no GPU and no core.
    gpus = tuple(str(device) for device in started.get("gpus", ()))
    return Grant(gpus=gpus, cores=tuple(int(core) for core in started.get("cores", ())))


def _cancel(data: JsonObject) -> Cancel:
    by = data.get("by")
    return Cancel(
        datetime.fromisoformat(data["at"]), None if by is None else int(by), data.get("reason")
    )


def _ending(data: JsonObject) -> Ending:
    return Ending(
        at=datetime.fromisoformat(data["at"]),
        exit_code=int(data["exit_code"]),
        signal=int(data.get("signal", 0)),
        timed_out=bool(data.get("timed_out", False)),
        out_of_memory=bool(data.get("out_of_memory", False)),
        peak_memory_mb=data.get("peak_memory_mb"),
        cpu_time_s=data.get("cpu_time_s"),
    )


def _load_final_files(path: Path) -> dict[int, FinalFiles]:
    """final.marshal's jobs; none when it is missing or unreadable (a shortcut only)."""
    try:
        with open(path, "rb") as stream:
            gathered = marshal.load(stream)
    except (OSError, EOFError, ValueError, TypeError):
        return {}
    return gathered if isinstance(gathered, dict) else {}
