"""A sweep's members as Slurm job arrays: which index is which member, kept where it is found.

The plan says which job array each member it submits goes in (``plan/arrays.place``:
one per set of jobs they wait for, several when the scheduler's MaxArraySize requires).
Each task runs its member's own batch script: before sbatch, apply writes, under the
sweep's directory (``scheduler/runfolder.py``),

    .recon-run/arrays/<hash>.json         index -> member name and spec hash (the array's map)
    .recon-run/arrays/<hash>/<index>.sh   the member's own batch script
    .recon-run/arrays/<hash>/<index>.logs the folder its output goes to (the member's logs)

and submits one small script that runs ``<index>.sh`` for ``$SLURM_ARRAY_TASK_ID``
(``scheduler/render.array_batch_script``). The array's tag is the sweep's name with
``<hash>`` as its hash, the digest of the map: so whatever the journal knows, a pass that
sees the array reads its map back (the job's working directory is the sweep's directory)
and splits its tasks into one job per member, each under its member's own tag
(``identity.split_arrays``). A crash between sbatch and the journal leaves an array that
is adopted member by member, never submitted again; so does an array an earlier release
submitted, whose map is in ``.recon/arrays/``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import MappingProxyType

from reconciler.engine.plan.arrays import ArrayMap, is_array
from reconciler.scheduler.base import Observation
from reconciler.scheduler.runfolder import READ_FROM
from reconciler.scheduler.runfolder import map_file as map_file
from reconciler.scheduler.runfolder import task_logs as task_logs
from reconciler.scheduler.runfolder import task_script as task_script


def read_maps(
    observation: Observation,
    project: str,
    deployment: str,
    moved: Mapping[str, str] = MappingProxyType({}),
) -> dict[str, ArrayMap]:
    """The map of every job array of the deployment's that the observation shows, read
    from the directory it runs in (the sweep's), where this release writes maps or else
    where an earlier one did; or, for a sweep renamed since (``moved``: its old folder ->
    its new one, ``plan/moves.moved_folders``), from the folder it was moved to. An array
    whose map cannot be read is left out: ``identity.split_arrays`` then says the
    observation is not complete."""
    maps: dict[str, ArrayMap] = {}
    for job in observation.jobs:
        if not job.tag.owned_by(project, deployment) or not is_array(job):
            continue
        workdir = next((row.workdir for row in job.rows if row.workdir), None)
        if workdir is None:
            continue
        found = _read_map(workdir, job.tag.spec_hash)
        if found is None and os.path.normpath(workdir) in moved:
            found = _read_map(moved[os.path.normpath(workdir)], job.tag.spec_hash)
        if found is not None:
            maps[job.job_id] = found
    return maps


def _read_map(sweep_dir: str, digest: str) -> ArrayMap | None:
    """The first map file found, newest release's place first; None: none, or damaged."""
    for folder in READ_FROM:
        try:
            text = map_file(sweep_dir, digest, folder).read_text()
        except OSError:
            continue
        try:
            return ArrayMap.from_json(text)
        except (ValueError, KeyError, TypeError):
            return None
    return None
