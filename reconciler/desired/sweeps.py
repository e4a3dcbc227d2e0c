"""Sweeps turned into their members, and inputs that name sweeps turned into the runs they read.

After this step a sweep's members are runs like any other: each has its own name
(``train[seed=0]``), directory, spec hash, upstreams, outputs and journal history. What
stays of the sweep is ``Sweep``: which members it has, for grouping them into one job
array and for showing them together.

An input that names a sweep (``from: train.model``) reads:
- from a plain run, every member's output (a gather);
- from a sweep sharing axes with ``train``, the members that agree on the shared axes
  (paired member by member, a gather only when ``train`` has axes the reader lacks);
- with a selector, ``train[seed=0].model``, only the members with those values.
An input that reads exactly one member is rewritten to name it (``from:
train[lr=0.001,seed=0].model``), so everything downstream sees an ordinary input.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from reconciler.desired import matrix, templates
from reconciler.desired.desired import Sweep, run_workdir
from reconciler.desired.matrix import Member
from reconciler.desired.summary import DocumentSummary, InputRef
from reconciler.errors import SpecIssue


@dataclass
class Expansion:
    summaries: list[DocumentSummary]  # every document, each sweep replaced by its members
    members: dict[str, Member] = field(default_factory=dict)
    sweeps: dict[str, Sweep] = field(default_factory=dict)
    # run -> input -> the member runs it gathers (inputs reading one run are not here)
    gathers: dict[str, dict[str, tuple[str, ...]]] = field(default_factory=dict)
    # run -> input -> the one member it reads, for an input that names a sweep
    singles: dict[str, dict[str, str]] = field(default_factory=dict)
    upstreams: dict[str, tuple[str, ...]] = field(default_factory=dict)
    issues: list[SpecIssue] = field(default_factory=list)


def expand(summaries: list[DocumentSummary], runs_dir: str) -> Expansion:
    """Members for every sweep, upstreams for every run; ``check_project`` has passed, so
    every input names a run and an output that exist."""
    by_name = {summary.name: summary for summary in summaries if summary.kind == "Run"}
    members_of: dict[str, list[Member]] = {}
    for summary in by_name.values():
        grid = _matrix(summary)
        if grid is not None:
            members_of[summary.name] = matrix.expand(summary.name, grid)[0]
    expansion = Expansion([])
    if not members_of:
        expansion.summaries = summaries
        expansion.upstreams = {name: tuple(s.upstreams) for name, s in by_name.items()}
        return expansion
    for summary in summaries:
        grid = _matrix(summary) if summary.kind == "Run" else None
        if summary.kind != "Run":
            expansion.summaries.append(summary)
        elif grid is None:
            expansion.summaries.append(summary)
            _resolve(expansion, summary, summary.name, (), members_of, by_name)
        else:
            members = members_of[summary.name]
            expansion.sweeps[summary.name] = Sweep(
                summary.name,
                tuple(member.name for member in members),
                summary.data.get("max_parallel"),
                matrix.axes_of(grid),
            )
            workdir = run_workdir(summary.workdir, runs_dir, summary.name)
            for member in members:
                expansion.members[member.name] = member
                expansion.summaries.append(
                    summary._replace(
                        name=member.name,
                        spec_hash=None,
                        workdir=f"{workdir.rstrip('/')}/{member.directory}",
                    )
                )
                _resolve(expansion, summary, member.name, member.values, members_of, by_name)
    return expansion


def _matrix(summary: DocumentSummary) -> Mapping[str, Any] | None:
    grid = summary.data.get("matrix") if summary.kind == "Run" else None
    return grid if isinstance(grid, Mapping) else None


def _resolve(
    expansion: Expansion,
    summary: DocumentSummary,
    name: str,
    values: matrix.Values,
    members_of: Mapping[str, list[Member]],
    by_name: Mapping[str, DocumentSummary],
) -> None:
    """What each of ``name``'s inputs reads, and so its upstreams."""
    upstreams: list[str] = []
    for ref in summary.inputs:
        if ref.run is None:
            continue
        reference = matrix.parse_reference(f"{ref.run}.{ref.output}")
        assert not isinstance(reference, str)  # the model checked it
        members = members_of.get(reference.run)
        if members is None:
            if reference.selector:
                expansion.issues.append(
                    _issue(summary, ref, f"{reference.run!r} has no matrix: name it without [...]")
                )
            upstreams.append(reference.run)
            continue
        read = _read(expansion, summary, ref, reference, members, values, by_name)
        if read is None:
            continue
        runs, single = read
        upstreams.extend(runs)
        if single:
            expansion.singles.setdefault(name, {})[ref.name] = runs[0]
        else:
            expansion.gathers.setdefault(name, {})[ref.name] = tuple(runs)
    expansion.upstreams[name] = tuple(upstreams)


def _read(
    expansion: Expansion,
    summary: DocumentSummary,
    ref: InputRef,
    reference: matrix.Reference,
    members: list[Member],
    values: matrix.Values,
    by_name: Mapping[str, DocumentSummary],
) -> tuple[list[str], bool] | None:
    """The members one input reads, and whether it reads exactly one; None after an issue."""
    upstream_grid = _matrix(by_name[reference.run])
    assert upstream_grid is not None
    axes = matrix.axes_of(upstream_grid)
    unknown = [axis for axis, _ in reference.selector if axis not in axes]
    if unknown:
        message = (
            f"{reference.run_text}: {reference.run!r} has no axis {', '.join(unknown)} "
            f"(its axes: {', '.join(axes)})"
        )
        expansion.issues.append(_issue(summary, ref, message))
        return None
    shared = [axis for axis, _ in values if axis in axes]
    chosen = matrix.selected(members, dict(reference.selector), values)
    if not chosen:
        what = reference.run_text if reference.selector else reference.run
        pairing = f" for member {matrix.member_name(summary.name, values)}" if values else ""
        expansion.issues.append(_issue(summary, ref, f"{what} has no such member{pairing}"))
        return None
    single = matrix.is_single(axes, (axis for axis, _ in reference.selector), shared)
    if not single:
        paths = _path_tokens(summary, ref.name)
        if paths:
            message = (
                f"reads {len(chosen)} members of sweep {reference.run!r}: its command uses "
                f"{{inputs.{ref.name}.path}}; use {{inputs.{ref.name}.paths}} (the paths, "
                f"shell-quoted) or {{inputs.{ref.name}.list}} (a file listing them)"
            )
            expansion.issues.append(_issue(summary, ref, message))
            return None
    return [member.name for member in chosen], single


def _path_tokens(summary: DocumentSummary, input_name: str) -> bool:
    command = summary.data.get("command")
    if not isinstance(command, str):
        return False
    wanted = f"inputs.{input_name}.path"
    return any(token.expression == wanted for token in templates.tokens(command))


def _issue(summary: DocumentSummary, ref: InputRef, message: str) -> SpecIssue:
    return SpecIssue(summary.file, ref.line, f"inputs.{ref.name}", message)
