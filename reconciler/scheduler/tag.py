"""The deterministic tag every job recon submits carries, so observation finds them by tag alone.

A tag is written twice into a job: as its comment,
``recon2:<project>:<deployment>:<kind>:<name>:<hash>``, which says everything, and as its job
name, ``<project>.<name>``, which people read in ``squeue``. Only the comment is parsed back.
Every character is one of ``[A-Za-z0-9_.:-]``: safe in an ``#SBATCH`` line, in argv, and in
``--parsable2`` output (no ``|``).

The deployment is one project in one place: two clones of one repo are two deployments,
and each acts only on jobs that carry its own id (``deployment_id``; docs/operations.md
says why the id comes from the state directory).

The ``recon2`` prefix versions the format. ``recon1`` tags (no deployment) are not read
back: such a job cannot be told to be this deployment's, so it is never touched.
"""

from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PREFIX = "recon2"
NAME_PATTERN = r"[A-Za-z0-9_-]+"
# A sweep's member is known by its sweep's name and its values, train[lr=0.001,seed=0]. Its
# tag is never written into a job (a job array carries the sweep's own tag): it is how an
# array task is told apart once the array is split per member (engine/plan/identity.py).
MEMBER_PATTERN = NAME_PATTERN + r"(?:\[[A-Za-z0-9_.+=,-]+\])?"
HASH_PATTERN = r"[0-9a-f]{16}"
DEPLOYMENT_PATTERN = r"[0-9a-f]{12}"

TagKind = Literal["run", "alloc"]

_COMMENT = re.compile(
    rf"{PREFIX}:(?P<project>{NAME_PATTERN}):(?P<deployment>{DEPLOYMENT_PATTERN}):(?P<kind>run|alloc)"
    rf":(?P<name>{NAME_PATTERN}):(?P<spec_hash>{HASH_PATTERN})"
)


class Tag(BaseModel):
    """Which project, run or allocation, and which version of its spec a job was made from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    project: str = Field(pattern=rf"^{NAME_PATTERN}$")
    deployment: str = Field(
        pattern=rf"^{DEPLOYMENT_PATTERN}$", description="which place the project runs from"
    )
    kind: TagKind
    name: str = Field(pattern=rf"^{MEMBER_PATTERN}$")
    spec_hash: str = Field(pattern=rf"^{HASH_PATTERN}$")

    def format(self) -> str:
        """The job comment: the whole tag, parsed back by ``Tag.parse``."""
        return f"{PREFIX}:{self.project}:{self.deployment}:{self.kind}:{self.name}:{self.spec_hash}"

    @property
    def job_name(self) -> str:
        """The job name people see in ``squeue``; not parsed back (it lacks kind and hash)."""
        return f"{self.project}.{self.name}"

    @property
    def options(self) -> tuple[str, str]:
        """The sbatch and salloc options that write the tag into a job, in a batch script's
        #SBATCH lines and on a command line alike: its name, and its comment (where
        ``Tag.parse`` reads it back from)."""
        return f"--job-name={self.job_name}", f"--comment={self.format()}"

    @classmethod
    def parse(cls, text: str) -> Tag | None:
        """The tag a comment holds, or None for any comment recon did not write."""
        match = _COMMENT.fullmatch(text.strip())
        if match is None:
            return None
        kind: TagKind = "run" if match["kind"] == "run" else "alloc"
        return cls(
            project=match["project"],
            deployment=match["deployment"],
            kind=kind,
            name=match["name"],
            spec_hash=match["spec_hash"],
        )

    def owned_by(self, project: str, deployment: str) -> bool:
        """Whether this job belongs to the deployment ``deployment`` of ``project``."""
        return self.project == project and self.deployment == deployment


def deployment_id(state_dir: Path) -> str:
    """The deployment a state directory stands for: a digest of its resolved path.

    The state directory holds the journal and the lock, so one id is one journal and one
    lock: cron and watch in the same folder are one deployment and take turns; a second
    clone, or a copy of the folder, is another. A lost journal is rebuilt by adoption
    because the folder, and so the id, stays the same.
    """
    resolved = str(state_dir.expanduser().resolve())
    return hashlib.sha256(resolved.encode()).hexdigest()[:12]
