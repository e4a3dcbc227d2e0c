"""What a batch script's ``#SBATCH`` header asks for, read the way sbatch reads it. Pure.

sbatch takes directives from the lines after the shebang, skipping blank lines and other
comments, and stops at the first command. Each ``#SBATCH`` line holds one or more options,
split like shell words (quotes group, a ``#`` that starts a word begins a comment). A line
``#SBATCH hetjob`` starts the next heterogeneous component.

Only what the local backend acts on is kept: CPUs, memory and GPUs per component, the
output and error file patterns, the time limit, the warning signal before it
(``--signal``) and the job name. GPUs are counted from ``--gres=gpu[:type]:N`` and
``--gpus-per-node=[type:]N`` (per node, so times ``--nodes``) and ``--gpus``/``-G``
(the job's), their type ignored: one machine's GPUs are told apart by device, not type.
Every other option (partition, other gres, account...) means nothing on one machine and
is skipped, as sbatch would skip a comment; a value it cannot read for an option it keeps
is an error, as in sbatch.
"""

from __future__ import annotations

import re
import shlex
import signal
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import timedelta

_DIRECTIVE = "#SBATCH"
_COMPONENT_SEPARATORS = {"hetjob", "packjob"}  # packjob: the name before Slurm 20.02
# Long options the local backend keeps, and the short letters sbatch gives them.
_KEPT = {
    "cpus-per-task": "c",
    "ntasks": "n",
    "nodes": "N",
    "output": "o",
    "error": "e",
    "time": "t",
    "job-name": "J",
    "mem": "",
    "mem-per-cpu": "",
    "signal": "",
    "gres": "",
    "gpus": "G",
    "gpus-per-node": "",
}
_SHORT = {letter: name for name, letter in _KEPT.items() if letter}
# sbatch's short options that take a value (man sbatch), so `-p cpu` skips `cpu` too.
_SHORT_WITH_VALUE = set("AabcDdeFGiJLMmNnoprSstw") | set(_SHORT)
_UNLIMITED = {"UNLIMITED", "INFINITE", "-1"}
_TIME = re.compile(r"^(?:(?P<days>\d+)-)?(?P<a>\d+)(?::(?P<b>\d+))?(?::(?P<c>\d+))?$")
_PATTERN = re.compile(r"%(\d*)([%AaJjNnstux])")
_MEMORY = re.compile(r"^(?P<amount>\d+)(?P<unit>[KMGT]?)B?$", re.IGNORECASE)
_MEBIBYTES = {"K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}
_SIGNAL = re.compile(r"^(?:(?P<flags>[RB]+):)?(?P<signal>[A-Za-z0-9]+)(?:@(?P<lead>\d+))?$")
# sbatch(1): "If sig_time is not specified, the default time is 60 seconds."
_DEFAULT_LEAD = 60


class DirectiveError(ValueError):
    """An ``#SBATCH`` value sbatch would refuse; the message names the option."""


@dataclass(frozen=True)
class Component:
    """One het component's CPU and memory ask (a plain job has one component)."""

    cpus_per_task: int = 1
    tasks: int = 1
    # MiB; None: no limit (no --mem or --mem-per-cpu, or --mem=0: "all the node has").
    memory_mb: int | None = None
    gpus: int = 0  # the component's in all, over its nodes

    @property
    def cpus(self) -> int:
        return self.cpus_per_task * self.tasks


@dataclass(frozen=True)
class WarningSignal:
    """``--signal=[B:]<sig>[@<seconds>]``: the signal sent that long before the time limit."""

    signum: int
    lead: timedelta
    # B: only the batch script's own process gets it; without, Slurm signals the job's
    # steps, which on one machine are whatever the script started: its process group.
    batch_only: bool


@dataclass(frozen=True)
class Directives:
    components: tuple[Component, ...]
    output: str | None = None  # a filename pattern, e.g. logs/slurm-%j.out
    error: str | None = None  # None: stderr goes where stdout goes
    time_limit: timedelta | None = None  # None: no limit
    warning: WarningSignal | None = None
    job_name: str | None = None

    @property
    def cpus(self) -> int:
        """All components run as one local job, so it holds the CPUs of all of them."""
        return sum(component.cpus for component in self.components)

    @property
    def memory_mb(self) -> int | None:
        """The job's memory limit, all components together; None if any has no limit."""
        asked = [component.memory_mb for component in self.components]
        return None if None in asked else sum(m for m in asked if m is not None)

    @property
    def gpus(self) -> int:
        return sum(component.gpus for component in self.components)


def has_shebang(script: str) -> bool:
    return script.startswith("#!")


def parse_directives(script: str) -> Directives:
    """The header's options; job-wide ones (output, time...) from any component, as the
    local job is one job whatever its components."""
    blocks: list[dict[str, str]] = [{}]
    for words in _directive_lines(script):
        if len(words) == 1 and words[0] in _COMPONENT_SEPARATORS:
            blocks.append({})
            continue
        blocks[-1].update(_options(words))
    job_wide = {key: value for block in reversed(blocks) for key, value in block.items()}
    return Directives(
        components=tuple(_component(block) for block in blocks),
        output=job_wide.get("output"),
        error=job_wide.get("error"),
        time_limit=parse_time_limit(job_wide["time"]) if "time" in job_wide else None,
        warning=parse_signal(job_wide["signal"]) if "signal" in job_wide else None,
        job_name=job_wide.get("job-name"),
    )


def _directive_lines(script: str) -> Iterator[list[str]]:
    lines = script.split("\n")
    for line in lines[1:] if lines[0].startswith("#!") else lines:
        stripped = line.strip()
        if not stripped:
            continue
        if not stripped.startswith("#"):
            return  # the first command: sbatch reads no directive after it
        if line.startswith(_DIRECTIVE) and line[len(_DIRECTIVE) : len(_DIRECTIVE) + 1] in " \t":
            try:
                words = shlex.split(line[len(_DIRECTIVE) :], comments=True)
            except ValueError as error:
                raise DirectiveError(f"cannot read {line!r}: {error}") from None
            if words:
                yield words


def _options(words: list[str]) -> Iterator[tuple[str, str]]:
    """(long name, value) of each kept option; `--opt=v`, `--opt v`, `-cV` and `-c V`."""
    index = 0
    while index < len(words):
        word = words[index]
        index += 1
        if word.startswith("--"):
            name, equals, value = word[2:].partition("=")
            if not equals and name in _KEPT:
                value, index = _next_value(words, index, word)
        elif word.startswith("-") and len(word) > 1:
            letter, value = word[1], word[2:]
            if not value and letter in _SHORT_WITH_VALUE:
                value, index = _next_value(words, index, word)
            name = _SHORT.get(letter, "")
        else:
            continue  # a stray word: sbatch would refuse the script; nothing to keep
        if name in _KEPT:
            yield name, value


def _next_value(words: list[str], index: int, option: str) -> tuple[str, int]:
    if index >= len(words):
        raise DirectiveError(f"{option} needs a value")
    return words[index], index + 1


def _component(block: dict[str, str]) -> Component:
    # A component's task count: --ntasks, else one task per node, else one.
    nodes = block.get("nodes", "1").split("-")[0]
    tasks = block.get("ntasks") or nodes
    component = Component(
        cpus_per_task=_count(block.get("cpus-per-task", "1"), "--cpus-per-task"),
        tasks=_count(tasks, "--ntasks"),
        gpus=_gpus(block, _count(nodes, "--nodes")),
    )
    # The last of --mem and --mem-per-cpu wins, as in sbatch (they exclude each other).
    memory = [(name, block[name]) for name in block if name in ("mem", "mem-per-cpu")]
    if not memory:
        return component
    name, value = memory[-1]
    mebibytes = parse_memory(value, f"--{name}")
    if mebibytes == 0:  # "all the memory of the node": no limit on one machine
        return component
    per_cpu = component.cpus if name == "mem-per-cpu" else 1
    return replace(component, memory_mb=mebibytes * per_cpu)


def _gpus(block: dict[str, str], nodes: int) -> int:
    """The component's GPUs: ``--gpus`` (in all), else ``--gpus-per-node`` or the gpu
    entries of ``--gres`` (per node) times its nodes."""
    if "gpus" in block:
        return _gpu_count(block["gpus"], "--gpus")
    if "gpus-per-node" in block:
        return _gpu_count(block["gpus-per-node"], "--gpus-per-node") * nodes
    per_node = 0
    for entry in block.get("gres", "").split(","):
        name, _, rest = entry.strip().partition(":")
        if name == "gpu":
            # gpu, gpu:N, gpu:type or gpu:type:N: a count left out is 1, as in Slurm.
            last = rest.rpartition(":")[2]
            per_node += int(last) if last.isdigit() else 1
    return per_node * nodes


def _gpu_count(text: str, option: str) -> int:
    """``[type:]N``, the type ignored."""
    count = text.rpartition(":")[2]
    if not count.isdigit():
        raise DirectiveError(
            f"{option}={text}: not a GPU count, with or without a type (2, a100:2)"
        )
    return int(count)


def parse_memory(text: str, option: str = "--mem") -> int:
    """sbatch's memory size in MiB: a number with an optional K, M (the default), G or T."""
    match = _MEMORY.match(text.strip())
    if match is None:
        raise DirectiveError(f"{option}={text}: not a memory size (500M, 4G)")
    amount = int(match["amount"]) * _MEBIBYTES[(match["unit"] or "M").upper()]
    return max(int(amount), 1) if amount else 0


def parse_signal(text: str) -> WarningSignal:
    """``--signal=[{R|B}:]<sig_num>[@sig_time]``: a signal number or name (with or
    without SIG), seconds before the time limit (60 when not given). R (reservations)
    means nothing on one machine."""
    match = _SIGNAL.match(text.strip())
    if match is None:
        raise DirectiveError(f"--signal={text}: not [B:]<signal>[@<seconds>] (B:USR1@120)")
    name = match["signal"].upper()
    try:
        signum = int(name) if name.isdigit() else signal.Signals[_with_sig(name)].value
    except KeyError:
        raise DirectiveError(f"--signal={text}: no signal {match['signal']!r}") from None
    if not 0 < signum < signal.NSIG:
        raise DirectiveError(f"--signal={text}: no signal {signum}")
    lead = int(match["lead"]) if match["lead"] is not None else _DEFAULT_LEAD
    if lead > 0xFFFF:
        raise DirectiveError(f"--signal={text}: at most 65535 seconds before the end")
    return WarningSignal(signum, timedelta(seconds=lead), batch_only="B" in (match["flags"] or ""))


def _with_sig(name: str) -> str:
    return name if name.startswith("SIG") else "SIG" + name


def _count(text: str, option: str) -> int:
    if not text.isdigit() or int(text) < 1:
        raise DirectiveError(f"{option}={text}: not a positive whole number")
    return int(text)


def parse_time_limit(text: str) -> timedelta | None:
    """Slurm's time forms: minutes, M:S, H:M:S, D-H, D-H:M, D-H:M:S; None when unlimited."""
    if text.strip().upper() in _UNLIMITED:
        return None
    match = _TIME.match(text.strip())
    if match is None:
        raise DirectiveError(f"--time={text}: not a Slurm time (90, 1:30:00, 1-00:00:00)")
    days, a, b, c = match["days"], int(match["a"]), match["b"], match["c"]
    if days is not None:  # days-hours[:minutes[:seconds]]
        seconds = int(days) * 86400 + a * 3600 + int(b or 0) * 60 + int(c or 0)
    elif c is not None:
        seconds = a * 3600 + int(b or 0) * 60 + int(c)
    elif b is not None:
        seconds = a * 60 + int(b)
    else:
        seconds = a * 60
    if seconds < 1:
        raise DirectiveError(f"--time={text}: must be positive")
    return timedelta(seconds=seconds)


def expand_pattern(
    pattern: str,
    *,
    job_id: str,
    job_name: str,
    user: str,
    host: str,
    array: tuple[str, int] | None = None,
) -> str:
    """A filename pattern as Slurm fills it for a batch script (man sbatch, "filename
    pattern"): ``%j`` job id, ``%x`` job name, ``%u`` user, ``%N`` host, ``%%`` a ``%``,
    and for an array task (``array``: the array's id, the task's index) ``%A`` and ``%a``;
    a number after ``%`` pads with zeros. A backslash anywhere turns replacement off."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    array_id, index = array if array is not None else (job_id, None)
    values = {
        "%": "%",
        "A": array_id,  # an array's master id: the job's own id when it is no array
        "a": "4294967294" if index is None else str(index),  # NO_VAL: not an array task
        "J": f"{job_id}.batch",
        "j": job_id,
        "N": host.split(".")[0],
        "n": "0",
        "s": "batch",
        "t": "0",
        "u": user,
        "x": job_name,
    }

    def fill(match: re.Match[str]) -> str:
        width, symbol = match.groups()
        value = values[symbol]
        return value.zfill(int(width)) if width and symbol != "%" else value

    return _PATTERN.sub(fill, pattern)
