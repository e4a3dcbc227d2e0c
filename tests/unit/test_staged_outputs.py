"""Staged outputs, run by a real bash: a job writes its outputs beside the published ones
and publishes them only once its command succeeded and wrote them all; a job killed at
any moment leaves, once its publishing is rolled back (``state/publishing``), every
output as it was before it or every output as it made it, never a mix.

The job is the batch script recon renders, run as the batch step would run it; the kills
are SIGKILLs to its whole process group at random moments, with renames slowed down (an
``mv`` and ``ln`` on the job's PATH that sleep first) so that many land between two.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.desired import DesiredRun, Location, effective_run, spec_hash
from reconciler.desired.models import Defaults, Project, Run
from reconciler.scheduler.render import RenderContext, render_batch_script
from reconciler.scheduler.runfolder import publishing_dir, staging_path, unwritten
from reconciler.scheduler.tag import Tag
from reconciler.state.publishing import roll_back_ended
from tests.docs import shown_block

HASH = "0123456789abcdef"

# Writes a file output and a folder output (with its marker), each saying which version
# it is, after a moment: $1 is the version.
WRITE_BOTH = (
    "printf '%s' \"$V\" > {outputs.report.path}\n"
    "mkdir -p {outputs.table.path}/part\n"
    "printf '%s' \"$V\" > {outputs.table.path}/part/1.csv\n"
    "printf '%s' \"$V\" > {outputs.table.path}/DONE\n"
)
OUTPUTS = {"report": "report.txt", "table": {"path": "table/", "marker": "table/DONE"}}


def job(tmp_path: Path, command: str, outputs: dict[str, Any] | None = None, **more: Any) -> Path:
    """The batch script of run `make` in `<tmp>/run`, written to `<tmp>/job.sh`."""
    project = Project(project="demo", defaults=Defaults())
    spec = {"kind": "Run", "name": "make", "command": command, "outputs": outputs or OUTPUTS}
    spec.update(more)
    run = DesiredRun(
        effective_run(Run.model_validate(spec), project),
        location=Location("specs/make.yaml", 1),
        spec_hash=HASH,
    )
    tag = Tag(project="demo", deployment="0123456789ab", kind="run", name="make", spec_hash=HASH)
    context = RenderContext("demo", tmp_path, tmp_path / "run", tag)
    (tmp_path / "run").mkdir(exist_ok=True)
    script = tmp_path / "job.sh"
    script.write_text(render_batch_script(run, context))
    return script


def start(
    script: Path, version: str, job_id: str, path: str | None = None
) -> subprocess.Popen[bytes]:
    env = {"PATH": path or os.environ["PATH"], "LC_ALL": "C", "V": version, "SLURM_JOB_ID": job_id}
    return subprocess.Popen(
        ["bash", str(script)],
        cwd=script.parent,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )


def finish(script: Path, version: str, job_id: str) -> subprocess.CompletedProcess[bytes]:
    process = start(script, version, job_id)
    _, err = process.communicate(timeout=30)
    return subprocess.CompletedProcess(process.args, process.returncode, b"", err)


Seen = dict[str, tuple[bytes, int, int]]


def outputs_of(run: Path) -> Seen:
    """What a reader sees at the published paths: content, and which file it is."""
    seen: Seen = {}
    for path in (run / "report.txt", run / "table/part/1.csv", run / "table/DONE"):
        if path.exists():
            status = path.stat()
            seen[str(path.relative_to(run))] = (
                path.read_bytes(),
                status.st_ino,
                status.st_mtime_ns,
            )
    return seen


def versions(seen: Seen) -> set[bytes]:
    return {content for content, _, _ in seen.values()}


def test_a_successful_job_publishes_every_output_and_leaves_no_staging(tmp_path: Path) -> None:
    script = job(tmp_path, WRITE_BOTH)
    assert finish(script, "one", "1").returncode == 0
    assert finish(script, "two", "2").returncode == 0
    run = tmp_path / "run"
    assert versions(outputs_of(run)) == {b"two"} and len(outputs_of(run)) == 3
    assert sorted(p.name for p in run.iterdir()) == [".recon-run", "report.txt", "table"]
    assert not any(publishing_dir(run).iterdir())


def test_a_rerun_failing_halfway_leaves_the_previous_outputs_untouched(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert finish(job(tmp_path, WRITE_BOTH), "good", "1").returncode == 0
    before = outputs_of(run)
    half = "printf 'trunc' > {outputs.report.path}\nmkdir -p {outputs.table.path}\nexit 3\n"
    assert finish(job(tmp_path, half), "bad", "2").returncode == 3
    assert outputs_of(run) == before  # the same bytes, the same files, the same mtimes
    assert versions(before) == {b"good"}


def test_a_command_that_does_not_write_an_output_publishes_none(tmp_path: Path) -> None:
    run = tmp_path / "run"
    assert finish(job(tmp_path, WRITE_BOTH), "good", "1").returncode == 0
    before = outputs_of(run)
    only_report = "printf 'new' > {outputs.report.path}\n"
    result = finish(job(tmp_path, only_report), "new", "2")
    assert result.returncode == 1
    assert b"did not write its declared outputs: table; nothing published" in result.stderr
    assert outputs_of(run) == before
    assert unwritten(run, "2").read_text() == "table\n"


def test_an_output_not_staged_is_written_in_place(tmp_path: Path) -> None:
    run = tmp_path / "run"
    appending = "printf '%s\\n' \"$V\" >> {outputs.log.path}\n"
    script = job(tmp_path, appending, {"log": {"path": "log.txt", "staged": False}})
    assert "staging" not in script.read_text()
    finish(script, "one", "1")
    finish(script, "two", "2")
    assert (run / "log.txt").read_text() == "one\ntwo\n"


def test_an_output_inside_another_is_written_and_published_with_it(tmp_path: Path) -> None:
    outputs = {"table": "table/", "part": "table/part/1.csv"}
    command = "mkdir -p {outputs.table.path}/part\nprintf '%s' \"$V\" > {outputs.part.path}\n"
    script = job(tmp_path, command, outputs)
    assert finish(script, "one", "1").returncode == 0
    assert finish(script, "two", "2").returncode == 0
    assert (tmp_path / "run" / "table" / "part" / "1.csv").read_text() == "two"
    forgetting = job(tmp_path, "mkdir -p {outputs.table.path}\n", outputs)
    result = finish(forgetting, "three", "3")
    assert b"did not write its declared outputs: part;" in result.stderr
    assert (tmp_path / "run" / "table" / "part" / "1.csv").read_text() == "two"


def test_a_step_of_several_tasks_stages_nothing(tmp_path: Path) -> None:
    """Each task of a step runs the whole script: none of them could publish alone."""
    several = {"nodes": 2, "cpus": 1}
    assert ".recon-staging" not in job(tmp_path, "true", None, allocation="warm",
                                       resources=several).read_text()  # fmt: skip
    one = {"cpus": 1}
    assert ".recon-staging" in job(tmp_path, "true", None, allocation="warm",
                                   resources=one).read_text()  # fmt: skip


def test_the_run_directory_itself_is_never_staged(tmp_path: Path) -> None:
    script = job(tmp_path, 'printf x > "$RECON_RUN_DIR/x"\n', {"all": "."})
    assert ".recon-staging" not in script.read_text()
    assert finish(script, "one", "1").returncode == 0


@pytest.fixture
def slow_renames(tmp_path: Path) -> str:
    """A PATH whose `mv` and `ln` sleep a few milliseconds first: wider windows between
    the renames of one publishing, for the kills to land in."""
    shims = tmp_path / "shims"
    shims.mkdir()
    for name in ("mv", "ln"):
        real = subprocess.run(["sh", "-c", f"command -v {name}"], capture_output=True, text=True)
        shim = shims / name
        shim.write_text(f'#!/bin/sh\nsleep 0.01\nexec {real.stdout.strip()} "$@"\n')
        shim.chmod(0o755)
    return f"{shims}:{os.environ['PATH']}"


def test_a_job_killed_at_any_moment_leaves_all_old_or_all_new(
    tmp_path: Path, slow_renames: str
) -> None:
    """SIGKILL the job at random moments across its life, then roll back what it left
    half published (as the next pass does): every output is the previous job's, or
    every output is the killed job's, never a mix, and nothing is left to roll back."""
    script = job(tmp_path, WRITE_BOTH)
    run = tmp_path / "run"
    assert finish(script, "v0", "1").returncode == 0
    # How long one job takes, to draw the kills across all of it.
    began = time.monotonic()
    start(script, "v1", "2", slow_renames).wait(timeout=30)
    span = time.monotonic() - began
    seed = int(os.environ.get("RECON_KILL_SEED", random.randrange(1 << 30)))
    draw = random.Random(seed)
    outcomes: dict[str, int] = {"old": 0, "new": 0, "rolled back": 0}
    current = b"v1"
    for attempt in range(int(os.environ.get("RECON_KILLS", "40"))):
        version = f"k{attempt}".encode()
        process = start(script, version.decode(), str(attempt + 3), slow_renames)
        time.sleep(draw.uniform(0, span * 1.1))
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
        outcomes["rolled back"] += len(roll_back_ended([run]))
        seen = versions(outputs_of(run))
        assert len(outputs_of(run)) == 3, f"seed {seed}, attempt {attempt}: {outputs_of(run)}"
        assert seen in ({current}, {version}), f"seed {seed}, attempt {attempt}: mixed {seen}"
        if seen == {version}:
            outcomes["new"] += 1
            current = version
        else:
            outcomes["old"] += 1
        assert not any(publishing_dir(run).iterdir())
    print(f"kills: {outcomes} (seed {seed})")
    assert outcomes["rolled back"], "no kill landed while the job published: draw again"
    assert finish(script, "after", "999").returncode == 0  # the next job runs as usual


