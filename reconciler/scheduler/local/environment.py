"""The environment a local job runs in, and the ``srun`` it finds on its PATH. Pure.

Like sbatch's default ``--export=ALL``, a job gets the submitter's environment as it was
at submit time (it may start long after, from another process), minus what an enclosing
Slurm job set, plus the ``SLURM_*`` variables batch scripts commonly read. Every het
component runs on this host, so each ``SLURM_JOB_NODELIST_HET_GROUP_<n>`` names it.

No GPU is handed out: ``CUDA_VISIBLE_DEVICES`` is not set (a job sees whatever the
submitter's environment shows), and a job asking for GPUs runs all the same.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.scheduler.local.directives import Component

# Variables an enclosing Slurm job or the submitter's shell set that would mislead the job.
_DROPPED_PREFIXES = ("SLURM_", "SBATCH_", "SALLOC_", "SRUN_")
_DROPPED = {"PWD", "OLDPWD"}

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
        if not key.startswith(_DROPPED_PREFIXES) and key not in _DROPPED
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
