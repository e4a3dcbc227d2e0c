"""Resource values as users write them (SkyPilot style), parsed once into typed values.

Each type keeps the text the user wrote, for plans and error messages, and a canonical
form for the spec hash: `32GiB` and `32768MiB` render the same `--mem`, so they must hash
the same; `8` (exactly) and `8+` (at least) do not.

Every parser raises ValueError with a message that says what the accepted forms are;
pydantic turns it into an error located at the field, and the loader adds file and line.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, ClassVar, Self

from pydantic import GetCoreSchemaHandler, GetJsonSchemaHandler
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import core_schema


class SpecValue:
    """Glue that lets a frozen dataclass with `parse`/`text` act as a pydantic field type.

    Serialised as the user's text, or with `context={"canonical": True}` as the form the
    spec hash is computed from.
    """

    json_schema: ClassVar[JsonSchemaValue]

    @classmethod
    def parse(cls, raw: object) -> Self:
        raise NotImplementedError

    @property
    def text(self) -> str:
        raise NotImplementedError

    def canonical(self) -> object:
        raise NotImplementedError

    def __str__(self) -> str:
        return self.text

    @classmethod
    def _validate(cls, raw: object) -> Self:
        return raw if isinstance(raw, cls) else cls.parse(raw)

    def _serialize(self, info: core_schema.SerializationInfo) -> object:
        context = info.context
        if isinstance(context, dict) and context.get("canonical"):
            return self.canonical()
        return self.text

    @classmethod
    def __get_pydantic_core_schema__(
        cls, source: type[Any], handler: GetCoreSchemaHandler
    ) -> core_schema.CoreSchema:
        return core_schema.no_info_plain_validator_function(
            cls._validate,
            serialization=core_schema.plain_serializer_function_ser_schema(
                cls._serialize, info_arg=True
            ),
        )

    @classmethod
    def __get_pydantic_json_schema__(
        cls, schema: core_schema.CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        return dict(cls.json_schema)


def _reject_bool(raw: object, what: str) -> None:
    # YAML `cpus: true` would otherwise pass as the integer 1.
    if isinstance(raw, bool):
        raise ValueError(f"{what} must be a number, not {str(raw).lower()}")


_COUNT = re.compile(r"^\s*(\d+)\s*(\+?)\s*$")


@dataclass(frozen=True)
class CpuCount(SpecValue):
    """`8` asks for exactly 8 CPUs; `8+` for at least 8."""

    count: int
    at_least: bool = False

    json_schema: ClassVar[JsonSchemaValue] = {
        "anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "pattern": r"^\d+\+?$"},
        ],
        "description": "CPUs per task: `8` exactly, `8+` at least 8.",
    }

    @classmethod
    def parse(cls, raw: object) -> CpuCount:
        _reject_bool(raw, "cpus")
        if isinstance(raw, int):
            count, at_least = raw, False
        elif isinstance(raw, str) and (match := _COUNT.match(raw)):
            count, at_least = int(match.group(1)), bool(match.group(2))
        else:
            raise ValueError(f"cpus must be a whole number like 8 or 8+, got {raw!r}")
        if count < 1:
            raise ValueError(f"cpus must be at least 1, got {raw!r}")
        return cls(count, at_least)

    @property
    def text(self) -> str:
        return f"{self.count}{'+' if self.at_least else ''}"

    def canonical(self) -> object:
        return self.text


_MEMORY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]i?B|B)\s*(\+?)\s*$", re.IGNORECASE)
_MEMORY_UNITS = {
    "b": 1,
    "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
    "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40,
}  # fmt: skip


def _bare_memory(raw: float) -> str:
    """A number without a unit: a large one is what Slurm's `--mem=2048` means, MiB
    (2048GiB would ask for a thousand times that); a small one is meant in GB or GiB."""
    if raw < _BARE_MIB_FROM:
        return f"memory needs a unit, like {raw}GB or {raw}GiB (got the bare number {raw})"
    gib = f", which is {raw / 1024:g}GiB" if raw % 256 == 0 else ""
    return (
        f"memory needs a unit: {raw}MiB{gib}, if you meant Slurm's --mem={raw} (a bare "
        f"number there is MiB); got the bare number {raw}"
    )


# A bare memory below this is likely meant in GB (`memory: 32`); from it up, as Slurm's
# MiB (`memory: 2048`).
_BARE_MIB_FROM = 64


@dataclass(frozen=True)
class Memory(SpecValue):
    """`32GB` is 32*10^9 bytes, `32GiB` is 32*2^30: both exact, as the user wrote them.

    Slurm's own `--mem=32G` means GiB; recon renders whole MiB, rounded up, so a job gets
    at least what it asked for. `32GB+` asks for at least that much.
    """

    bytes: int
    written: str
    at_least: bool = False

    json_schema: ClassVar[JsonSchemaValue] = {
        "type": "string",
        "pattern": r"^\d+(\.\d+)?\s*([KMGTkmgt]i?[Bb]|[Bb])\+?$",
        "description": "Memory per node: `32GB` (10^9), `32GiB` (2^30), `32GB+` at least.",
    }

    @classmethod
    def parse(cls, raw: object) -> Memory:
        _reject_bool(raw, "memory")
        if isinstance(raw, int | float):
            raise ValueError(_bare_memory(raw))
        if not isinstance(raw, str) or (match := _MEMORY.match(raw)) is None:
            # `32G` is refused on purpose: Slurm reads it as GiB, most people as GB.
            raise ValueError(
                f"memory must look like 32GB (10^9 bytes), 32GiB (2^30) or 32GB+, got {raw!r}"
            )
        number, unit, plus = match.groups()
        size = math.ceil(float(number) * _MEMORY_UNITS[unit.lower()])
        if size < 2**20:
            raise ValueError(f"memory must be at least 1MiB, got {raw!r}")
        written = raw.strip().removesuffix("+").strip()
        return cls(size, written, bool(plus))

    @property
    def mebibytes(self) -> int:
        return math.ceil(self.bytes / 2**20)

    @property
    def text(self) -> str:
        return f"{self.written}{'+' if self.at_least else ''}"

    def canonical(self) -> object:
        return f"{self.mebibytes}MiB{'+' if self.at_least else ''}"


# A GPU type as gres.conf names it: a model (`a100`) or a MIG profile (`1g.10gb`,
# `nvidia_a100_3g.40gb` as AutoDetect=nvml names them): letters, digits, `_`, `.`, `-`.
_GPU_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
# A MIG profile's compute slices: `3g.40gb` takes 3 of a GPU's 7 (A100, H100, H200).
_MIG_PROFILE = re.compile(r"(?:^|_)(\d)g\.\d+gb$", re.IGNORECASE)
MIG_SLICES_PER_GPU = 7


def mig_fraction(gpu_type: str | None) -> float:
    """The share of a whole GPU one device of ``gpu_type`` is: a MIG profile's compute
    slices over the GPU's seven (``1g.10gb``: 1/7, ``3g.40gb``: 3/7); any other type, or
    none, a whole GPU."""
    match = _MIG_PROFILE.search(gpu_type or "")
    return min(int(match.group(1)), MIG_SLICES_PER_GPU) / MIG_SLICES_PER_GPU if match else 1.0


@dataclass(frozen=True)
class Gpus(SpecValue):
    """`4` (any type), `A100:4`, `1g.10gb:2` (a MIG profile or any type gres.conf names),
    or `{A100: 4}`."""

    count: int
    type: str | None = None

    json_schema: ClassVar[JsonSchemaValue] = {
        "anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "pattern": r"^([A-Za-z0-9][A-Za-z0-9_.-]*:)?\d+$"},
            {
                "type": "object",
                "minProperties": 1,
                "maxProperties": 1,
                "additionalProperties": {"type": "integer", "minimum": 1},
            },
        ],
        "description": "GPUs: `4`, `A100:4`, `1g.10gb:2` (a MIG profile) or `{A100: 4}`.",
    }

    @classmethod
    def parse(cls, raw: object) -> Gpus:
        _reject_bool(raw, "gpus")
        gpu_type: object = None
        count: object = raw
        if isinstance(raw, dict):
            if len(raw) != 1:
                raise ValueError("gpus as a mapping takes exactly one type, like {A100: 4}")
            ((gpu_type, count),) = raw.items()
        elif isinstance(raw, str):
            gpu_type, colon, count = raw.rpartition(":")
            gpu_type = gpu_type if colon else None
            count = int(count) if count.strip().isdigit() else count
        if gpu_type is not None and not (isinstance(gpu_type, str) and _GPU_NAME.match(gpu_type)):
            raise ValueError(
                "gpu type must be one name as gres.conf gives it, like A100 or the MIG "
                f"profile 1g.10gb (letters, digits and _.-), got {gpu_type!r}"
            )
        if not isinstance(count, int) or isinstance(count, bool) or count < 1:
            raise ValueError(
                f"gpus must be a count like 4, A100:4, 1g.10gb:2 or {{A100: 4}}, got {raw!r}"
            )
        return cls(count, gpu_type)

    @property
    def text(self) -> str:
        return f"{self.type}:{self.count}" if self.type else str(self.count)

    def canonical(self) -> object:
        return f"{self.type.lower()}:{self.count}" if self.type else str(self.count)

    @property
    def option(self) -> str:
        """As Slurm's GPU options take it (``--gres=gpu:<this>``, ``--gpus-per-task=``):
        gres types are case-sensitive and conventionally lowercase (gres.conf ``a100``)."""
        return f"{self.type.lower()}:{self.count}" if self.type else str(self.count)


# A GRES name, optionally with its type, as slurm.conf's GresTypes and Gres name them.
_GRES_KEY = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,31}(?::[A-Za-z0-9][A-Za-z0-9_.-]{0,63})?$")
_GRES_COUNT = re.compile(r"^\s*(\d+)\s*([KMGTP]?)\s*$", re.IGNORECASE)
_GRES_SCALE = {"": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
# GRES with a field of their own: asking them under `gres:` would hide them from the fit
# check and the allocation's GPU accounting.
_GRES_FIELDS = {
    "gpu": "ask for GPUs with `gpus:` (or gpus_per_node, gpus_per_task)",
    "shard": "ask for GPU shards with `shards:`",
    "mps": "CUDA MPS shares are not supported: ask for `shards:` or `gpus:`",
}


@dataclass(frozen=True)
class GresCount(SpecValue):
    """How much of one other generic resource a node must give: `2`, or with Slurm's
    binary suffixes `100G` (K, M, G, T, P multiply by 1024, as in ``--gres=localtmp:100G``)."""

    count: int
    written: str

    json_schema: ClassVar[JsonSchemaValue] = {
        "anyOf": [
            {"type": "integer", "minimum": 1},
            {"type": "string", "pattern": r"^\d+[KMGTPkmgtp]?$"},
        ],
        "description": "A count, or with a binary suffix as Slurm reads it: `100G`.",
    }

    @classmethod
    def parse(cls, raw: object) -> GresCount:
        _reject_bool(raw, "a gres count")
        if isinstance(raw, int):
            text = str(raw)
        elif isinstance(raw, str) and _GRES_COUNT.match(raw):
            text = raw.strip()
        else:
            raise ValueError(
                f"a gres count must be a whole number like 2 or, with Slurm's suffixes, 100G "
                f"(K, M, G, T, P: powers of 1024), got {raw!r}"
            )
        match = _GRES_COUNT.match(text)
        assert match is not None
        count = int(match.group(1)) * _GRES_SCALE[match.group(2).lower()]
        if count < 1:
            raise ValueError(f"a gres count must be at least 1, got {raw!r}")
        return cls(count, text.replace(" ", "").upper())

    @property
    def text(self) -> str:
        return self.written

    def canonical(self) -> object:
        return self.count

    @property
    def option(self) -> str:
        """As ``--gres`` takes it, from the count alone (so `100G` and `102400M`, one spec,
        render alike): with the largest binary suffix that divides it exactly."""
        for suffix in "PTGMK":
            scale = _GRES_SCALE[suffix.lower()]
            if self.count % scale == 0:
                return f"{self.count // scale}{suffix}"
        return str(self.count)


def gres_key(raw: str) -> str:
    """A `gres:` key checked: `localtmp` or `nvme:fast`, not a GRES with a field of its own."""
    if not _GRES_KEY.match(raw):
        raise ValueError(
            f"{raw!r} is not a gres name: write it as slurm.conf's GresTypes names it, "
            "like localtmp or nvme:fast (a name, optionally :type)"
        )
    name = raw.partition(":")[0].lower()
    if name in _GRES_FIELDS:
        raise ValueError(f"gres {raw!r} has a field of its own: {_GRES_FIELDS[name]}")
    return raw


_DURATION_UNITS = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_SUFFIXED = re.compile(r"^\s*(?:(\d+)d)?\s*(?:(\d+)h)?\s*(?:(\d+)m)?\s*(?:(\d+)s)?\s*$")
_CLOCK = re.compile(r"^\s*(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?\s*$")


@dataclass(frozen=True)
class Duration(SpecValue):
    """A time limit: Slurm's forms (`12:00:00`, `1-00:00:00`, `90` minutes) or `90m`, `2h`, `1d`."""

    seconds: int

    json_schema: ClassVar[JsonSchemaValue] = {
        "anyOf": [
            {"type": "integer", "minimum": 1, "description": "minutes, as Slurm reads it"},
            {"type": "string"},
        ],
        "description": "`12:00:00`, `1-00:00:00`, `90m`, `2h`, `1d12h`, or minutes.",
    }

    @classmethod
    def parse(cls, raw: object) -> Duration:
        _reject_bool(raw, "time")
        if isinstance(raw, int):
            seconds = raw * 60  # a bare number is minutes, as in `sbatch --time=90`
        elif isinstance(raw, str):
            seconds = _parse_duration_text(raw)
        else:
            raise ValueError(f"time must look like 12:00:00, 1-00:00:00 or 90m, got {raw!r}")
        if seconds < 1:
            raise ValueError(f"time must be positive, got {raw!r}")
        return cls(seconds)

    @property
    def text(self) -> str:
        """Slurm's `D-HH:MM:SS`, the form `--time` and squeue's `%L` use."""
        days, rest = divmod(self.seconds, 86400)
        hours, rest = divmod(rest, 3600)
        minutes, seconds = divmod(rest, 60)
        clock = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
        return f"{days}-{clock}" if days else clock

    def canonical(self) -> object:
        return self.seconds


