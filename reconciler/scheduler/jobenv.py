"""The environment a job is submitted with: a clean base, plus what its spec declares.

sbatch hands a job the environment of the process that ran it (``--export=ALL``), so left
alone a job's PATH, PYTHONPATH, modules and Python would be those of whoever applied: a
conda shell, cron, a service. Instead recon runs sbatch (and the local backend starts a
job) with only:

- ``PATH=/usr/local/bin:/usr/bin:/bin``, ``LANG=C.UTF-8``: the same for every applier;
- ``HOME``, ``USER``, ``LOGNAME``: the account's, from the password database, not from
  the applier's shell (the job runs as that account whoever applies);
- each variable the run's ``environment.pass`` names, with the applier's value: these
  alone depend on who applies, by declaration (an API token). Their values are never
  written to disk by recon (``passed``).

Modules, a venv or a conda environment are then made by the batch script itself
(``render.environment_lines``). A run declaring ``environment: {inherit: true}`` gets no
such environment (None): it takes the applier's, as sbatch does by default.

Why not ``sbatch --export=NONE`` (or ``NIL``, or a list of names): on Slurm 22.05 each
of them sets ``SLURM_GET_USER_ENV=1``, so slurmd loads the account's login environment on
the node (its dotfiles' PATH, pyenv, conda init...), and puts ``SLURM_EXPORT_ENV`` in the
job, which every ``srun`` inside then obeys, dropping the modules the script loaded from
its steps. Running sbatch in the environment the job is to have, with its default
``--export=ALL``, gives the job exactly that (plus Slurm's own ``SLURM_*``, ``HOSTNAME``,
``TMPDIR``, ``ENVIRONMENT=BATCH``).
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Mapping

from reconciler.desired.models import Environment

BASE_PATH = "/usr/local/bin:/usr/bin:/bin"
BASE_LANG = "C.UTF-8"
# What sbatch itself needs to find the cluster; it is in the job too, as Slurm's own.
SLURM_PASSED = ("SLURM_CONF",)


def base_environment(environ: Mapping[str, str]) -> dict[str, str]:
    """What every job starts from, whoever applies. The account's home and name come
    from the password database; only where it has no entry for this uid (a container)
    from ``environ``."""
    try:
        account = pwd.getpwuid(os.getuid())
        home, user = account.pw_dir, account.pw_name
    except KeyError:
        home, user = environ.get("HOME", "/"), environ.get("USER", str(os.getuid()))
    return {"HOME": home, "LANG": BASE_LANG, "LOGNAME": user, "PATH": BASE_PATH, "USER": user}


def submission_environment(
    environment: Environment | None, environ: Mapping[str, str]
) -> tuple[dict[str, str], tuple[str, ...]] | None:
    """The job's starting environment and the names in it passed from ``environ`` (their
    values never go to disk); None when the run inherits the applier's environment. A
    passed name ``environ`` does not hold is left out: the job sees it unset."""
    if environment is not None and environment.inherit:
        return None
    names = environment.pass_ if environment is not None else ()
    passed = {name: environ[name] for name in names if name in environ}
    return {**base_environment(environ), **passed}, tuple(sorted(passed))
