"""Allocations and the steps inside them, in Slurm's words: argv, options, parsers. Pure.

An allocation is held with ``salloc --no-shell`` and carries recon's tag like a batch job.
Runs and setup commands run inside it as steps, ``srun --jobid=<id>``: with ``--overlap``
(sharing CPUs and memory) unless the run asks for GPUs, which it then gets to itself
(``--exact``, see ``sharing``). A step
has no comment, so its *name* carries the tag: a run's step is named with the run's tag,
a setup step with its allocation's own tag. sacct lists steps under their allocation's
job, so the one sacct call of a pass sees them; ``step_runs`` then presents each run's
step as a job of that run, with the step's id (``12.3``), so everything above the
scheduler (planning, settling, status, manifests) treats it like a batch job.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from dataclasses import replace

from reconciler.desired.models import Container, RunResources
from reconciler.scheduler.base import ObservedJob, StepRequest
from reconciler.scheduler.render import resource_options
from reconciler.scheduler.runfolder import step_log_paths
from reconciler.scheduler.slurm.parse import SQUEUE_STEP_FORMAT
from reconciler.scheduler.tag import Tag

_PYXIS_FLAG = re.compile(r"--container-image\b")
_PYXIS_OPTIONS = {"writable": "--container-writable", "workdir": "--container-workdir"}


def step_options(shape: RunResources | None, allocation_gpus: bool = False) -> tuple[str, ...]:
    """A run's own share of the allocation: its nodes (1 unless it says) and tasks (one per
    node unless it says), each task's CPUs, the memory and GPUs per node, and its time
    limit (``--time`` ends the step, not the allocation). None: setup.

    A step without ``--gres`` sees every GPU of the allocation (Slurm 22.05 sets
    CUDA_VISIBLE_DEVICES to all of them); ``--gres=gpu:0`` leaves it unset. It is given
    only where the allocation holds GPUs: a cluster without gpu gres may refuse it."""
    if shape is None:
        # Setup once on every node: containers and caches it prepares are per node.
        return ("--ntasks-per-node=1",)
    tasks = []
    if shape.ntasks is not None:
        tasks.append(f"--ntasks={shape.ntasks}")
    if shape.ntasks_per_node is not None:
        tasks.append(f"--ntasks-per-node={shape.ntasks_per_node}")
    # Slurm needs a task count beside --gpus-per-task: the step always states one.
    per_task = shape.gpus_per_task
    each = (f"--gpus-per-task={per_task.option}",) if per_task is not None else ()
    hidden = allocation_gpus and not uses_gpus(shape)
    return (
        f"--nodes={shape.step_nodes}",
        *(tasks or [f"--ntasks={shape.step_nodes}"]),
        *each,
        *resource_options(shape, hide_gpus=hidden),
    )


def uses_gpus(shape: RunResources) -> bool:
    """Whether a run's step asks for GPUs in any form: whole ones, MIG slices, shards."""
    return shape.step_gpus > 0 or shape.shards is not None


def container_options(container: Container | None, allocation: str) -> tuple[str, ...]:
    """pyxis's flags. The container is named (after the allocation unless the spec names
    it), so the image is imported once per allocation: later steps reuse the container."""
    if container is None:
        return ()
    options = [
        f"--container-image={container.image}",
        f"--container-name={container.name or allocation}",
    ]
    if container.mounts:
        options.append(f"--container-mounts={','.join(container.mounts)}")
    if container.writable:
        options.append("--container-writable")
    if container.workdir is not None:
        options.append(f"--container-workdir={container.workdir}")
    return tuple(options)


def sharing(shape: RunResources | None) -> tuple[str, ...]:
    """How a step shares the allocation with the steps beside it (verified on Slurm 22.05,
    docs/specs.md): ``--overlap`` lets setup and CPU runs share its CPUs and memory, so a
    long run never keeps a short one waiting for room. But ``--overlap`` shares GRES too:
    two ``--overlap --gres=gpu:1`` steps get the same device. A run that asks for GPUs is
    therefore started without it and with ``--exact`` (only the CPUs it asks for, so the
    next GPU run finds CPUs free): concurrent GPU runs get disjoint devices, and one that
    finds no free GPU is held back by srun until one is (not listed meanwhile)."""
    if shape is not None and uses_gpus(shape):
        return ("--exact",)
    return ("--overlap",)


def srun(request: StepRequest) -> list[str]:
    """``srun`` for one step."""
    out, err = step_log_paths(request.log_dir)
    return [
        "srun",
        f"--jobid={request.allocation_id}",
        *sharing(request.shape),
        f"--job-name={request.tag.format()}",
        f"--chdir={request.workdir}",
        f"--output={out}",
        f"--error={err}",
        *step_options(request.shape, request.allocation_gpus),
        *container_options(request.container, request.container_name),
        "bash",
        os.fspath(request.script),
    ]


def squeue_steps(job_ids: Iterable[str]) -> list[str]:
    """The steps slurmctld holds in these jobs (no accounting lag): id, state, start,
    nodes and name (``parse.parse_squeue_steps``). A job slurmctld has forgotten is left
    out, not an error."""
    return [
        "squeue",
        "--steps",
        f"--jobs={','.join(job_ids)}",
        "--noheader",
        f"--Format={SQUEUE_STEP_FORMAT}",
    ]


def sacct_steps(job_id: str) -> list[str]:
    """Every step accounting knows in one job, ended ones too."""
    return ["sacct", f"--jobs={job_id}", "--parsable2", "--noheader", "--format=JobID,JobName"]


def step_named(text: str, job_id: str, tag: Tag) -> str | None:
    """The id of the step of ``job_id`` named with ``tag`` in sacct's listing
    (``12.3|recon1:...``) or squeue's (``12.3|RUNNING|...|recon1:...``): the id first,
    the name last. The newest when there are several."""
    found = None
    for line in text.splitlines():
        step_id, name = line.strip().split("|")[0], line.strip().rsplit("|", 1)[-1]
        head, dot, step = step_id.partition(".")
        if head == job_id and dot and step.isdigit() and name == tag.format():
            found = step_id
    return found


def container_features(srun_help: str) -> frozenset[str]:
    """What steps can ask of a container here, in the spec's words (``Container.features``),
    by the flags pyxis adds to ``srun --help``: ``--container-image`` (Slurm's own
    ``--container`` takes an OCI bundle, not an image, and does not count), and the
    options pyxis versions differ in. Empty without pyxis."""
    if _PYXIS_FLAG.search(srun_help) is None:
        return frozenset()
    offered = {"image"}
    for feature, flag in _PYXIS_OPTIONS.items():
        if re.search(rf"{flag}\b", srun_help):
            offered.add(feature)
    return frozenset(offered)


def step_runs(job: ObservedJob) -> tuple[ObservedJob, ...]:
    """Each run's step inside an allocation, as a job of that run: id ``12.3``, the step's
    row as its one component (so it is finished when the step is)."""
    if job.tag.kind != "alloc":
        return ()
    found = []
    for row in job.steps:
        tag = row.step_tag
        if tag is not None and tag.kind == "run" and tag.project == job.tag.project:
            own = replace(row, step=None, tag=tag)
            found.append(ObservedJob(job_id=row.job_id, tag=tag, rows=(own,)))
    return tuple(found)
