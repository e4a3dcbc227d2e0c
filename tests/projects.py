"""Names for the projects tests make: unique per test, and remembered, so the session's
last step can tell the jobs this run of the suite left behind from anyone else's."""

from __future__ import annotations

import uuid

MADE: set[str] = set()


def new_project_name(prefix: str) -> str:
    name = f"{prefix}{uuid.uuid4().hex[:10]}"
    MADE.add(name)
    return name
