"""A run's folder (scheduler/runfolder.py): recon's bookkeeping folder in a run directory
is never the state directory, and what earlier releases wrote is read after this
release's."""

from __future__ import annotations

from pathlib import Path

from reconciler.desired.models import Project
from reconciler.scheduler import runfolder


def test_the_bookkeeping_folder_is_not_the_state_directorys_default_name() -> None:
    # A run whose workdir is the project folder would share its folder with the journal.
    state_dir = Project.model_fields["state_dir"].default
    assert state_dir != runfolder.BOOKKEEPING
    # ... which output versions skip all the same, as an earlier release's bookkeeping.
    assert state_dir == runfolder.EARLIER_BOOKKEEPING
    assert {runfolder.BOOKKEEPING, state_dir} <= runfolder.NOT_OUTPUTS


def test_readers_look_where_this_release_writes_first() -> None:
    run = Path("/srv/p/runs/train")
    assert runfolder.READ_FROM[0] == runfolder.BOOKKEEPING
    assert runfolder.manifest_file(run) == run / ".recon-run" / "manifest.json"
    assert runfolder.skipped_markers(run, "7_1") == (
        run / ".recon-run" / "skipped" / "7_1",
        run / ".recon" / "skipped" / "7_1",
    )
    assert runfolder.environment_record(run, "7", ".recon") == run / ".recon/environment/7"
    assert runfolder.map_file(run, "ab", ".recon") == run / ".recon/arrays/ab.json"
    assert runfolder.task_script(run, "ab", 3) == run / ".recon-run/arrays/ab/3.sh"
    assert runfolder.task_logs(run, "ab", 3) == run / ".recon-run/arrays/ab/3.logs"
