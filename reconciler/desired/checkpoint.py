"""A run's `checkpoint`: it saves its progress when warned, and its next job resumes.

`checkpoint: {path: ckpt/, signal: USR1, before_end: 2m, max_requeues: 20}` says the
command saves its progress in `path` (a folder in the run's folder, made before the job
starts, kept across attempts, never staged, published or hashed as an output) when the
job is warned with `signal` `before_end` its time limit, or when it is preempted (SIGTERM).
A job of such a run that ends so (it saved a checkpoint, timed out or was preempted) is a
requeue, not a failure: recon submits the run's next job, which resumes from the
checkpoint, at most `max_requeues` times since the run's last success. What the batch
script does with the signal: ``scheduler/render.checkpoint_lines``; how the planner
counts requeues: ``engine/plan/runs.failed_before``.

`max_requeues` is left out of the spec hash, as `retries` is; the rest is in it.
"""

from __future__ import annotations

import posixpath
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from reconciler.desired.fields import SafeText
from reconciler.desired.resources import Duration

MAX_REQUEUES = 1000
# Slurm's `--signal=<sig>@<seconds>` takes at most 65535 seconds.
MOST_BEFORE_END = 65535
# Signals a command can catch and the batch script can pass on; TERM is what a
# preemption's grace period (and the time limit itself) sends, so it is always forwarded.
Signal = Literal["USR1", "USR2", "HUP", "INT", "QUIT", "TERM", "URG"]
# The spec fields left out of the hash (how many requeues change no result).
NOT_HASHED = ("max_requeues",)


class Checkpoint(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    path: SafeText = Field(
        description="A folder relative to the run's directory where the command saves its "
        "progress; made before the job starts, kept across its attempts, never staged, "
        "published or deleted by recon. The command finds it as {checkpoint.path} and "
        "RECON_CHECKPOINT_DIR.",
    )
    signal: Signal = Field(
        "USR1",
        description="The signal the job gets `before_end` its time limit, passed on to the "
        "command's processes (SIGTERM of a preemption or the time limit is passed on too).",
    )
    before_end: Duration = Field(
        Duration(120),
        description="How long before the time limit the warning comes: `2m`, `30s`. Slurm "
        "may send it up to a minute early.",
    )
    max_requeues: Annotated[int, Field(ge=0, le=MAX_REQUEUES)] = Field(
        20,
        description="The most jobs that may resume the run since its last success before "
        "it counts as failed. Not part of the spec hash.",
    )

    @field_validator("path")
    @classmethod
    def _inside_the_run(cls, value: str) -> str:
        normal = posixpath.normpath(value.strip()) if value.strip() else ""
        if not normal or normal == "." or posixpath.isabs(normal) or normal.startswith(".."):
            raise ValueError(
                f"{value!r} is not a folder inside the run's directory: write a relative "
                "path such as ckpt/"
            )
        if normal.split("/")[0] in (".recon-run", ".recon", "logs", "inputs"):
            raise ValueError(
                f"{value!r} is inside recon's own bookkeeping ({normal.split('/')[0]}/): "
                "choose another folder such as ckpt/"
            )
        return value

    @field_validator("before_end")
    @classmethod
    def _slurm_takes_it(cls, value: Duration) -> Duration:
        if value.seconds > MOST_BEFORE_END:
            raise ValueError(
                f"{value.text} is more than Slurm's --signal takes ({MOST_BEFORE_END} "
                "seconds): warn the job closer to its end"
            )
        return value

    @property
    def folder(self) -> str:
        """The path, normalised, relative to the run's directory (no trailing slash)."""
        return posixpath.normpath(self.path.strip())

    def overlaps(self, output_path: str, run_dir: str) -> bool:
        """Whether an output (relative to ``run_dir`` or absolute) holds the checkpoint's
        folder, or lies inside it."""
        mine = posixpath.normpath(posixpath.join(run_dir, self.folder))
        theirs = posixpath.normpath(posixpath.join(run_dir, output_path))
        return (
            mine == theirs
            or mine.startswith(theirs.rstrip("/") + "/")
            or theirs.startswith(mine + "/")
        )
