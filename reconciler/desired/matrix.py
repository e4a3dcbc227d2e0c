"""A run's `matrix:`: its members, their names and directories, and references to them.

A Run with a matrix is a sweep. Its members are the product of its axes, less every
member that matches an `exclude` entry, plus every `include` entry (a whole combination):

    matrix:
      lr: [0.001, 0.0003]
      seed: [0, 1, 2]
      exclude: [{lr: 0.0003, seed: 2}]
      include: [{lr: 0.01, seed: 0}]

A member is known by its values, never by its position: its name is the sweep's name and
its values in axis-name order, ``train[lr=0.001,seed=0]``, and its directory is the same
values under the sweep's directory, ``runs/train/lr=0.001,seed=0``. Appending a value or
reordering an axis leaves every existing member's name, directory and spec hash as they
were.

References: ``train.model`` names the output of every member (a plain run gathers them;
a sweep that shares axes with ``train`` reads the members whose values agree with its
own on the shared axes), ``train[seed=0].model`` the members with that value.

Pure: no I/O.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

# What a sweep may hold: more members than this is refused at validation (docs/specs.md).
MAX_MEMBERS = 10_000

AXIS_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]{0,62}$"
_AXIS = re.compile(AXIS_PATTERN)
# A string value is a member's name and directory: no separator, quote, space or slash.
STRING_VALUE_PATTERN = r"^[A-Za-z0-9_.+-]{1,63}$"
_STRING_VALUE = re.compile(STRING_VALUE_PATTERN)
RESERVED = ("exclude", "include")

Scalar = bool | int | float | str
Values = tuple[tuple[str, Scalar], ...]  # (axis, value), in axis-name order


@dataclass(frozen=True)
class MatrixProblem:
    """One thing wrong with a matrix: where (a path under `matrix`) and what."""

    path: tuple[str | int, ...]
    message: str


@dataclass(frozen=True)
class Member:
    """One member of a sweep: the sweep's name and the member's values."""

    sweep: str
    values: Values

    @cached_property
    def name(self) -> str:
        return member_name(self.sweep, self.values)

    @property
    def directory(self) -> str:
        return member_directory(self.values)

    def value(self, axis: str) -> Scalar:
        return dict(self.values)[axis]


def text(value: Scalar) -> str:
    """A value as it appears in names, directories, tokens and environment variables."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return repr(value)
    return str(value)


def member_name(sweep: str, values: Values) -> str:
    return f"{sweep}[{','.join(f'{axis}={text(value)}' for axis, value in values)}]"


def member_directory(values: Values) -> str:
    """The member's directory under its sweep's: its values, readable and safe as a path
    component (values hold no slash, space or quote; see STRING_VALUE_PATTERN)."""
    return ",".join(f"{axis}={text(value)}" for axis, value in values)


def sweep_of(name: str) -> str | None:
    """The sweep a member's name belongs to (``train[seed=0]`` -> ``train``); None for a
    run of its own (no other name holds a bracket)."""
    sweep, bracket, _ = name.partition("[")
    return sweep if bracket else None


def member_order(name: str) -> tuple[str, tuple[tuple[str, tuple[int, float, str]], ...]]:
    """A key that sorts members by their values, numbers as numbers (`i=2` before
    `i=10`), then as written; a run of its own sorts by its name."""
    sweep, bracket, values = name.partition("[")
    if not bracket:
        return sweep, ()
    key = []
    for pair in values.rstrip("]").split(","):
        axis, _, value = pair.partition("=")
        try:
            key.append((axis, (0, float(value), value)))
        except ValueError:
            key.append((axis, (1, 0.0, value)))
    return sweep, tuple(key)


def axes_of(matrix: Mapping[str, Any]) -> tuple[str, ...]:
    """The axis names, sorted: the order of the YAML keys never matters."""
    return tuple(sorted(key for key in matrix if key not in RESERVED))


