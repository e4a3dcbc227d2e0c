"""A sweep's members as Slurm job arrays: which index is which member, kept where it is found.

Members that one pass submits for one sweep go to the scheduler as one job array (several
when the scheduler's MaxArraySize requires). Each task runs its member's own batch script:
before sbatch, apply writes, under the sweep's directory (``scheduler/runfolder.py``),

    .recon-run/arrays/<hash>.json         index -> member name and spec hash (the array's map)
    .recon-run/arrays/<hash>/<index>.sh   the member's own batch script
    .recon-run/arrays/<hash>/<index>.logs the folder its output goes to (the member's logs)

and submits one small script that runs ``<index>.sh`` for ``$SLURM_ARRAY_TASK_ID``. The
array's tag is the sweep's name with ``<hash>`` as its hash, the digest of the map: so
whatever the journal knows, a pass that sees the array reads its map back (the job's
working directory is the sweep's directory) and splits its tasks into one job per member,
each under its member's own tag (``identity.split_arrays``). A crash between sbatch and
the journal leaves an array that is adopted member by member, never submitted again; so
does an array an earlier release submitted, whose map is in ``.recon/arrays/``.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Sequence
from pathlib import Path

from reconciler.engine.plan.arrays import ArrayMap, is_array
from reconciler.scheduler.base import Observation
from reconciler.scheduler.runfolder import READ_FROM, log_paths, tasks_dir
from reconciler.scheduler.runfolder import map_file as map_file
from reconciler.scheduler.runfolder import task_logs as task_logs
from reconciler.scheduler.runfolder import task_script as task_script
from reconciler.scheduler.tag import Tag


def array_script(directives: Sequence[str], sweep_dir: Path, digest: str) -> str:
    """The script the array is submitted with: a member's job-wide and shape directives
    (every member of a sweep asks for the same), the array's own name, tag and logs, and
    a body that runs the task's member: its own batch script, byte for byte (its #SBATCH
    lines are only comments there; the manifest's script_sha256 names those bytes), its
    output sent to the member's logs under the task's id, where ``render.log_files``
    finds them."""
    task = shlex.quote(os.fspath(tasks_dir(sweep_dir, digest))) + '/"$SLURM_ARRAY_TASK_ID"'
    name = '"$logs/slurm-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}'
    return "\n".join(
        [
            "#!/bin/bash",
            *directives,
            "set -euo pipefail",
            f'logs="$(cat {task}.logs)"',
            f'exec bash {task}.sh >>{name}.out" 2>>{name}.err"',
            "",
        ]
    )


def array_directives(member_script: str, tag: Tag, sweep_dir: Path) -> list[str]:
    """A member's #SBATCH lines with the name, comment and logs made the array's."""
    out, err = log_paths(sweep_dir, array=True)
    own = {
        "--job-name": f"--job-name={tag.job_name}",
        "--comment": f"--comment={tag.format()}",
        "--output": f"--output={out}",
        "--error": f"--error={err}",
    }
    lines = []
    for line in member_script.splitlines()[1:]:
        if not line.startswith("#SBATCH "):
            break
        option = line.removeprefix("#SBATCH ").split("=", 1)[0]
        lines.append(f"#SBATCH {own[option]}" if option in own else line)
    return lines


def read_maps(observation: Observation, project: str, deployment: str) -> dict[str, ArrayMap]:
    """The map of every job array of the deployment's that the observation shows, read
    from the directory it runs in (the sweep's), where this release writes maps or else
    where an earlier one did. An array whose map cannot be read is left out:
    ``identity.split_arrays`` then says the observation is not complete."""
    maps: dict[str, ArrayMap] = {}
    for job in observation.jobs:
        if not job.tag.owned_by(project, deployment) or not is_array(job):
            continue
        workdir = next((row.workdir for row in job.rows if row.workdir), None)
        if workdir is None:
            continue
        found = _read_map(workdir, job.tag.spec_hash)
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