def test_whether_an_output_is_staged_is_no_part_of_the_spec_hash() -> None:
    """A spec written before `staged` existed keeps its hash (pinned: the hash an earlier
    release gave it), and declaring it either way changes nothing."""
    base = {"kind": "Run", "name": "make", "command": "true", "workdir": "runs/make"}
    hashes = {
        spec_hash(Run.model_validate({**base, "outputs": outputs}))
        for outputs in (
            {"o": "o.txt"},
            {"o": {"path": "o.txt"}},
            {"o": {"path": "o.txt", "staged": True}},
            {"o": {"path": "o.txt", "staged": False}},
        )
    }
    assert hashes == {EARLIER_HASH}


STAGING_BLOCK = "docs/specs.md: <output's folder>/.recon-staging/<output's name>     what {o"


def test_the_staging_path_the_docs_show() -> None:
    shown = shown_block(STAGING_BLOCK).body.split("  ")[0]
    assert shown == staging_path("<output's folder>/<output's name>")
    assert staging_path("/r/model/policy.json") == "/r/model/.recon-staging/policy.json"
    assert staging_path("/r/ckpt/") == "/r/.recon-staging/ckpt/"


EARLIER_HASH = "3b6a5c0047ec3dc9"  # recon before `staged` (commit 2532e44)
