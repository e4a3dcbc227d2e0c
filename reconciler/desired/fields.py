"""Constrained strings shared by the spec models: names, env keys, sbatch_extra flags.

Everything here ends up in a `#SBATCH` line, a job name or a shell script, so the
character sets are allow-lists: a value that could start a new directive or a new
command is refused at validation, with the reason.
"""

from __future__ import annotations

import re
from typing import Annotated

from pydantic import AfterValidator, Field

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_-]{0,62}$"
_NAME = re.compile(NAME_PATTERN)


def _check_name(value: str) -> str:
    if not _NAME.match(value):
        raise ValueError(
            f"{value!r} is not a valid name: use letters, digits, '-' and '_' "
            "(starting with a letter or digit, at most 63 characters)"
        )
    return value


Name = Annotated[
    str,
    AfterValidator(_check_name),
    Field(json_schema_extra={"pattern": NAME_PATTERN}),
]

ENV_KEY_PATTERN = r"^[A-Za-z_][A-Za-z0-9_]*$"
_ENV_KEY = re.compile(ENV_KEY_PATTERN)


def _check_env_key(value: str) -> str:
    if not _ENV_KEY.match(value):
        raise ValueError(f"{value!r} is not a valid environment variable name")
    if value.startswith(("SLURM_", "RECON_")):
        raise ValueError(f"{value!r}: SLURM_* and RECON_* variables are set by Slurm and recon")
    return value


EnvKey = Annotated[
    str, AfterValidator(_check_env_key), Field(json_schema_extra={"pattern": ENV_KEY_PATTERN})
]


def env_suffix(name: str) -> str:
    """A Name as the end of an environment variable name: `raw-data` -> `RAW_DATA`."""
    return name.upper().replace("-", "_")


# A module as `module load` takes it: `gcc/12.2`, `cuda/12.1`, `python/3.11-foss-2023a`.
MODULE_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.+/@:-]*$"
_MODULE = re.compile(MODULE_PATTERN)


def _check_module(value: str) -> str:
    if not _MODULE.match(value):
        raise ValueError(
            f"{value!r} is not a module name as `module load` takes it: letters, digits "
            "and _ . + / @ : - (no spaces or shell characters); one module an entry"
        )
    return value


ModuleName = Annotated[
    str, AfterValidator(_check_module), Field(json_schema_extra={"pattern": MODULE_PATTERN})
]


def _check_no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain a NUL character")
    return value


SafeText = Annotated[str, AfterValidator(_check_no_nul)]

# Options recon sets itself: letting sbatch_extra set them would break identity (name,
# comment), dependency chaining, log placement or the hetjob layout, or would silently
# fight the typed resource fields. Three more break submission or observation: with
# `--test-only` sbatch exits 0 and submits nothing; a job sent elsewhere with `--clusters`
# or run as another user with `--uid` is invisible to recon's squeue and sacct, so every
# pass would submit it again.
MANAGED_SBATCH_OPTIONS = frozenset(
    {
        "job-name", "comment", "dependency", "kill-on-invalid-dep", "output", "error",
        "chdir", "parsable", "wrap", "hetjob", "het-group", "array", "export", "input",
        "partition", "account", "qos", "time", "nodes", "cpus-per-task", "ntasks", "mem",
        "mem-per-cpu", "mem-per-gpu", "gres", "gpus", "gpus-per-node", "gpus-per-task",
        "gpus-per-socket", "cpus-per-gpu", "tres-per-task", "constraint", "wait",
        "test-only", "clusters", "uid",
    }
)  # fmt: skip
_EXTRA_FLAG = re.compile(r"^--([a-z][a-z0-9-]*)(?:=([A-Za-z0-9_.,:@%+/=-]+))?$")


def _check_sbatch_extra(value: str) -> str:
    if value.lstrip().startswith("#"):
        raise ValueError(f"{value!r}: an sbatch_extra flag must not start with '#'")
    if "\n" in value or "\r" in value:
        raise ValueError(f"{value!r}: an sbatch_extra flag must not hold a line break")
    match = _EXTRA_FLAG.match(value)
    if match is None:
        raise ValueError(
            f"{value!r} is not a bare sbatch flag: write one long option like --exclusive "
            "or --mail-type=END (letters, digits and _.,:@%+/=- in the value; no spaces, "
            "quotes or shell characters)"
        )
    option = match.group(1)
    # sbatch parses with getopt_long, which takes any unambiguous prefix of a long option:
    # `--part=gpu` is `--partition=gpu`. So a prefix of a managed option is refused too.
    managed = sorted(m for m in MANAGED_SBATCH_OPTIONS if m.startswith(option))
    if managed:
        what = f"--{option}" if option in managed else f"--{option} (short for --{managed[0]})"
        hint = _INSTEAD.get(managed[0], "use the matching resources field or leave it to recon")
        raise ValueError(f"{what} is set by recon itself; {hint}")
    return value


# Where a refused flag's wish is written instead, when it is not a resources field.
_INSTEAD = {
    "array": "a run with a `matrix:` is a sweep, submitted as one job array: write the values "
    "there (docs/specs.md, sweeps)",
    "hetjob": "write each component under resources.components",
    "het-group": "write each component under resources.components",
    "export": "declare the job's environment with `environment:`",
    "dependency": "recon chains a run after the runs its `inputs:` read",
    "gres": "write resources.gpus, resources.shards or resources.gres (e.g. {localtmp: 100G})",
    "gpus": "write resources.gpus (GPUs per node)",
    "gpus-per-node": "write resources.gpus_per_node",
    "gpus-per-task": "write resources.gpus_per_task (a run inside an allocation)",
    "tres-per-task": "write resources.gpus_per_task for GPUs per task",
}


SbatchFlag = Annotated[str, AfterValidator(_check_sbatch_extra)]
