"""The docstrings and comments of reconciler/ point at modules by their paths
(`engine/plan/runs.py`, ``engine/plan/history.staleness``); each must exist, so a reader
sent to a module is never sent to one that moved, as docs/architecture.md's test checks
for that page."""

from __future__ import annotations

import io
import re
import tokenize
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "reconciler"

# engine/plan/runs.py, engine/plan/history.staleness, scheduler/jobenv, engine/plan/allocations/
_PATH = re.compile(r"(?<![\w/.-])((?:[a-z_]+/)+[a-z_]+)(\.py\b|\.[A-Za-z_]\w*)?")
# plan_history.staleness: the flat layout's name for engine/plan/history.py
_FLAT = re.compile(r"(?<![\w/.])([a-z]+)_([a-z_]+)\.(?:py\b|[A-Za-z_]\w*)")
# `reconciler.engine.plan`
_MODULE = re.compile(r"\breconciler(?:\.[a-z_]+)+")

_PACKAGES = frozenset(path.name for path in PACKAGE.iterdir() if path.is_dir())
_MODULES = frozenset(
    str(path.relative_to(PACKAGE).with_suffix("")) for path in PACKAGE.rglob("*.py")
)


def _prose(source: str) -> Iterator[tuple[int, str]]:
    """The comments and string literals of a module (docstrings among them), by line."""
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type in (tokenize.COMMENT, tokenize.STRING):
            yield token.start[0], token.string


def _exists(path: str, module_only: bool) -> bool:
    for base in (PACKAGE, ROOT):
        if (base / f"{path}.py").is_file():
            return True
        if not module_only and (base / path).is_dir():
            return True
    return False


def _module(dotted: str) -> bool:
    """`reconciler.engine.plan.runs` names a module; `reconciler.engine.plan.runs.decide`
    a name that module defines."""
    parts = dotted.split(".")[1:]
    for module, name in ((parts, None), (parts[:-1], parts[-1])):
        path = PACKAGE.joinpath(*module)
        for source in (path.with_suffix(".py"), path / "__init__.py"):
            if source.is_file():
                return name is None or re.search(rf"\b{name}\b", source.read_text()) is not None
    return False


def _stale(text: str) -> Iterator[str]:
    for match in _PATH.finditer(text):
        path, suffix = match.group(1), match.group(2)
        if path.split("/")[0] not in _PACKAGES:
            continue  # a path of the repository's (docs/...), or not a path at all
        if not _exists(path, module_only=suffix is not None):
            yield match.group(0)
    for match in _FLAT.finditer(text):
        package, module = match.group(1), match.group(2)
        nested = any(name.endswith(f"{package}/{module}") for name in _MODULES)
        if nested and not any(name.endswith(f"{package}_{module}") for name in _MODULES):
            yield match.group(0)
    for match in _MODULE.finditer(text):
        if not _module(match.group(0)):
            yield match.group(0)


def _pointers() -> list[str]:
    found = []
    for source in sorted(PACKAGE.rglob("*.py")):
        for line, text in _prose(source.read_text()):
            for pointer in _stale(text):
                found.append(f"{source.relative_to(ROOT)}:{line}: {pointer}")
    return found


def test_every_module_a_docstring_or_comment_names_exists() -> None:
    stale = _pointers()
    assert not stale, "docstrings and comments name modules that are not there:\n" + "\n".join(
        stale
    )


def test_the_patterns_catch_the_ways_a_module_is_named() -> None:
    """Each pattern above finds what it is for (else the test above would pass on any
    text), and passes what is there."""
    stale = list(
        _stale(
            "engine/plan_prune.py, (engine/plan_history.staleness), ``plan_history.staleness``"
            " engine/settle.py; reconciler.engine.plan_runs"
        )
    )
    assert stale == [
        "engine/plan_prune.py",
        "engine/plan_history.staleness",
        "engine/settle.py",
        "plan_history.staleness",
        "reconciler.engine.plan_runs",
    ]
    assert not list(
        _stale(
            "engine/plan/prune.py, engine/plan/history.staleness, engine/plan/allocations/,"
            " docs/cost.md, scheduler/jobenv, reconciler.engine.plan.runs.decide"
        )
    )
