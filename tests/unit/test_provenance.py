from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired.desired import DesiredRun, Location, effective_run, spec_hash
from reconciler.desired.models import Project, Run
from reconciler.errors import ManifestError
from reconciler.scheduler.base import JobRecord, ObservedJob
from reconciler.scheduler.states import Health, SlurmState
from reconciler.scheduler.tag import Tag
from reconciler.state.outputs import OutputVersion
from reconciler.state.provenance import (
    Manifest,
    local_identity,
    manifest_from,
    manifest_path,
    read_manifest,
    write_manifest,
)

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
CET = timezone(timedelta(hours=1))
COMMIT = "0123456789abcdef0123456789abcdef01234567"
RUN_DIR = Path("/scratch/demo/runs/train")
DATA = OutputVersion(kind="content", digest="a" * 64, files=1, bytes=10)
MODEL = OutputVersion(kind="fingerprint", digest="b" * 64, files=3, bytes=300, directory=True)


def train() -> DesiredRun:
    spec = Run.model_validate(
        {
            "kind": "Run",
            "name": "train",
            "command": "python train.py --data {inputs.data.path}",
            "inputs": {"data": "prep.data", "ref": {"path": "/ref/genome.fa"}},
            "outputs": {"model": "model/", "log": "/abs/train.log"},
        }
    )
    effective = effective_run(spec, Project(project="demo"))
    return DesiredRun(
        effective, location=Location("specs/train.yaml", 1), spec_hash=spec_hash(effective)
    )


def row(job_id: str, state: SlurmState, tag: Tag | None, **fields: Any) -> JobRecord:
    return JobRecord(job_id=job_id, top_id="12", tag=tag, state=state, source="sacct", **fields)


def het_job(run: DesiredRun, second_end: datetime | None = NOW) -> ObservedJob:
    tag = Tag(
        project="demo",
        deployment="0123456789ab",
        kind="run",
        name=run.name,
        spec_hash=run.spec_hash,
    )
    second_state = SlurmState.FAILED if second_end else SlurmState.RUNNING
    rows = (
        row(
            "12+0", SlurmState.COMPLETED, tag, het_offset=0, exit_code=0, nodes="cpu[1-2]",
            partition="cpu", submit=datetime(2026, 3, 1, 10, 0, tzinfo=CET),
            start=datetime(2026, 3, 1, 10, 5, tzinfo=CET), end=NOW - timedelta(minutes=5),
        ),
        row(
            "12+1", second_state, tag, het_offset=1, exit_code=2 if second_end else None,
            nodes="gpu1", partition="gpu", submit=datetime(2026, 3, 1, 9, 1, tzinfo=UTC),
            start=datetime(2026, 3, 1, 9, 2, tzinfo=UTC), end=second_end,
        ),
        row("12+0.batch", SlurmState.COMPLETED, None, het_offset=0, step="batch", exit_code=0),
    )  # fmt: skip
    return ObservedJob(job_id="12", tag=tag, rows=rows)


def build(
    run: DesiredRun | None = None, job: ObservedJob | None = None, **changes: Any
) -> Manifest:
    run = run or train()
    arguments: dict[str, Any] = {
        "inputs": {"data": DATA, "ref": None},
        "outputs": {"model": MODEL, "log": None},
        "run_dir": RUN_DIR,
        "input_paths": {
            "data": Path("/scratch/demo/runs/prep/data.csv"),
            "ref": Path("/ref/genome.fa"),
        },
        "commit": COMMIT,
        "remote": "https://github.com/lab/demo.git",
        "script_sha256": "c" * 64,
        "now": NOW,
        "user": "ana",
        "host": "login1",
    }
    arguments.update(changes)
    return manifest_from(run, job or het_job(run), **arguments)


def test_the_manifest_records_the_run_its_job_and_the_versions_it_used_and_made() -> None:
    manifest = build()
    assert (manifest.project, manifest.run, manifest.commit) == ("demo", "train", COMMIT)
    assert manifest.spec_hash == train().spec_hash
    assert manifest.command == "python train.py --data {inputs.data.path}"
    assert manifest.inputs["data"].from_ == "prep.data"
    assert manifest.inputs["data"].version == DATA
    assert (manifest.inputs["ref"].from_, manifest.inputs["ref"].path) == (None, "/ref/genome.fa")
    assert manifest.outputs["model"].path == "/scratch/demo/runs/train/model"
    assert manifest.outputs["model"].version == MODEL
    assert manifest.outputs["log"].path == "/abs/train.log"  # absolute paths stay as given
    assert [c.job_id for c in manifest.components] == ["12+0", "12+1"]  # steps are not
    assert [(c.partition, c.nodes, c.exit_code) for c in manifest.components] == [
        ("cpu", "cpu[1-2]", 0),
        ("gpu", "gpu1", 2),
    ]
    assert manifest.health is Health.FAILED
    assert (manifest.user, manifest.host, manifest.created_at) == ("ana", "login1", NOW)


def test_job_times_are_the_earliest_submit_and_start_and_the_last_end_in_utc() -> None:
    manifest = build()
    assert manifest.submit == datetime(2026, 3, 1, 9, 0, tzinfo=UTC)  # 10:00 CET
    assert manifest.start == datetime(2026, 3, 1, 9, 2, tzinfo=UTC)
    assert manifest.end == NOW
    assert all(
        c.submit is not None and c.submit.utcoffset() == timedelta(0) for c in manifest.components
    )


def test_the_job_has_no_end_while_one_component_still_runs() -> None:
    run = train()
    manifest = build(run, het_job(run, second_end=None))
    assert manifest.end is None
    assert manifest.health is Health.RUNNING


