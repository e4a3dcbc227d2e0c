"""The deterministic tag every job recon submits carries, so observation finds them by tag alone.

A tag is written twice into a job: as its comment, ``recon1:<project>:<kind>:<name>:<hash>``,
which says everything, and as its job name, ``<project>.<name>``, which people read in
``squeue``. Only the comment is parsed back. Every character is one of ``[A-Za-z0-9_.:-]``:
safe in an ``#SBATCH`` line, in argv, and in ``--parsable2`` output (no ``|``).

The ``recon1`` prefix versions the format, so a later format can be told apart.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PREFIX = "recon1"
NAME_PATTERN = r"[A-Za-z0-9_-]+"
HASH_PATTERN = r"[0-9a-f]{16}"

TagKind = Literal["run", "alloc"]

_COMMENT = re.compile(
    rf"{PREFIX}:(?P<project>{NAME_PATTERN}):(?P<kind>run|alloc)"
    rf":(?P<name>{NAME_PATTERN}):(?P<spec_hash>{HASH_PATTERN})"
)


class Tag(BaseModel):
    """Which project, run or allocation, and which version of its spec a job was made from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: str = Field(pattern=rf"^{NAME_PATTERN}$")
    kind: TagKind
    name: str = Field(pattern=rf"^{NAME_PATTERN}$")
    spec_hash: str = Field(pattern=rf"^{HASH_PATTERN}$")

    def format(self) -> str:
        """The job comment: the whole tag, parsed back by ``Tag.parse``."""
        return f"{PREFIX}:{self.project}:{self.kind}:{self.name}:{self.spec_hash}"

    @property
    def job_name(self) -> str:
        """The job name people see in ``squeue``; not parsed back (it lacks kind and hash)."""
        return f"{self.project}.{self.name}"

    @classmethod
    def parse(cls, text: str) -> Tag | None:
        """The tag a comment holds, or None for any comment recon did not write."""
        match = _COMMENT.fullmatch(text.strip())
        if match is None:
            return None
        kind: TagKind = "run" if match["kind"] == "run" else "alloc"
        return cls(
            project=match["project"], kind=kind, name=match["name"], spec_hash=match["spec_hash"]
        )
