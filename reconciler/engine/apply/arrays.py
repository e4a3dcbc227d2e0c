"""A sweep's members as Slurm job arrays: which index is which member, kept where it is found.

The plan says which job array each member it submits goes in (``plan/arrays.place``:
one per set of jobs they wait for, several when the scheduler's MaxArraySize requires).
Each task runs its member's own batch script:
before sbatch, apply writes, under the sweep's directory,

    .recon/arrays/<hash>.json       index -> member name and spec hash (the array's map)
    .recon/arrays/<hash>/<index>.sh   the member's own batch script
    .recon/arrays/<hash>/<index>.logs the folder its output goes to (the member's logs)

and submits one small script that runs ``<index>.sh`` for ``$SLURM_ARRAY_TASK_ID``
(``scheduler/render.array_batch_script``). The array's tag is the sweep's name with
``<hash>`` as its hash, the digest of the map: so whatever the journal knows, a pass that
sees the array reads its map back (the job's working directory is the sweep's directory)
and splits its tasks into one job per member, each under its member's own tag
(``identity.split_arrays``). A crash between sbatch and the journal leaves an array that
is adopted member by member, never submitted again.
"""

from __future__ import annotations

from pathlib import Path

from reconciler.engine.plan.arrays import MAPS, ArrayMap, is_array
from reconciler.scheduler.base import Observation


def map_file(sweep_dir: Path | str, digest: str) -> Path:
    return Path(sweep_dir, MAPS, f"{digest}.json")


def task_script(sweep_dir: Path | str, digest: str, index: int) -> Path:
    return Path(sweep_dir, MAPS, digest, f"{index}.sh")


def task_logs(sweep_dir: Path | str, digest: str, index: int) -> Path:
    """The file naming the folder a task's output goes to: its member's logs."""
    return Path(sweep_dir, MAPS, digest, f"{index}.logs")


def read_maps(observation: Observation, project: str, deployment: str) -> dict[str, ArrayMap]:
    """The map of every job array of the deployment's that the observation shows, read
    from the directory it runs in (the sweep's). An array whose map cannot be read is
    left out: ``identity.split_arrays`` then says the observation is not complete."""
    maps: dict[str, ArrayMap] = {}
    for job in observation.jobs:
        if not job.tag.owned_by(project, deployment) or not is_array(job):
            continue
        workdir = next((row.workdir for row in job.rows if row.workdir), None)
        if workdir is None:
            continue
        try:
            maps[job.job_id] = ArrayMap.from_json(map_file(workdir, job.tag.spec_hash).read_text())
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return maps