def test_credentials_in_the_remote_url_are_left_out() -> None:
    token = build(remote="https://ana:ghp_secret@github.com/lab/demo.git")
    assert token.remote == "https://github.com/lab/demo.git"
    assert "secret" not in token.model_dump_json()
    assert build(remote="git@github.com:lab/demo.git").remote == "git@github.com:lab/demo.git"
    assert build(remote=None).remote is None


def test_a_job_of_another_spec_hash_is_refused() -> None:
    run = train()
    tag = Tag(
        project="demo", deployment="0123456789ab", kind="run", name="train", spec_hash="0" * 16
    )
    job = ObservedJob(job_id="12", tag=tag, rows=(row("12", SlurmState.COMPLETED, tag),))
    with pytest.raises(ValueError, match="not run train at"):
        build(run, job)


@pytest.mark.parametrize(
    "changes",
    [
        {"inputs": {"data": DATA}},
        {"outputs": {"model": MODEL, "log": None, "extra": None}},
        {"input_paths": {"data": Path("/d")}},
    ],
)
def test_versions_that_do_not_name_exactly_the_runs_inputs_and_outputs_are_refused(
    changes: dict[str, Any],
) -> None:
    with pytest.raises(ValueError, match="given for"):
        build(**changes)


def test_a_manifest_round_trips_through_its_file(tmp_path: Path) -> None:
    manifest = build(run_dir=tmp_path)
    written = write_manifest(manifest, tmp_path)
    assert written == manifest_path(tmp_path) == tmp_path / ".recon-run" / "manifest.json"
    assert read_manifest(tmp_path) == manifest
    document = json.loads(written.read_text())
    assert document["inputs"]["data"]["from"] == "prep.data"  # the spec's own word
    assert document["created_at"] == "2026-03-01T12:00:00Z"
    assert document["format_version"] == 1


def test_rewriting_a_manifest_leaves_no_temporary_file(tmp_path: Path) -> None:
    write_manifest(build(run_dir=tmp_path), tmp_path)
    newer = build(run_dir=tmp_path, now=NOW + timedelta(hours=1))
    write_manifest(newer, tmp_path)
    assert read_manifest(tmp_path) == newer
    assert os.listdir(tmp_path / ".recon-run") == ["manifest.json"]


@pytest.mark.parametrize(
    "damage",
    [
        b"",
        b"{",
        b"\xff\xfe not text",
        b"[]",
        b'{"format_version": 1}',
        b"null",
        b"[" * 100_000,
    ],
    ids=["empty", "truncated", "not utf-8", "a list", "fields missing", "null", "deep"],
)
def test_a_damaged_manifest_reads_as_none(tmp_path: Path, damage: bytes) -> None:
    manifest_path(tmp_path).parent.mkdir()
    manifest_path(tmp_path).write_bytes(damage)
    assert read_manifest(tmp_path) is None


def test_a_manifest_from_a_newer_recon_or_with_unknown_fields_reads_as_none(
    tmp_path: Path,
) -> None:
    document = json.loads(build().model_dump_json(by_alias=True))
    for changed in ({**document, "format_version": 2}, {**document, "surprise": 1}):
        manifest_path(tmp_path).parent.mkdir(exist_ok=True)
        manifest_path(tmp_path).write_text(json.dumps(changed))
        assert read_manifest(tmp_path) is None


def test_a_missing_manifest_or_run_directory_reads_as_none(tmp_path: Path) -> None:
    assert read_manifest(tmp_path) is None
    assert read_manifest(tmp_path / "gone") is None
    (tmp_path / ".recon-run").mkdir()
    (tmp_path / ".recon-run" / "manifest.json").mkdir()  # a directory where the file should be
    assert read_manifest(tmp_path) is None


def test_a_manifest_an_earlier_release_wrote_is_read_until_this_one_writes_its_own(
    tmp_path: Path,
) -> None:
    # Earlier releases kept it in <run dir>/.recon/, the state directory's default name.
    old = build(run_dir=tmp_path)
    (tmp_path / ".recon").mkdir()
    (tmp_path / ".recon" / "manifest.json").write_text(old.model_dump_json(by_alias=True))
    assert manifest_path(tmp_path) == tmp_path / ".recon" / "manifest.json"
    assert read_manifest(tmp_path) == old
    newer = build(run_dir=tmp_path, now=NOW + timedelta(hours=1))
    assert write_manifest(newer, tmp_path) == tmp_path / ".recon-run" / "manifest.json"
    assert read_manifest(tmp_path) == newer
    assert (tmp_path / ".recon" / "manifest.json").exists()  # left as it was


def test_writing_into_a_missing_run_directory_is_an_error_that_says_what_to_do(
    tmp_path: Path,
) -> None:
    with pytest.raises(ManifestError, match="make its directory writable"):
        write_manifest(build(), tmp_path / "gone")
    assert not (tmp_path / "gone").exists()


def test_local_identity_falls_back_to_the_uid_without_a_user_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def no_name() -> str:
        raise KeyError("getpwuid(): uid not found: 4242")

    monkeypatch.setattr("getpass.getuser", no_name)
    assert local_identity()[0] == str(os.getuid())


def test_a_failed_write_keeps_the_old_manifest_and_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = build(run_dir=tmp_path)
    write_manifest(old, tmp_path)

    def full_disk(source: str, target: str) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(ManifestError, match="No space left on device"):
        write_manifest(build(run_dir=tmp_path, now=NOW + timedelta(hours=1)), tmp_path)
    assert read_manifest(tmp_path) == old
    assert os.listdir(tmp_path / ".recon-run") == ["manifest.json"]
