"""JSON Schemas generated from the spec models, for editors and CI (`recon schema`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, TypeAdapter

from reconciler.desired.models import Allocation, Project, Run

_BASE = "https://recon.invalid/schemas/"  # an id, never fetched: editors use the file path


def _schema(model: type[BaseModel] | TypeAdapter[Any], file_name: str, title: str) -> str:
    schema = (
        model.json_schema(by_alias=True)
        if isinstance(model, TypeAdapter)
        else model.model_json_schema(by_alias=True)
    )
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": _BASE + file_name,
        **schema,
        "title": title,
    }
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def schemas() -> dict[str, str]:
    """File name -> schema text, for every schema recon publishes."""
    return {
        "recon.schema.json": _schema(Project, "recon.schema.json", "recon.yaml"),
        "run.schema.json": _schema(Run, "run.schema.json", "recon Run"),
        "allocation.schema.json": _schema(Allocation, "allocation.schema.json", "recon Allocation"),
        "spec.schema.json": _schema(
            TypeAdapter(Run | Allocation), "spec.schema.json", "recon spec document"
        ),
    }


def write(directory: Path) -> list[Path]:
    directory.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in schemas().items():
        path = directory / name
        path.write_text(text)
        written.append(path)
    return written
