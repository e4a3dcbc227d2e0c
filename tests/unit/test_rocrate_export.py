from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from rocrate.rocrate import ROCrate

from reconciler.export.rocrate import PROCESS_RUN_CRATE, export_ro_crate
from reconciler.scheduler.states import Health, SlurmState
from reconciler.state.outputs import OutputVersion
from reconciler.state.provenance import ComponentRun, InputUsed, Manifest, OutputMade

T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
COMMIT = "0123456789abcdef0123456789abcdef01234567"
RUNS = "/scratch/demo/runs"
CSV = OutputVersion(kind="content", digest="a" * 64, files=1, bytes=4)
OLD_CSV = OutputVersion(kind="content", digest="9" * 64, files=1, bytes=4)
MODEL = OutputVersion(kind="fingerprint", digest="b" * 64, files=3, bytes=300, directory=True)
GENOME = OutputVersion(kind="fingerprint", digest="c" * 64, files=1, bytes=1000)


def manifest(run: str, job_id: str, health: Health, **fields: Any) -> Manifest:
    state = {Health.SUCCEEDED: SlurmState.COMPLETED, Health.FAILED: SlurmState.FAILED}[health]
    end = T0 + timedelta(hours=1)
    code = 0 if health is Health.SUCCEEDED else 1
    component = ComponentRun(
        job_id=job_id, state=state, exit_code=code, nodes="cpu1", partition="cpu",
        submit=T0, start=T0, end=end,
    )  # fmt: skip
    values: dict[str, Any] = {
        "project": "demo",
        "run": run,
        "commit": COMMIT,
        "remote": "https://github.com/lab/demo.git",
        "spec_hash": "0123456789abcdef",
        "script_sha256": "d" * 64,
        "command": f"python {run}.py",
        "script": None,
        "run_dir": f"{RUNS}/{run}",
        "inputs": {},
        "outputs": {},
        "job_id": job_id,
        "health": health,
        "components": (component,),
        "submit": T0,
        "start": T0,
        "end": T0 + timedelta(hours=1),
        "user": "ana",
        "host": "login1",
        "recon_version": "0.1.0",
        "created_at": T0 + timedelta(hours=2),
    }
    values.update(fields)
    return Manifest.model_validate(values)


def project_manifests(train_read: OutputVersion = CSV) -> dict[str, Manifest]:
    prep = manifest(
        "prep", "11", Health.SUCCEEDED,
        outputs={"data": OutputMade(path=f"{RUNS}/prep/data.csv", version=CSV)},
    )  # fmt: skip
    train = manifest(
        "train", "12", Health.FAILED,
        inputs={
            "data": InputUsed(from_="prep.data", path=f"{RUNS}/prep/data.csv", version=train_read),
            "ref": InputUsed(path="/ref/genome fa", version=GENOME),
        },
        outputs={
            "model": OutputMade(path=f"{RUNS}/train/model", version=MODEL),
            "log": OutputMade(path=f"{RUNS}/train/train.log", version=None),
        },
        start=T0 + timedelta(hours=1),
        end=T0 + timedelta(hours=3),
        created_at=T0 + timedelta(hours=4),
    )  # fmt: skip
    return {"prep": prep, "train": train}


def exported(tmp_path: Path, manifests: dict[str, Manifest]) -> ROCrate:
    out = export_ro_crate(manifests, "demo", COMMIT, tmp_path / "crate")
    assert out == tmp_path / "crate"
    return ROCrate(out)


def ids(entities: Any) -> list[str]:
    """The @ids of what a property refers to; one the crate does not hold is its bare @id."""
    return [
        e if isinstance(e, str) else e.id
        for e in (entities if isinstance(entities, list) else [entities])
    ]


def test_the_crate_declares_the_process_run_crate_profile(tmp_path: Path) -> None:
    crate = exported(tmp_path, project_manifests())
    assert ids(crate.root_dataset["conformsTo"]) == [PROCESS_RUN_CRATE]
    profile = crate.get(PROCESS_RUN_CRATE)
    assert (profile.type, profile["name"], profile["version"]) == (
        "CreativeWork", "Process Run Crate", "0.6",
    )  # fmt: skip
    metadata = json.loads((tmp_path / "crate" / "ro-crate-metadata.json").read_text())
    assert metadata["@context"] == [
        "https://w3id.org/ro/crate/1.3/context",
        "https://w3id.org/ro/terms/workflow-run/context",
    ]


def test_the_root_names_the_project_at_its_commit_and_mentions_one_action_per_run(
    tmp_path: Path,
) -> None:
    crate = exported(tmp_path, project_manifests())
    root = crate.root_dataset
    assert root["name"] == "demo"
    assert root["datePublished"] == "2026-03-01T13:00:00+00:00"  # the newest manifest's
    source = root["about"]
    assert (source.type, source["version"], source["codeRepository"]) == (
        "SoftwareSourceCode", COMMIT, "https://github.com/lab/demo.git",
    )  # fmt: skip
    assert ids(root["mentions"]) == ["#run-prep-job-11", "#run-train-job-12"]
    assert all(action.type == "CreateAction" for action in root["mentions"])


