"""The one ``sinfo`` command that describes every partition's nodes, and its pure parser.

sinfo has no ``--parsable2``; ``--format`` with ``|`` between the fields does the same job,
since none of these fields can hold a ``|``. ``--Node`` prints one line per node and
partition, so a node in two partitions prints twice and no line folds nodes into a range.
``--all`` includes hidden partitions and those of other groups: a run naming one of them
must not be refused for a partition recon cannot see (sbatch has the last word on access).
"""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict

from reconciler.scheduler.partitions import Gres, Node, Partition
from reconciler.scheduler.slurm.parse import Rejected

SINFO_FIELDS: tuple[str, ...] = (
    "%P",  # partition, `*` after the default one
    "%N",  # node name
    "%c",  # CPUs
    "%m",  # memory, MB
    "%G",  # gres: (null), gpu:4, gpu:a100:4(S:0-1), several comma-separated
    "%f",  # available features: (null), ib,haswell
    "%T",  # state, long form: idle, mixed, drained, down*
)
SINFO_FORMAT = "|".join(SINFO_FIELDS)

_NONE = {"", "(null)", "n/a"}
# A gres count may carry a binary suffix (`bandwidth:4G`); GPUs never do, but a line
# must not be rejected for another gres.
_COUNT = re.compile(r"^(\d+)([KMGTP]?)$")
_SCALE = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40, "P": 2**50}


class SinfoParsed(BaseModel):
    """The partitions read, in the order sinfo first names them, and the lines rejected."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    partitions: tuple[Partition, ...]
    rejected: tuple[Rejected, ...]


class _Unreadable(ValueError):
    """One field of one line does not read; the line is rejected with this message."""


def sinfo() -> list[str]:
    return ["sinfo", "--noheader", "--Node", "--all", f"--format={SINFO_FORMAT}"]


def parse_sinfo(text: str) -> SinfoParsed:
    """Lines of ``sinfo --noheader --Node --all --format=<SINFO_FORMAT>``."""
    nodes: dict[str, list[Node]] = {}
    defaults: set[str] = set()
    rejected: list[Rejected] = []
    for line in text.splitlines():
        if not line.strip():
            continue
        cells = [cell.strip() for cell in line.split("|")]
        if len(cells) != len(SINFO_FIELDS):
            why = f"expected {len(SINFO_FIELDS)} '|'-separated fields"
            rejected.append(Rejected(line=line, why=why))
            continue
        partition = cells[0].removesuffix("*")
        try:
            node = _node(cells)
        except _Unreadable as error:
            rejected.append(Rejected(line=line, why=str(error)))
            continue
        if cells[0].endswith("*"):
            defaults.add(partition)
        nodes.setdefault(partition, []).append(node)
    partitions = tuple(
        Partition(name=name, default=name in defaults, nodes=tuple(members))
        for name, members in nodes.items()
    )
    return SinfoParsed(partitions=partitions, rejected=tuple(rejected))


def _node(cells: list[str]) -> Node:
    partition, name, cpus, memory, gres, features, state = cells
    if not partition.removesuffix("*") or not name:
        raise _Unreadable("no partition or node name")
    return Node(
        name=name,
        cpus=_whole(cpus, "CPU count"),
        memory_mb=_whole(memory, "memory"),
        gres=tuple(_gres(item) for item in _top_level_items(gres)),
        features=tuple(item for item in features.split(",") if item not in _NONE),
        state=state,
    )


def _whole(text: str, what: str) -> int:
    if not text.isdigit():
        raise _Unreadable(f"unknown {what} {text!r}")
    return int(text)


def _top_level_items(text: str) -> list[str]:
    """Comma-separated gres, where a socket list in brackets may hold commas itself:
    ``gpu:a100:2(S:0,2),gpu:v100:1(S:1)``."""
    if text in _NONE:
        return []
    items: list[str] = []
    depth = 0
    start = 0
    for index, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            items.append(text[start:index])
            start = index + 1
    items.append(text[start:])
    return [item for item in items if item]


def _gres(text: str) -> Gres:
    """``name[:type][:count][(S:sockets)]``; a gres with no count has one."""
    parts = text.split("(", 1)[0].split(":")
    if not parts[0]:
        raise _Unreadable(f"unknown gres {text!r}")
    count = _COUNT.match(parts[-1]) if len(parts) > 1 else None
    if count is None:
        # `gpu:a100` or a bare `gpu`: Slurm's default count of one.
        if len(parts) > 2:
            raise _Unreadable(f"unknown gres {text!r}")
        return Gres(name=parts[0], type=parts[1] if len(parts) == 2 else None, count=1)
    kind = parts[1] if len(parts) > 2 else None
    return Gres(name=parts[0], type=kind, count=int(count[1]) * _SCALE[count[2]])
