"""docs/tutorial.md end to end on the local backend, from an empty folder: every file it
shows written, every command run, every output compared (tests/tutorial.py says how)."""

from __future__ import annotations

from pathlib import Path

from tests.tutorial import follow


def test_the_tutorial_from_an_empty_folder(tmp_path: Path) -> None:
    taken = follow(tmp_path, slurm=False)
    commands = [step.text for step in taken if step.file is None]
    # The story the page promises: a sweep, code changed, a seed added, status, graph,
    # the web view, then the step to Slurm.
    assert commands.count("recon apply --auto-approve --wait") == 4, commands
    for command in ("recon status", "recon graph", "recon serve"):
        assert command in commands
    assert [step.text for step in taken if step.on_slurm] == [
        'git commit -qam "run on the cluster"',
        "recon plan",
    ]
    assert (tmp_path / "fits" / "runs" / "report" / "table.txt").exists()