def test_each_action_has_its_times_status_agent_and_script(tmp_path: Path) -> None:
    crate = exported(tmp_path, project_manifests())
    train = crate.get("#run-train-job-12")
    assert train["name"] == "train: Slurm job 12"
    assert (train["startTime"], train["endTime"]) == (
        "2026-03-01T10:00:00+00:00", "2026-03-01T12:00:00+00:00",
    )  # fmt: skip
    assert ids(train["actionStatus"]) == ["http://schema.org/FailedActionStatus"]
    assert train["error"] == "failed: Slurm state FAILED, exit code 1"
    assert (train["agent"].type, train["agent"]["name"]) == ("Person", "ana")
    assert crate.get("#run-prep-job-11")["agent"] is train["agent"]  # one person, two runs
    script = train["instrument"]
    assert script.type == "SoftwareSourceCode"
    assert (script["version"], script["sha256"]) == (COMMIT, "d" * 64)
    assert "runs the command 'python train.py'" in script["description"]
    prep = crate.get("#run-prep-job-11")
    assert ids(prep["actionStatus"]) == ["http://schema.org/CompletedActionStatus"]
    assert "error" not in prep


def test_objects_are_the_inputs_and_results_the_outputs_left_with_their_versions(
    tmp_path: Path,
) -> None:
    crate = exported(tmp_path, project_manifests())
    prep, train = crate.get("#run-prep-job-11"), crate.get("#run-train-job-12")
    data = f"file://{RUNS}/prep/data.csv"
    assert ids(prep["result"]) == [data]
    # The file prep made is the file train read: one entity links the two runs.
    assert ids(train["object"]) == [data, "file:///ref/genome%20fa"]
    assert ids(train["result"]) == [f"file://{RUNS}/train/model/"]  # the log was not left
    csv = crate.get(data)
    assert (csv.type, csv["sha256"], csv["identifier"]) == ("File", "a" * 64, "content:" + "a" * 64)
    assert csv["alternateName"] == f"{RUNS}/prep/data.csv"
    model = crate.get(f"file://{RUNS}/train/model/")
    assert (model.type, model["identifier"]) == ("Dataset", "fingerprint:" + "b" * 64)
    genome = crate.get("file:///ref/genome%20fa")
    assert "sha256" not in genome  # a fingerprint is no checksum of the bytes
    assert data in ids(crate.root_dataset["hasPart"])


def test_an_input_read_at_an_older_version_says_so(tmp_path: Path) -> None:
    crate = exported(tmp_path, project_manifests(train_read=OLD_CSV))
    data = crate.get(f"file://{RUNS}/prep/data.csv")
    assert data["sha256"] == "a" * 64  # the version its producer left
    assert (
        "Input data was read at content:" + "9" * 64
        in crate.get("#run-train-job-12")["description"]
    )
    fresh = exported(tmp_path / "fresh", project_manifests())
    assert "was read at" not in fresh.get("#run-train-job-12")["description"]


def test_the_manifests_travel_in_the_crate_and_no_output_data_is_copied(tmp_path: Path) -> None:
    manifests = project_manifests()
    crate = exported(tmp_path, manifests)
    saved = crate.get("manifests/train.json")
    assert saved.type == "File"
    assert ids(saved["about"]) == ["#run-train-job-12"]
    text = (tmp_path / "crate" / "manifests" / "train.json").read_text()
    assert Manifest.model_validate_json(text) == manifests["train"]
    written = sorted(
        str(p.relative_to(tmp_path / "crate")) for p in (tmp_path / "crate").rglob("*")
    )
    assert written == [
        "manifests", "manifests/prep.json", "manifests/train.json", "ro-crate-metadata.json",
    ]  # fmt: skip


def test_an_entity_carries_its_producers_version_whichever_run_comes_first(
    tmp_path: Path,
) -> None:
    used = InputUsed(from_="prep.data", path=f"{RUNS}/prep/data.csv", version=OLD_CSV)
    reader = manifest("analyse", "13", Health.SUCCEEDED, inputs={"data": used})
    crate = exported(tmp_path, {"analyse": reader, "prep": project_manifests()["prep"]})
    assert crate.get(f"file://{RUNS}/prep/data.csv")["sha256"] == "a" * 64
    assert "was read at content:" + "9" * 64 in crate.get("#run-analyse-job-13")["description"]


def test_the_same_manifests_make_the_same_crate_in_any_order(tmp_path: Path) -> None:
    export_ro_crate(project_manifests(), "demo", COMMIT, tmp_path / "one")
    backwards = dict(reversed(project_manifests().items()))
    export_ro_crate(backwards, "demo", COMMIT, tmp_path / "two")
    one = (tmp_path / "one" / "ro-crate-metadata.json").read_text()
    assert one == (tmp_path / "two" / "ro-crate-metadata.json").read_text()


def test_a_project_with_no_manifests_is_an_empty_but_valid_crate(tmp_path: Path) -> None:
    crate = exported(tmp_path, {})
    assert crate.root_dataset["name"] == "demo"
    assert crate.get_by_type("CreateAction") == []
