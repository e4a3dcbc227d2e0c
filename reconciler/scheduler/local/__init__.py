"""The embedded local backend: recon on any machine, Slurm or not.

``LocalScheduler(state_dir, cpus=None)`` implements the Scheduler protocol by running each
submitted batch script as a local process, speaking Slurm's vocabulary (job ids, states,
reasons, exit codes, ``afterok`` dependencies) so the planner cannot tell the difference.

How a job goes, and who does what (no daemon):

- ``submit`` reads the script's ``#SBATCH`` header (``directives``), takes the next job id
  and writes the job's directory under the store's lock (``store``), then runs a dispatch
  pass (``dispatch``): jobs whose dependencies are met start, oldest first, while their
  CPUs and GPUs fit; the others wait PENDING with Slurm's reasons (``decide``).
- Starting a job hands it GPUs no running job holds and cores to run on (``decide.Grant``,
  kept in its started.json); the GPUs are those ``RECON_LOCAL_GPUS`` declares or
  ``nvidia-smi -L`` lists (``gpus``), none otherwise.
- Starting a job spawns its supervisor detached (``processes``), its own session, so it
  and the job outlive recon. The supervisor (``supervisor``) runs the script in its own
  process group, writes the exit code and end time, then runs a dispatch pass itself: so
  dependents and waiting jobs start when a job ends, with no recon running at all.
- ``cancel`` marks the job and SIGTERMs its process group; ``observe`` reads the job
  directories without a lock and derives each job's state from which facts exist.

A job array runs as one local job per task, with consecutive ids (the first is the
array's id), each with ``SLURM_ARRAY_JOB_ID`` and ``SLURM_ARRAY_TASK_ID`` set and its
own log files (``%A_%a``); ``max_parallel`` holds the rest back (``JobArrayTaskLimit``),
and the array is observed as Slurm shows one (``records.observed_array``).

Heterogeneous scripts (``#SBATCH hetjob``) run as one local job holding every
component's CPUs; an ``srun`` shim first on the job's PATH runs ``srun --het-group=N cmd``
as plain ``cmd``, and every ``SLURM_JOB_NODELIST_HET_GROUP_<n>`` names this host.
Partitions and other options are not enforced. GPUs are: a job asking for them gets its
own in ``CUDA_VISIBLE_DEVICES``, and waits while they are held (``PartitionConfig`` for
ever where the machine has too few: the plan refuses such a run first). Its CPUs pin it to
as many cores (``sched_setaffinity``). ``--time`` is: a job past it is
ended and reads TIMEOUT, warned first by its ``--signal`` if it has one. ``--mem`` is: a
job whose processes hold more (``memory``) is killed and reads OUT_OF_MEMORY. An
allocation is a job that holds its CPUs, running nothing, until released or out of time;
no step can run inside it.

Jobs outlive recon, its terminal and its process group, but not the machine (they then
read NODE_FAIL, reason ``SupervisorLost``), nor a login manager that ends every process
of a session at logout (systemd-logind's ``KillUserProcesses=yes``).
"""

from __future__ import annotations

# Lazy, so a supervisor importing this package's stdlib-only modules does not pay for
# pydantic (the records) or even `typing` at every job start; mypy reads the import.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from reconciler.scheduler.local.scheduler import LocalScheduler

__all__ = ["LocalScheduler"]


def __getattr__(name: str) -> type[LocalScheduler]:
    if name == "LocalScheduler":
        from reconciler.scheduler.local.scheduler import LocalScheduler

        return LocalScheduler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
