"""docs/tutorial.md's shape, without running it (tests/local/test_doc_tutorial.py runs it):
every block is a step a reader can take, and the README sends newcomers there first."""

from __future__ import annotations

import re

from tests.docs import FENCE, ROOT
from tests.tutorial import TUTORIAL, file_blocks, steps


def test_every_block_is_a_file_or_commands() -> None:
    taken = steps()  # fails on a block that is neither
    assert len([step for step in taken if step.file is None]) >= 20
    written = {step.file for step in taken if step.file is not None}
    assert {"recon.yaml", ".gitignore", "specs/prepare.yaml", "specs/fit.yaml"} <= written
    assert all(fence.body.startswith("# ") for fence in file_blocks())


def test_the_readme_links_the_tutorial_first() -> None:
    readme = (ROOT / "README.md").read_text()
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links[0] == "docs/tutorial.md", links
    reference = readme.split("## Reference", 1)[1]
    assert re.findall(r"\]\((docs/[^)#]+)", reference)[0] == "docs/tutorial.md"


LINK = re.compile(r"\]\(([^)\s]+)\)")


def slug(heading: str) -> str:
    """A heading's anchor as GitHub makes it."""
    kept = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return kept.replace(" ", "-")


def anchors(page: str) -> set[str]:
    """The anchors of a page's headings (a `#` line inside a fenced block is none)."""
    text = FENCE.sub("", page)
    return {slug(line.lstrip("#")) for line in text.splitlines() if line.startswith("#")}


def test_the_tutorials_links_lead_somewhere() -> None:
    """Its table of contents and its links to the other pages, anchors included."""
    page = TUTORIAL.read_text()
    for link in LINK.findall(page):
        if link.startswith("http"):
            continue
        target, _, anchor = link.partition("#")
        path = (TUTORIAL.parent / target) if target else TUTORIAL
        assert path.exists(), link
        if anchor:
            assert anchor in anchors(path.read_text()), link
