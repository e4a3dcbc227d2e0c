"""The skip check of a run that may rerun: the files apply writes beside its inputs, and
the batch script's lines that read them, run in bash as a job would."""

from __future__ import annotations

import hashlib
import os
import subprocess
from dataclasses import replace
from pathlib import Path

from reconciler.desired.desired import DesiredRun
from reconciler.engine.apply.skips import skip_check_files
from reconciler.engine.observe import endings
from reconciler.engine.plan.actions import SkipCheck
from reconciler.scheduler.render import RenderContext, skip_check_block
from reconciler.scheduler.runfolder import skip_check_file, skipped_marker, skipped_markers
from reconciler.scheduler.states import Health
from reconciler.scheduler.states import SlurmState as S
from reconciler.scheduler.tag import Tag
from reconciler.state.outputs import version_of
from reconciler.state.records import EndingKind
from tests import planning
from tests.planning import desired, hash_of, observed, record, run


def setup(tmp_path: Path, folder: bool = False) -> tuple[DesiredRun, RenderContext, Path]:
    """A run `user` reading `maker`'s output, a file or a folder, in ``tmp_path``."""
    output = {"path": "data/" if folder else "data.txt", "hash": "content"}
    state = desired(run("maker", outputs={"out": output}), run("user", "maker"))
    user = state.runs["user"]
    data = tmp_path / "maker" / ("data" if folder else "data.txt")
    tag = Tag(
        project="p", deployment="0123456789ab", kind="run", name="user", spec_hash=user.spec_hash
    )
    context = RenderContext(
        project="p",
        code_dir=tmp_path,
        run_dir=tmp_path / "user",
        tag=tag,
        input_paths={"in_maker": data},
    )
    return user, context, data


def write_files(files: dict[Path, bytes | None]) -> None:
    for path, content in files.items():
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def job(context: RenderContext, job_id: str = "7") -> str:
    """Run the block as a job would; what it printed, or `ran` when it went on."""
    script = "\n".join(["set -euo pipefail", *skip_check_block(context.run_dir), "echo ran"])
    env = {"PATH": os.environ["PATH"], "SLURM_JOB_ID": job_id}
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_file_as_its_last_success_read_it_skips_and_leaves_a_marker(tmp_path: Path) -> None:
    user, context, data = setup(tmp_path)
    read = hashlib.sha256(b"same").hexdigest()
    files = skip_check_files(user, context, SkipCheck(job_id="5", inputs={"in_maker": read}))
    # The journal's version itself: nothing read, the file need not be there yet.
    assert files[skip_check_file(context.run_dir, ".sha256")] == f"{read}  {data}\n".encode()
    write_files(files)
    data.parent.mkdir(parents=True)
    data.write_bytes(b"same")  # the upstream reran and wrote the same bytes
    assert job(context) == (
        "recon: skipped: inputs unchanged (as its last success read them): not running the command"
    )
    assert skipped_marker(context.run_dir, "7").exists()

    data.write_bytes(b"other")
    assert job(context, "8") == "ran"
    assert not skipped_marker(context.run_dir, "8").exists()
    data.unlink()
    assert job(context, "9") == "ran"


def test_no_check_written_means_the_command_runs_and_old_files_go(tmp_path: Path) -> None:
    user, context, data = setup(tmp_path)
    data.parent.mkdir(parents=True)
    data.write_bytes(b"same")
    read = hashlib.sha256(b"same").hexdigest()
    write_files(skip_check_files(user, context, SkipCheck(job_id="5", inputs={"in_maker": read})))
    write_files(skip_check_files(user, context, None))  # a later submission, not checked
    assert not list((Path(context.run_dir) / "inputs").iterdir())
    assert job(context) == "ran"


def test_a_folder_is_listed_file_by_file_and_entry_by_entry(tmp_path: Path) -> None:
    user, context, data = setup(tmp_path, folder=True)
    (data / "sub").mkdir(parents=True)
    (data / "a.csv").write_bytes(b"1")
    (data / "sub" / "b csv").write_bytes(b"2")
    for bookkeeping in (".recon-run", ".recon", "sub/.recon-run"):  # never part of an output
        (data / bookkeeping).mkdir()
        (data / bookkeeping / "manifest.json").write_text("{}")
    version = version_of(data, "content")
    assert version is not None
    check = SkipCheck(job_id="5", inputs={"in_maker": version.digest})
    files = skip_check_files(user, context, check)
    assert files[skip_check_file(context.run_dir, ".entries")] == (
        f"d {data}/sub\nf {data}/a.csv\nf {data}/sub/b csv\n".encode()
    )
    write_files(files)
    assert job(context).startswith("recon: skipped")

    (data / "sub" / "new").mkdir()  # an entry more, every file the same
    assert job(context, "8") == "ran"
    (data / "sub" / "new").rmdir()
    (data / "a.csv").write_bytes(b"3")
    assert job(context, "9") == "ran"