def _in_range(raw: str, parts: list[str], limits: tuple[int, ...]) -> None:
    """The fields after the first of a clock time: 99:99 is a typo, not 100 min 39 s."""
    names = ("hours", "minutes", "seconds")[-len(limits) :]
    for part, limit, name in zip(parts, limits, names, strict=True):
        if int(part) >= limit:
            raise ValueError(
                f"time {raw!r} has {int(part)} {name}: at most {limit - 1} there "
                "(write 12:00:00, 1-12:00:00, or 90m for 90 minutes)"
            )


def _parse_duration_text(raw: str) -> int:
    text = raw.strip().lower()
    if (suffixed := _SUFFIXED.match(text)) and any(suffixed.groups()):
        return sum(
            int(value) * _DURATION_UNITS[unit]
            for value, unit in zip(suffixed.groups(), "dhms", strict=True)
            if value
        )
    if clock := _CLOCK.match(text):
        days, first, second, third = clock.groups()
        day_seconds = int(days) * 86400 if days else 0
        if days:  # days-hours[:minutes[:seconds]]
            parts = [first, second or "0", third or "0"]
            _in_range(raw, parts, (24, 60, 60))
            return day_seconds + int(parts[0]) * 3600 + int(parts[1]) * 60 + int(parts[2])
        if third is not None:  # hours:minutes:seconds
            _in_range(raw, [second, third], (60, 60))
            return int(first) * 3600 + int(second) * 60 + int(third)
        if second is not None:  # minutes:seconds
            _in_range(raw, [second], (60,))
            return int(first) * 60 + int(second)
        return int(first) * 60  # minutes
    raise ValueError(
        f"time must look like 12:00:00, 1-00:00:00, 90 (minutes), 90m, 2h or 1d12h, got {raw!r}"
    )


def span(delta: timedelta | None) -> str:
    """``1h 5m``, ``12m``, ``45s``: a time limit, time left or an age, as people say it."""
    if delta is None:
        return "no limit"
    total = int(delta.total_seconds())
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    parts = [f"{hours}h" if hours else "", f"{minutes}m" if minutes else ""]
    parts.append(f"{seconds}s" if seconds or not any(parts) else "")
    return " ".join(part for part in parts if part)
