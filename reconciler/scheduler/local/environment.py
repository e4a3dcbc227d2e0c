"""The environment a local job runs in, and the ``srun`` it finds on its PATH. Pure.

A job gets the environment its request declares (``scheduler/jobenv``: a clean base and
the variables the run passes by name), whole; a run that inherits the submitter's
(``environment: {inherit: true}``) gets all of the submitter's environment, as sbatch's
default ``--export=ALL`` hands it over, less the ``SLURM_*`` and ``SLURMD_*`` variables
of a Slurm job the submitter may itself run in (the local job gets its own). Its values
are taken as they are when the job starts, as a run's passed variables are
(``inherited_names``): the local backend has to keep a job's environment on disk until
it starts, and tokens and keys in a shell's environment do not belong in a file. Both get
the ``SLURM_*`` variables batch scripts commonly read. Every het component runs on this
host, so each ``SLURM_JOB_NODELIST_HET_GROUP_<n>`` names it.

A job asking for GPUs gets the devices its dispatch handed it in ``CUDA_VISIBLE_DEVICES``
(and ``GPU_DEVICE_ORDINAL``, ``SLURM_JOB_GPUS``, as Slurm sets them): ``gpu_environment``,
applied when it starts, since the devices are chosen then. A job asking for none is left
whatever its environment shows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from reconciler.scheduler.local.directives import Component

# The variables of a Slurm job the submitter runs in: not the local job's, which gets its own.
OUTER_JOB_PREFIXES = ("SLURM_", "SLURMD_")

# `srun [options] command...` inside a local job: the job already holds its CPUs, so the
# command runs once, here. Options are skipped: `--opt=value` and flags whole, and the
# word after `--opt` or `-x` unless the option is one of srun's plain flags.
SRUN_SHIM = """\
#!/bin/sh
# recon's local backend: srun inside a local job runs its command once, on this host.
while [ $# -gt 0 ]; do
  case "$1" in
    --) shift; break ;;
    --*=*) shift ;;
    --exclusive|--overlap|--overcommit|--label|--unbuffered|--pty|--verbose|--quiet|\\
    --kill-on-bad-exit|--disable-status|--no-allocate|--preserve-env|--oversubscribe|\\
    --exact|--whole|--spread-job|--test-only|-l|-u|-v|-Q|-K|-X|-Z|-E|-O|-s)
      shift ;;
    --*|-?) if [ $# -ge 2 ]; then shift 2; else shift; fi ;;
    -*) shift ;;
    *) break ;;
  esac
done
if [ $# -eq 0 ]; then
  echo "srun (recon local backend): no command to run" >&2
  exit 1
fi
exec "$@"
"""


def job_environment(
    submitter: Mapping[str, str],
    *,
    whole: bool = False,
    job_id: str,
    job_name: str,
    components: Sequence[Component],
    host: str,
    bin_dir: str,
    submit_dir: str,
) -> dict[str, str]:
    env = {
        key: value
        for key, value in submitter.items()
        if whole or not key.startswith(OUTER_JOB_PREFIXES)
    }
    path = env.get("PATH", "/usr/local/bin:/usr/bin:/bin")
    cpus = sum(component.cpus for component in components)
    env.update(
        {
            "PATH": f"{bin_dir}:{path}",
            "SLURM_JOB_ID": job_id,
            "SLURM_JOBID": job_id,
            "SLURM_JOB_NAME": job_name,
            "SLURM_JOB_NODELIST": host,
            "SLURM_NODELIST": host,
            "SLURMD_NODENAME": host,
            "SLURM_JOB_NUM_NODES": "1",
            "SLURM_NNODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_PROCID": "0",
            "SLURM_LOCALID": "0",
            "SLURM_CPUS_ON_NODE": str(cpus),
            "SLURM_JOB_CPUS_PER_NODE": str(cpus),
            "SLURM_SUBMIT_DIR": submit_dir,
            "SLURM_SUBMIT_HOST": host,
            "SLURM_CLUSTER_NAME": "local",
            "SLURM_JOB_PARTITION": "local",
        }
    )
    if len(components) == 1:
        (only,) = components
        env["SLURM_NTASKS"] = str(only.tasks)
        env["SLURM_CPUS_PER_TASK"] = str(only.cpus_per_task)
        return env
    env["SLURM_HET_SIZE"] = str(len(components))
    for index, component in enumerate(components):
        env[f"SLURM_JOB_ID_HET_GROUP_{index}"] = job_id
        env[f"SLURM_JOB_NODELIST_HET_GROUP_{index}"] = host
        env[f"SLURM_NTASKS_HET_GROUP_{index}"] = str(component.tasks)
        env[f"SLURM_CPUS_PER_TASK_HET_GROUP_{index}"] = str(component.cpus_per_task)
    return env


def inherited_names(submitter: Mapping[str, str], env: Mapping[str, str]) -> tuple[str, ...]:
    """The variables of an inheriting job's environment ``env`` that are the submitter's
    own, unchanged: passed by name, so their values are never written to disk."""
    return tuple(
        sorted(
            key
            for key, value in env.items()
            if submitter.get(key) == value and not key.startswith(OUTER_JOB_PREFIXES)
        )
    )


def gpu_environment(devices: Sequence[str]) -> dict[str, str]:
    """What tells a job's programs which GPUs are its own."""
    listed = ",".join(devices)
    return {
        "CUDA_VISIBLE_DEVICES": listed,
        "GPU_DEVICE_ORDINAL": listed,
        "SLURM_JOB_GPUS": listed,
        "SLURM_GPUS_ON_NODE": str(len(devices)),
    }


def array_environment(array_id: str, index: int, indices: Sequence[int]) -> dict[str, str]:
    """What an array task learns of its array, as Slurm 22.05 sets it: its index, the
    array's id, how many tasks and the lowest and highest index; the step between indices
    when they are evenly spaced, else 1."""
    gaps = {later - earlier for earlier, later in pairwise(indices)}
    return {
        "SLURM_ARRAY_JOB_ID": array_id,
        "SLURM_ARRAY_TASK_ID": str(index),
        "SLURM_ARRAY_TASK_COUNT": str(len(indices)),
        "SLURM_ARRAY_TASK_MIN": str(min(indices)),
        "SLURM_ARRAY_TASK_MAX": str(max(indices)),
        "SLURM_ARRAY_TASK_STEP": str(gaps.pop() if len(gaps) == 1 else 1),
    }
