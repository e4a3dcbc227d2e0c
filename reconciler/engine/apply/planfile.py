"""Saved plans: `recon plan -out FILE` writes one, `recon apply FILE` reads it back.

A saved plan is applied only while it still describes the world: `check_fresh` compares it
with a plan made now and refuses it, naming what changed, when the project, the commit or
the observed state differ. Reading and freshness are separate so that the check stays a
pure function of two plans (its clock is the new plan's `created_at`).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
from datetime import timedelta
from pathlib import Path

from pydantic import ValidationError

from reconciler.desired.resources import span
from reconciler.engine.plan.actions import Plan
from reconciler.errors import PlanFileError, StalePlanError

FORMAT_VERSION: int = Plan.model_fields["format_version"].default
_REMAKE = "Run `recon plan -out FILE` again"
_KEYS = frozenset({"format_version", "project", "fingerprint", "actions"})


def save(plan: Plan, path: Path | str) -> None:
    """Write the plan as JSON; a reader sees the old file or the new one, never half."""
    target = Path(path)
    try:
        handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
    except OSError as error:
        raise PlanFileError(f"cannot write plan file {target}: {error.strerror}") from None
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(plan.model_dump_json(indent=2) + "\n")
        os.replace(temporary, target)
    except OSError as error:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise PlanFileError(f"cannot write plan file {target}: {error.strerror}") from None


def load(path: Path | str) -> Plan:
    source = Path(path)
    try:
        text = source.read_bytes()
    except FileNotFoundError:
        raise PlanFileError(
            f"no plan file at {source}: make one with `recon plan -out {source}`"
        ) from None
    except OSError as error:
        raise PlanFileError(f"cannot read plan file {source}: {error.strerror}") from None
    return _parse(source, text)


def _parse(source: Path, text: bytes) -> Plan:
    try:
        document = json.loads(text)
    except json.JSONDecodeError as error:
        raise PlanFileError(
            f"{source} is not a plan file: invalid JSON at line {error.lineno}, "
            f"column {error.colno} ({error.msg})"
        ) from None
    except ValueError:  # bytes that are no Unicode text at all
        raise PlanFileError(f"{source} is not a plan file: it is not text") from None
    if not isinstance(document, dict):
        raise PlanFileError(
            f"{source} is not a plan file: it holds a JSON {type(document).__name__}, "
            "where `recon plan -out` writes an object"
        )
    if missing := _KEYS - document.keys():
        raise PlanFileError(
            f"{source} is not a plan file saved by `recon plan -out`: "
            f"it has no {', '.join(sorted(missing))}"
        )
    if document["format_version"] != FORMAT_VERSION:
        raise PlanFileError(
            f"{source} is a plan of format version {document['format_version']!r}; this recon "
            f"applies version {FORMAT_VERSION} only. {_REMAKE} with this recon."
        )
    try:
        return Plan.model_validate(document)
    except ValidationError as error:
        raise PlanFileError(f"{source} is not a valid plan: {_first_problems(error)}") from None


def _first_problems(error: ValidationError, limit: int = 3) -> str:
    problems = [
        f"{'.'.join(str(part) for part in item['loc']) or '(top)'}: {item['msg']}"
        for item in error.errors()
    ]
    more = len(problems) - limit
    return "; ".join(problems[:limit]) + (f"; and {more} more" if more > 0 else "")


def check_fresh(saved: Plan, current: Plan, *, max_age: timedelta | None = None) -> None:
    """Refuse `saved` unless it was made for what `current` sees now.

    `current` is a plan made now, for the same targets, from the state the apply would act
    on; its `created_at` is the clock for `max_age`. Every difference is named, not just
    the first, so one read says what moved; the actions themselves are compared only when
    nothing else already explains why they differ.
    """
    changes = _differences(saved, current) or _other_actions(saved, current)
    age = current.created_at - saved.created_at
    if max_age is not None and age > max_age:
        changes.append(f"it is {span(age)} old, more than the {span(max_age)} allowed")
    if changes:
        raise StalePlanError(
            f"the saved plan is stale: {'; '.join(changes)}. {_REMAKE} and apply the new plan."
        )


def _differences(saved: Plan, current: Plan) -> list[str]:
    found = []
    if (saved.project, saved.root) != (current.project, current.root):
        found.append(
            f"it was made for project {saved.project} in {saved.root}, "
            f"not project {current.project} in {current.root}"
        )
    if saved.commit != current.commit:
        found.append(
            f"it was made {_where(saved.commit)}, the specs are now {_where(current.commit)}"
        )
    if saved.targets != current.targets:
        found.append(
            f"it was made for targets {_listed(saved.targets)}, not {_listed(current.targets)}"
        )
    if saved.fingerprint != current.fingerprint:
        found.append("the observed state changed since it was made")
    return found


def _other_actions(saved: Plan, current: Plan, shown: int = 5) -> list[str]:
    """Same commit, same observation, yet a plan made now would act otherwise.

    The commit says nothing of edits to a work tree, and time alone moves some decisions
    (a job unseen for too long is taken as lost), so compare what each plan would do.
    """
    before, after = _moves(saved), _moves(current)
    moved = sorted(
        name for name in before.keys() | after.keys() if before.get(name) != after.get(name)
    )
    if not moved:
        return []
    more = f" and {len(moved) - shown} more" if len(moved) > shown else ""
    return [f"a plan made now would act otherwise on {', '.join(moved[:shown])}{more}"]


def _moves(plan: Plan) -> dict[str, list[tuple[object, ...]]]:
    """What the plan would do to each target; a target may have several actions (adopt a
    lost job, then wait on it)."""
    moves: dict[str, list[tuple[object, ...]]] = {}
    for a in plan.actions:
        label = a.target if a.target_kind == "run" else f"allocation {a.target}"
        moves.setdefault(label, []).append((a.kind, a.spec_hash, a.job_ids, a.after))
    return moves


def _where(commit: str | None) -> str:
    return f"at commit {commit[:12]}" if commit else "from the work tree"


def _listed(targets: tuple[str, ...]) -> str:
    return ", ".join(targets) if targets else "(the whole project)"
