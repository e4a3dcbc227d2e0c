"""docs/tutorial.md's shape, without running it (tests/local/test_doc_tutorial.py runs it):
every block is a step a reader can take, and the README sends newcomers there first."""

from __future__ import annotations

import re

from tests.docs import ROOT
from tests.tutorial import file_blocks, steps


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
