"""Job array index lists in Slurm's own notation, both ways. Pure.

sbatch takes ``--array=0-3,7%2``; squeue and sacct print a job array's pending tasks as one
row with the same notation in brackets, ``123_[5-9%2]`` or ``123_[5,7,9-11]``. A pending
range's ``%N`` (the cap on tasks running at once) is the array's, not a task's: reading the
indices drops it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_PART = re.compile(r"^(?P<first>\d+)(?:-(?P<last>\d+)(?::(?P<step>\d+))?)?$")


def compress(indices: Iterable[int]) -> str:
    """``0,1,2,3,7`` as ``0-3,7``: consecutive runs as ranges, in ascending order."""
    ordered = sorted(set(indices))
    parts: list[str] = []
    start = 0
    for position, index in enumerate(ordered):
        last = position + 1 == len(ordered)
        if last or ordered[position + 1] != index + 1:
            first = ordered[start]
            parts.append(str(first) if first == index else f"{first}-{index}")
            start = position + 1
    return ",".join(parts)


def array_spec(indices: Iterable[int], max_parallel: int | None) -> str:
    """The value of ``sbatch --array=``: ``0-3,7``, with ``%N`` when capped."""
    text = compress(indices)
    return text if max_parallel is None else f"{text}%{max_parallel}"


def expand(text: str) -> tuple[int, ...]:
    """The indices of a task list as Slurm prints it: ``[5-9%2]``, ``[1,3-4]``, ``7``, or
    ``0-10:2`` (a step, as sbatch accepts it); sorted and unique. Raises ValueError on a
    form Slurm does not print."""
    body = text[1:-1] if text.startswith("[") and text.endswith("]") else text
    body = body.partition("%")[0]
    found: set[int] = set()
    for part in body.split(","):
        match = _PART.match(part)
        if match is None:
            raise ValueError(f"not an array task list: {text!r}")
        first = int(match["first"])
        last = first if match["last"] is None else int(match["last"])
        step = 1 if match["step"] is None else int(match["step"])
        if last < first or step < 1:
            raise ValueError(f"not an array task list: {text!r}")
        found.update(range(first, last + 1, step))
    return tuple(sorted(found))
