"""A failed rerun never destroys the last good output, on the local backend and the whole
engine: a rerun that fails after writing half its outputs, and one killed between two
renames while it published them, leave the previous outputs the same files (bytes, inode,
modification time), and the run that reads them current."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reconciler.scheduler.local import LocalScheduler
from reconciler.scheduler.runfolder import published_marker, publishing_dir
from reconciler.state.provenance import read_manifest
from tests.gitrepo import GitRepo
from tests.local.serving import recon
from tests.local.test_cascade import jobs, ok, statuses
from tests.projects import new_project_name

MAKE = """kind: Run
name: make
resources: {cpus: 1}
command: |
  printf '%s' VERSION > {outputs.report.path}
  mkdir -p {outputs.table.path}
  printf '%s' VERSION > {outputs.table.path}/1.csv
outputs:
  report: report.txt
  table: table/
"""
READ = """kind: Run
name: read
resources: {cpus: 1}
inputs:
  report: make.report
command: cat {inputs.report.path} > {outputs.copy.path}
outputs:
  copy: copy.txt
"""

Seen = dict[str, tuple[bytes, int, int]]


def killing_shim(folder: Path, command: str, pattern: str, at: int) -> Path:
    """A ``command`` for the job's PATH that SIGKILLs the job's script the ``at``-th time
    its arguments match the shell ``pattern``, then does as the real one; the file
    counting those calls."""
    folder.mkdir(exist_ok=True)
    count = folder / f"{command}.calls"
    shim = folder / command
    shim.write_text(
        "#!/bin/sh\n"
        f'case "$*" in {pattern})\n'
        f"  n=$(( $(cat {count} 2>/dev/null || echo 0) + 1 )); echo $n > {count}\n"
        f'  if [ "$n" = {at} ]; then kill -9 $PPID; sleep 5; fi;;\n'
        "esac\n"
        f'exec /bin/{command} "$@"\n'
    )
    shim.chmod(0o755)
    return count


def on_path(spec: str, folder: Path) -> str:
    """The spec with ``folder`` first on its job's PATH."""
    return spec.replace("outputs:", f"env: {{PATH: '{folder}:/usr/bin:/bin'}}\noutputs:", 1)


def published(root: Path) -> Seen:
    run = root / "runs" / "make"
    seen: Seen = {}
    for path in (run / "report.txt", run / "table" / "1.csv"):
        if path.exists():
            status = path.stat()
            seen[path.name] = (path.read_bytes(), status.st_ino, status.st_mtime_ns)
    return seen


@pytest.fixture
def project(tmp_path: Path) -> Iterator[GitRepo]:
    """make and read, both current, make's outputs saying v1."""
    repo = GitRepo(tmp_path / "repo")
    name = new_project_name("staged")
    repo.commit(
        {
            "recon.yaml": f"project: {name}\nscheduler: local\n",
            "specs/make.yaml": MAKE.replace("VERSION", "v1"),
            "specs/read.yaml": READ,
        }
    )
    ok(recon(repo.root, "apply", ".", "--auto-approve", "--wait"))
    yield repo
    backend = LocalScheduler(repo.root / ".recon")
    for job_id, job in jobs(repo.root).items():  # whatever a failed test left queued
        if "ended" not in job:
            backend.cancel(str(job_id))


def test_a_rerun_that_fails_halfway_leaves_the_last_good_outputs(project: GitRepo) -> None:
    root = project.root
    before = published(root)
    assert {content for content, _, _ in before.values()} == {b"v1"}
    # writes half of what it made before, then fails
    failing = MAKE.replace("VERSION", "half").replace(
        "  printf '%s' half > {outputs.table.path}/1.csv\n", "  exit 1\n"
    )
    project.commit({"specs/make.yaml": failing})
    result = recon(root, "apply", ".", "--auto-approve", "--wait")
    assert result.returncode == 1, result.stdout + result.stderr
    assert "failed make: failed: job" in result.stderr, result.stderr
    assert published(root) == before
    rows = statuses(root)
    assert (rows["make"]["health"], rows["read"]["sync"]) == ("failed", "current"), rows


def test_a_job_killed_between_two_renames_is_rolled_back_by_the_next_pass(
    project: GitRepo,
) -> None:
    """The rerun's job is SIGKILLed while it publishes: its report already renamed into
    place, its table moved aside and not yet replaced (an `mv` on its PATH kills the
    job at its third rename). The next pass puts the previous outputs back."""
    root = project.root
    before = published(root)
    shims = root.parent / "shims"
    count = killing_shim(shims, "mv", '"-T "*', at=3)  # the third rename
    killed = on_path(MAKE.replace("VERSION", "v2"), shims)
    project.commit({"specs/make.yaml": killed})
    ok(recon(root, "apply", ".", "make", "--auto-approve"))
    _wait_ended(root)
    run = root / "runs" / "make"
    assert count.read_text() == "3\n"
    assert (run / "report.txt").read_bytes() == b"v2"  # half published, as killed
    assert not (run / "table").exists()
    assert any(publishing_dir(run).iterdir())
    recon(root, "apply", ".", "make", "--auto-approve")  # settles it, after rolling back
    assert published(root) == before
    assert not any(publishing_dir(run).iterdir())
    rows = statuses(root)
    assert (rows["make"]["health"], rows["read"]["sync"]) == ("failed", "current"), rows


