"""Which Slurm release answers: `sinfo --version` read into (major, minor). Pure.

Releases differ in what they accept and how they say it (docs/arrays.md, the notes in
each parser); the few places that must know ask this one function.
"""

from __future__ import annotations

import re

_VERSION = re.compile(r"\bslurm(?:-wlm)?\s+(\d+)\.(\d+)(?:\.\d+)?", re.IGNORECASE)


def parse_release(version_text: str) -> tuple[int, int] | None:
    """(24, 11) from `slurm 24.11.5`, as `sinfo --version` and `sbatch --version` print;
    None when the text names no release."""
    found = _VERSION.search(version_text)
    return (int(found.group(1)), int(found.group(2))) if found else None