def test_a_folder_changed_since_its_last_success_read_it_is_not_checked(tmp_path: Path) -> None:
    user, context, data = setup(tmp_path, folder=True)
    data.mkdir(parents=True)
    (data / "a.csv").write_bytes(b"1")
    version = version_of(data, "content")
    assert version is not None
    (data / "a.csv").write_bytes(b"2")
    check = SkipCheck(job_id="5", inputs={"in_maker": version.digest})
    assert set(skip_check_files(user, context, check).values()) == {None}
    (data / "a.csv").write_bytes(b"1")
    (data / "link").symlink_to("a.csv")  # a link's target is not what sha256sum checks
    assert set(skip_check_files(user, context, check).values()) == {None}


def test_an_array_task_leaves_its_marker_under_recons_id_of_it(tmp_path: Path) -> None:
    user, context, data = setup(tmp_path)
    data.parent.mkdir(parents=True)
    data.write_bytes(b"same")
    read = hashlib.sha256(b"same").hexdigest()
    write_files(skip_check_files(user, context, SkipCheck(job_id="5", inputs={"in_maker": read})))
    script = "\n".join(["set -euo pipefail", *skip_check_block(context.run_dir), "echo ran"])
    env = {
        "PATH": os.environ["PATH"],
        "SLURM_JOB_ID": "44",
        "SLURM_ARRAY_JOB_ID": "40",
        "SLURM_ARRAY_TASK_ID": "4",
    }
    subprocess.run(["bash", "-c", script], check=True, env=env, capture_output=True)
    assert skipped_marker(context.run_dir, "40_4").exists()


def test_settle_records_a_skipped_job_as_having_read_what_its_last_success_read(
    tmp_path: Path,
) -> None:
    """A skip is a success of the current spec that read what the success it matched
    read (an input that changed meanwhile is not taken as read), said in its reason,
    and its marker is looked for by recon's id of the job."""
    state = replace(desired(run("prep"), run("train", "prep")), root=tmp_path)
    for name in ("prep", "train"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "out.txt").write_text(name)
    train = hash_of(state, "train")
    before = replace(
        record("train", train, "11", final=Health.SUCCEEDED), input_versions={"in_prep": "a" * 64}
    )
    records = [before, record("train", train, "12")]
    seen = observed(planning.job("train", train, S.COMPLETED, "12", exit_code=0))

    (ran,) = endings.judge(state, seen, records)
    assert ran.reason is None and ran.read() != before.input_versions  # read now: prep's
    assert ran.kind is None

    marker = skipped_marker(tmp_path / "runs" / "train", "12")
    marker.parent.mkdir(parents=True)
    marker.touch()
    (skipped,) = endings.judge(state, seen, records)
    assert (skipped.health, skipped.reason) == (Health.SUCCEEDED, "skipped: inputs unchanged")
    assert skipped.kind is EndingKind.SKIPPED
    assert skipped.read() == {"in_prep": "a" * 64}
    (recorded,) = [r for r in endings.as_recorded(records, [skipped]) if r.job_id == "12"]
    assert recorded.input_versions == {"in_prep": "a" * 64}
    assert recorded.ending is EndingKind.SKIPPED and recorded.skipped


def test_the_marker_of_a_job_an_earlier_release_submitted_is_found_where_it_left_it(
    tmp_path: Path,
) -> None:
    """Earlier releases' scripts wrote the marker in <run dir>/.recon/skipped/: a job
    submitted before the upgrade that skips after it is still judged a skip."""
    state = replace(desired(run("prep"), run("train", "prep")), root=tmp_path)
    for name in ("prep", "train"):
        (tmp_path / "runs" / name).mkdir(parents=True)
        (tmp_path / "runs" / name / "out.txt").write_text(name)
    train = hash_of(state, "train")
    before = replace(
        record("train", train, "11", final=Health.SUCCEEDED), input_versions={"in_prep": "a" * 64}
    )
    records = [before, record("train", train, "12")]
    seen = observed(planning.job("train", train, S.COMPLETED, "12", exit_code=0))
    marker = tmp_path / "runs" / "train" / ".recon" / "skipped" / "12"
    marker.parent.mkdir(parents=True)
    marker.touch()
    assert marker in skipped_markers(tmp_path / "runs" / "train", "12")
    (skipped,) = endings.judge(state, seen, records)
    assert (skipped.health, skipped.reason) == (Health.SUCCEEDED, "skipped: inputs unchanged")
    assert skipped.read() == {"in_prep": "a" * 64}