def test_a_job_killed_once_it_has_published_everything_is_a_success(
    project: GitRepo,
) -> None:
    """The rerun's job publishes every output, then is SIGKILLed before it exits (an
    `rm` on its PATH kills it as it removes what it kept aside, its last step): Slurm
    would call it failed or cancelled, yet its command succeeded and its outputs are in
    place. The next pass counts it a success of its spec, with a manifest naming it, so
    the journal records the outputs readers see."""
    root = project.root
    shims = root.parent / "shims"
    # the second removal of what it kept aside: after the last rename
    count = killing_shim(shims, "rm", "*.recon-previous*", at=2)
    killed = on_path(MAKE.replace("VERSION", "v2"), shims)
    project.commit({"specs/make.yaml": killed})
    ok(recon(root, "apply", ".", "make", "--auto-approve"))
    _wait_ended(root)
    job_id = max(jobs(root))
    assert count.read_text() == "2\n"
    folder = root / ".recon" / "local" / "jobs" / str(job_id)
    ended = json.loads((folder / "ended.json").read_text())
    assert ended["signal"] == 9, ended  # killed: a failure, for the scheduler
    run = root / "runs" / "make"
    assert {content for content, _, _ in published(root).values()} == {b"v2"}
    assert not any(publishing_dir(run).iterdir())  # nothing to roll back
    ok(recon(root, "apply", ".", "make", "--auto-approve"))  # settles it
    rows = statuses(root)
    assert (rows["make"]["health"], rows["make"]["sync"]) == ("succeeded", "current"), rows
    manifest = read_manifest(run)
    assert manifest is not None and manifest.job_id == str(job_id), manifest
    assert not any(published_marker(run, str(job_id)).parent.iterdir())


def _wait_ended(root: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if all("ended" in job for job in jobs(root).values()):
            return
        time.sleep(0.2)
    raise AssertionError(json.dumps(jobs(root), default=str))


LINKED = """kind: Run
name: scratch
resources: {cpus: 1}
command: |
  mkdir -p {outputs.data.path}
  printf new > {outputs.data.path}/part.txt
outputs:
  data: STAGED
"""


def test_a_staged_output_that_is_a_symbolic_link_is_refused_not_replaced(
    project: GitRepo,
) -> None:
    """`data -> /scratch/...`: publishing would rename a folder of the job's own onto
    the link's path, dropping the link and writing on this filesystem. The submission is
    refused, naming the file, line and output and what to do; `staged: false` writes
    through the link."""
    root = project.root
    scratch = root.parent / "scratch"
    scratch.mkdir()
    (scratch / "part.txt").write_text("old")
    run = root / "runs" / "scratch"
    run.mkdir(parents=True)
    (run / "data").symlink_to(scratch)
    before = set(jobs(root))
    project.commit({"specs/scratch.yaml": LINKED.replace("STAGED", "data/")})
    refused = recon(root, "apply", ".", "scratch", "--auto-approve")
    assert refused.returncode != 0, refused.stdout + refused.stderr
    said = refused.stdout + refused.stderr
    assert "specs/scratch.yaml:1: outputs.data:" in said, said
    assert "is a symbolic link" in said and "staged: false" in said, said
    assert "Traceback" not in said, said
    assert set(jobs(root)) == before  # nothing submitted
    assert (run / "data").is_symlink() and (scratch / "part.txt").read_text() == "old"
    # Refused until the commit changes: shown so, and `apply --wait` ends saying why
    # (it tried again pass after pass for ever).
    for command in (("plan", ".", "scratch"), ("status", ".", "scratch")):
        shown = recon(root, *command)
        assert "blocked" in shown.stdout and "refused at submission" in shown.stdout, (
            shown.stdout + shown.stderr
        )
    waited = recon(root, "apply", ".", "scratch", "--auto-approve", "--wait", timeout=60)
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert "blocked scratch: refused at submission: specs/scratch.yaml:1: outputs.data:" in (
        waited.stderr
    ), waited.stderr
    assert set(jobs(root)) == before
    project.commit({"specs/scratch.yaml": LINKED.replace("STAGED", "{path: data/, staged: false}")})
    ok(recon(root, "apply", ".", "scratch", "--auto-approve", "--wait"))
    assert (run / "data").is_symlink() and (scratch / "part.txt").read_text() == "new"