def problems(matrix: object) -> list[MatrixProblem]:
    """Everything wrong with a `matrix:` value as written, each at its place."""
    if not isinstance(matrix, Mapping):
        return [MatrixProblem((), "must be a mapping of axes (`seed: [0, 1, 2]`)")]
    found: list[MatrixProblem] = []
    axes = axes_of(matrix)
    if not axes:
        found.append(MatrixProblem((), "declares no axis: give at least one, e.g. `seed: [0, 1]`"))
    for axis in axes:
        if not isinstance(axis, str) or not _AXIS.match(axis):
            found.append(
                MatrixProblem(
                    (axis,),
                    f"{axis!r} is not a valid axis name: letters, digits and '_', starting "
                    "with a letter or '_'",
                )
            )
            continue
        values = matrix[axis]
        if not isinstance(values, list):
            found.append(MatrixProblem((axis,), "must be a list of values, e.g. [0, 1, 2]"))
            continue
        if not values:
            found.append(MatrixProblem((axis,), "is empty: a sweep over it would have no member"))
        seen: dict[str, int] = {}
        for index, value in enumerate(values):
            problem = _value_problem(value)
            if problem is not None:
                found.append(MatrixProblem((axis, index), problem))
                continue
            first = seen.setdefault(text(value), index)
            if first != index:
                found.append(
                    MatrixProblem(
                        (axis, index),
                        f"duplicate member: {text(value)} is already value {first} of {axis}",
                    )
                )
    for reserved in RESERVED:
        found.extend(_entries_problems(matrix, reserved, axes))
    return found


def _value_problem(value: object) -> str | None:
    if isinstance(value, bool | int):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{value} is not a finite number"
    if isinstance(value, str):
        if _STRING_VALUE.match(value):
            return None
        return (
            f"{value!r}: a string value is part of the member's name and directory; use "
            "letters, digits and _ . + - (at most 63 characters)"
        )
    return (
        f"{value!r} is not a scalar: a value is a number, true/false or a string "
        "(a list or mapping cannot name a member)"
    )


def _entries_problems(
    matrix: Mapping[str, Any], reserved: str, axes: tuple[str, ...]
) -> list[MatrixProblem]:
    entries = matrix.get(reserved)
    if entries is None:
        return []
    if not isinstance(entries, list):
        return [MatrixProblem((reserved,), "must be a list of combinations, e.g. [{seed: 0}]")]
    found = []
    for index, entry in enumerate(entries):
        where: tuple[str | int, ...] = (reserved, index)
        if not isinstance(entry, Mapping) or not entry:
            found.append(MatrixProblem(where, "must be a mapping of axis: value"))
            continue
        unknown = sorted(str(key) for key in entry if key not in axes)
        if unknown:
            found.append(
                MatrixProblem(
                    where,
                    f"unknown axis {', '.join(unknown)}: the axes are {', '.join(axes)}",
                )
            )
            continue
        missing = [axis for axis in axes if axis not in entry]
        if reserved == "include" and missing:
            found.append(
                MatrixProblem(
                    where,
                    f"gives no value for {', '.join(missing)}: an include entry is a whole "
                    f"member, with a value for every axis ({', '.join(axes)})",
                )
            )
            continue
        for axis, value in entry.items():
            problem = _value_problem(value)
            if problem is not None:
                found.append(MatrixProblem((*where, str(axis)), problem))
    return found


def expand(sweep: str, matrix: Mapping[str, Any]) -> tuple[list[Member], list[MatrixProblem]]:
    """The members of a valid matrix (``problems`` found nothing), in a stable order: the
    product in the order written, then the includes; and any duplicate member or a count
    over MAX_MEMBERS as problems."""
    axes = axes_of(matrix)
    size = math.prod(len(matrix[axis]) for axis in axes)
    excludes = [
        {axis: text(value) for axis, value in entry.items()}
        for entry in matrix.get("exclude") or ()
    ]
    includes = list(matrix.get("include") or ())
    # Excludes rarely drop most of a product: one far too large is refused before it is walked.
    if size > 10 * MAX_MEMBERS or (size + len(includes) > MAX_MEMBERS and not excludes):
        return [], [_too_many(size + len(includes))]
    members: list[Member] = []
    names: dict[str, int] = {}
    found: list[MatrixProblem] = []
    for combination in itertools.product(*(matrix[axis] for axis in axes)):
        values = tuple(zip(axes, combination, strict=True))
        if excludes and any(_matches(values, entry) for entry in excludes):
            continue
        member = Member(sweep, values)
        names[member.name] = len(members)
        members.append(member)
    for index, entry in enumerate(includes):
        member = Member(sweep, tuple((axis, entry[axis]) for axis in axes))
        if member.name in names:
            found.append(
                MatrixProblem(
                    ("include", index),
                    f"duplicate member: {member.name} is already a member of the matrix",
                )
            )
            continue
        names[member.name] = len(members)
        members.append(member)
    if len(members) > MAX_MEMBERS:
        found.append(_too_many(len(members)))
    if not members and not found:
        found.append(MatrixProblem(("exclude",), "excludes every member: the sweep has none"))
    return members, found


