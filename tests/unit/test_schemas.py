from __future__ import annotations

import json
from pathlib import Path

from reconciler.desired.schema import schemas

ROOT = Path(__file__).resolve().parents[2]


def test_committed_schemas_are_current() -> None:
    for name, text in schemas().items():
        committed = ROOT / "schemas" / name
        assert committed.exists(), f"schemas/{name} is missing: run `recon schema`"
        assert committed.read_text() == text, f"schemas/{name} is stale: run `recon schema`"


def test_schemas_forbid_unknown_fields_and_know_the_kinds() -> None:
    run = json.loads(schemas()["run.schema.json"])
    assert run["additionalProperties"] is False
    assert "resources" in run["properties"]
    spec = json.loads(schemas()["spec.schema.json"])
    assert len(spec["oneOf"] if "oneOf" in spec else spec["anyOf"]) == 2


def test_every_example_spec_names_its_schema() -> None:
    example = ROOT / "examples" / "repo"
    files = [example / "recon.yaml", *sorted((example / "specs").glob("*.yaml"))]
    for path in files:
        first = path.read_text().splitlines()[0]
        assert first.startswith("# yaml-language-server: $schema="), path
        target = (path.parent / first.split("=", 1)[1]).resolve()
        assert target.exists(), f"{path}: {target} does not exist"
