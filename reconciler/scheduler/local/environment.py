"""The environment a local job runs in, and the ``srun`` it finds on its PATH. Pure.

A job gets the environment its request declares (``scheduler/jobenv``: a clean base and
the variables the run passes by name), whole; a run that inherits the submitter's gets
the variables of the submitter's environment that programs need to find their tools and
speak the user's language (``PASSED``, ``PASSED_PREFIXES``), as they were at submit time
(it may start long after, from another process). Both get the ``SLURM_*`` variables
batch scripts commonly read. Not the whole environment, as sbatch's default
``--export=ALL`` hands over: the local backend has to keep it on disk until the job
starts, and tokens and keys in a shell's environment do not belong in a file. A run
passes anything else through its own ``env:``. Every het component runs on this host, so
each ``SLURM_JOB_NODELIST_HET_GROUP_<n>`` names it.

No GPU is handed out: ``CUDA_VISIBLE_DEVICES`` is not set (a job sees whatever the
submitter's environment shows), and a job asking for GPUs runs all the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import pairwise

from reconciler.scheduler.local.directives import Component

# What a job takes from the submitter's environment: where tools, libraries and
# environments are (modules, conda, venv, pyenv), who and where it is, its language.
PASSED = frozenset(
    {
        "PATH", "HOME", "USER", "LOGNAME", "SHELL", "LANG", "LANGUAGE", "TZ", "TMPDIR",
        "TERM", "PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "LD_LIBRARY_PATH",
        "LIBRARY_PATH", "CPATH", "PKG_CONFIG_PATH", "MANPATH", "MODULEPATH", "MODULESHOME",
        "LOADEDMODULES", "CUDA_HOME", "CUDA_VISIBLE_DEVICES", "OMP_NUM_THREADS",
        "XDG_CACHE_HOME", "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_RUNTIME_DIR",
    }
)  # fmt: skip
PASSED_PREFIXES = ("LC_", "CONDA_", "PYENV_", "RECON_")

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
        if whole or key in PASSED or key.startswith(PASSED_PREFIXES)
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