def _too_many(count: int) -> MatrixProblem:
    return MatrixProblem(
        (),
        f"has {count} members, more than the {MAX_MEMBERS} a sweep may have: split it "
        "into several runs, or exclude combinations",
    )


def _matches(values: Values, selector: Mapping[str, str]) -> bool:
    """Whether a member's values agree with every (axis, value text) of ``selector``."""
    own = {axis: text(value) for axis, value in values}
    return all(own.get(axis) == want for axis, want in selector.items())


@dataclass(frozen=True)
class Reference:
    """What an input's ``from:`` says: a run, an optional member selector, an output."""

    run: str
    selector: tuple[tuple[str, str], ...]  # (axis, value as written)
    output: str

    @property
    def run_text(self) -> str:
        if not self.selector:
            return self.run
        return f"{self.run}[{','.join(f'{axis}={value}' for axis, value in self.selector)}]"


_REFERENCE = re.compile(r"^(?P<run>[^.\[\]]+)(?:\[(?P<selector>[^\[\]]*)\])?\.(?P<output>[^.]+)$")


def parse_reference(text_: str) -> Reference | str:
    """``run.output`` or ``run[axis=value,...].output``; a message when it is neither."""
    match = _REFERENCE.match(text_)
    if match is None:
        return (
            f"{text_!r} must name another run's output as RUN.OUTPUT (e.g. prepare.dataset), "
            "or a sweep member's as RUN[AXIS=VALUE,...].OUTPUT (e.g. train[seed=0].model)"
        )
    selector: list[tuple[str, str]] = []
    if match["selector"] is not None:
        for part in match["selector"].split(","):
            axis, equals, value = part.strip().partition("=")
            if not equals or not axis.strip() or not value.strip():
                return f"{text_!r}: write the member as RUN[AXIS=VALUE,...], e.g. train[seed=0]"
            selector.append((axis.strip(), value.strip()))
    return Reference(match["run"], tuple(selector), match["output"])


def selected(
    members: Iterable[Member],
    selector: Mapping[str, str],
    pairing: Values = (),
) -> list[Member]:
    """The members that agree with ``selector`` (values as written) and, on the axes they
    share, with ``pairing`` (a downstream member's own values)."""
    wanted = {axis: _normal(value) for axis, value in selector.items()}
    paired = {axis: text(value) for axis, value in pairing if axis not in wanted}
    chosen = []
    for member in members:
        own = {axis: text(value) for axis, value in member.values}
        if all(_same(own.get(axis), want) for axis, want in wanted.items()) and all(
            own.get(axis, value) == value for axis, value in paired.items()
        ):
            chosen.append(member)
    return chosen


def _normal(value: str) -> str:
    """A selector's value as member names write it: `1e-3` and `0.001` are one number."""
    lowered = value.lower()
    if lowered in ("true", "false"):
        return lowered
    try:
        return str(int(value))
    except ValueError:
        pass
    try:
        return repr(float(value))
    except ValueError:
        return value


def _same(own: str | None, want: str) -> bool:
    return own is not None and (own == want or _normal(own) == want)


def is_single(upstream_axes: Iterable[str], selector: Iterable[str], shared: Iterable[str]) -> bool:
    """Whether a reference picks one member (every upstream axis fixed by the selector or
    by pairing) rather than gathering several."""
    return set(upstream_axes) <= set(selector) | set(shared)
