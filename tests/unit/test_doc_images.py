"""The pictures the docs show are there, and each is one a test makes (not a hand-made
screenshot that goes stale): its name appears where the browser tests write it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
IMAGE = re.compile(r"!\[[^\]]*\]\((?P<path>[^)]+)\)")
MAKERS = [ROOT / "tests" / "local" / "test_serve_browser.py"]


def test_every_image_in_the_docs_exists_and_is_made_by_a_test() -> None:
    made_by_tests = "\n".join(path.read_text() for path in MAKERS)
    shown = [
        (doc, match.group("path"))
        for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
        for match in IMAGE.finditer(doc.read_text())
    ]
    assert len(shown) >= 3
    for doc, path in shown:
        assert (doc.parent / path).is_file(), f"{doc.name} shows {path}, which is missing"
        assert f'"{Path(path).name}"' in made_by_tests, f"{path}: no test makes it"
