"""docs/architecture.md names modules and the names they define; each must exist, so
the page a newcomer reads first cannot point at a file that moved."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "architecture.md"

# `engine/plan/runs.py`, `engine/plan/identity.split_by_owner`, `desired/loader._shape`
_PATH = re.compile(r"`((?:[a-z_]+/)+[a-z_]+)(?:\.py|\.([A-Za-z_][\w]*))`")
# `reconciler.engine.plan`
_MODULE = re.compile(r"`(reconciler(?:\.[a-z_]+)+)`")


def _file(path: str) -> Path | None:
    for base in (ROOT / "reconciler", ROOT):
        candidate = base / f"{path}.py"
        if candidate.is_file():
            return candidate
        if (base / path / "__init__.py").is_file():
            return base / path / "__init__.py"
    return None


def test_every_module_the_page_names_exists_and_defines_what_it_says() -> None:
    text = PAGE.read_text()
    missing = []
    for match in _PATH.finditer(text):
        path, name = match.group(1), match.group(2)
        found = _file(path)
        if found is None:
            missing.append(f"{match.group(0)}: no file {path}.py")
        elif name is not None and not re.search(rf"\b{re.escape(name)}\b", found.read_text()):
            missing.append(f"{match.group(0)}: {found.relative_to(ROOT)} has no {name}")
    for match in _MODULE.finditer(text):
        if importlib.util.find_spec(match.group(1)) is None:
            missing.append(f"{match.group(0)}: no such module")
    assert not missing, "docs/architecture.md names what is not there:\n" + "\n".join(missing)


def test_the_page_names_modules_at_all() -> None:
    """The patterns above match the page's way of naming modules (else the test above
    would pass on any page)."""
    text = PAGE.read_text()
    assert len(_PATH.findall(text)) > 40 and len(_MODULE.findall(text)) > 5
