"""The local backend's reading of #SBATCH headers, on literal scripts, as sbatch reads them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reconciler.scheduler.local.directives import (
    Component,
    DirectiveError,
    expand_pattern,
    parse_directives,
    parse_time_limit,
)
from reconciler.scheduler.local.environment import array_environment

# What render_batch_script writes for a run with two het components (trimmed).
RENDERED_HET = """\
#!/bin/bash
#SBATCH --job-name=cartpole.actor-learner
#SBATCH --comment=recon2:cartpole:0123456789ab:run:actor-learner:0123456789abcdef
#SBATCH --output="/runs/my dir/logs/slurm-%j.out"
#SBATCH --error=/runs/logs/slurm-%j.err
#SBATCH --ignore-pbs
#SBATCH --time=00:15:00
#SBATCH --partition=cpu
#SBATCH --cpus-per-task=2
#SBATCH --mem=1024M
#SBATCH hetjob
#SBATCH --partition=gpu
#SBATCH --cpus-per-task=3
#SBATCH --gres=gpu:a100:2
set -euo pipefail
#SBATCH --cpus-per-task=64
srun --het-group=1 python3 learner.py
"""


def test_a_rendered_het_script_is_two_components_and_one_job() -> None:
    directives = parse_directives(RENDERED_HET)
    assert directives.components == (Component(2, 1), Component(3, 1))
    assert directives.cpus == 5
    assert directives.output == "/runs/my dir/logs/slurm-%j.out"
    assert directives.error == "/runs/logs/slurm-%j.err"
    assert directives.time_limit == timedelta(minutes=15)
    assert directives.job_name == "cartpole.actor-learner"


def test_directives_stop_at_the_first_command() -> None:
    script = "#!/bin/sh\n\n# a comment\n#SBATCH -c 2\necho hi\n#SBATCH -c 8\n"
    assert parse_directives(script).components == (Component(2, 1),)


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("#SBATCH -c4", Component(4, 1)),
        ("#SBATCH -c 4 -n 2", Component(4, 2)),
        ("#SBATCH --cpus-per-task 3", Component(3, 1)),
        ("#SBATCH --nodes=2 --cpus-per-task=2", Component(2, 2)),
        ("#SBATCH --nodes=2-4", Component(1, 2)),
        ("#SBATCH --ntasks=3 --nodes=2", Component(1, 3)),
        ("#SBATCH -p gpu -c 2  # the partition means nothing locally", Component(2, 1)),
        ("#SBATCH --partition cpu --cpus-per-task=5", Component(5, 1)),
        ("#SBATCH --exclusive -c 6", Component(6, 1)),
        ("#SBATCH    -c 7", Component(7, 1)),
        ("#SBATCH# -c 7 (not a directive: no space after #SBATCH)", Component(1, 1)),
        (" #SBATCH -c 7 (not a directive: not at the start of the line)", Component(1, 1)),
        ("##SBATCH -c 7", Component(1, 1)),
    ],
)
def test_cpu_options_in_every_form_sbatch_takes(line: str, expected: Component) -> None:
    assert parse_directives(f"#!/bin/bash\n{line}\ntrue\n").components == (expected,)


def test_no_header_is_one_task_of_one_cpu_and_sbatchs_defaults() -> None:
    directives = parse_directives("#!/bin/bash\necho hi\n")
    assert (directives.cpus, directives.output, directives.error, directives.time_limit) == (
        1,
        None,
        None,
        None,
    )


def test_quoted_values_and_short_log_options() -> None:
    script = "#!/bin/bash\n#SBATCH -o 'a b/%j.out' -e \"c # d/%j.err\"\ntrue\n"
    directives = parse_directives(script)
    assert (directives.output, directives.error) == ("a b/%j.out", "c # d/%j.err")


@pytest.mark.parametrize(
    "line",
    ["#SBATCH --cpus-per-task=0", "#SBATCH -c many", "#SBATCH --output", "#SBATCH -o 'open"],
)
def test_values_sbatch_would_refuse_are_errors(line: str) -> None:
    with pytest.raises(DirectiveError):
        parse_directives(f"#!/bin/bash\n{line}\ntrue\n")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("90", 90 * 60),
        ("1:30", 90),
        ("01:02:03", 3723),
        ("2-0", 2 * 86400),
        ("1-02:30", 86400 + 2 * 3600 + 30 * 60),
        ("1-00:00:05", 86405),
        ("00:15:00", 900),
    ],
)
def test_slurm_time_forms(text: str, seconds: int) -> None:
    assert parse_time_limit(text) == timedelta(seconds=seconds)


@pytest.mark.parametrize("text", ["UNLIMITED", "infinite", "-1"])
def test_unlimited_time(text: str) -> None:
    assert parse_time_limit(text) is None


@pytest.mark.parametrize("text", ["1h", "0", "1:2:3:4", ""])
def test_times_slurm_refuses(text: str) -> None:
    with pytest.raises(DirectiveError):
        parse_time_limit(text)


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        ("logs/slurm-%j.out", "logs/slurm-42.out"),
        ("%x-%u-%N.%j", "demo.train-alice-node1.42"),
        ("run%%dir/%j", "run%dir/42"),
        ("%5j.out", "00042.out"),
        ("%A_%a", "42_4294967294"),
        ("%q stays", "%q stays"),
        ("no\\%j here", "no%j here"),
    ],
)
def test_filename_patterns_as_slurm_fills_them(pattern: str, expected: str) -> None:
    filled = expand_pattern(
        pattern, job_id="42", job_name="demo.train", user="alice", host="node1.example"
    )
    assert filled == expected


def test_an_array_task_fills_its_array_id_and_index() -> None:
    filled = expand_pattern(
        "logs/slurm-%A_%a.out %j %3a",
        job_id="44",
        job_name="demo.train",
        user="alice",
        host="node1",
        array=("42", 5),
    )
    assert filled == "logs/slurm-42_5.out 44 005"


@pytest.mark.parametrize(
    ("indices", "step"), [((0, 2, 5), "1"), ((0, 3, 6, 9), "3"), ((7,), "1"), ((4, 5), "1")]
)
def test_an_array_task_learns_its_array_as_slurm_tells_it(
    indices: tuple[int, ...], step: str
) -> None:
    env = array_environment("42", indices[-1], indices)
    assert env == {
        "SLURM_ARRAY_JOB_ID": "42",
        "SLURM_ARRAY_TASK_ID": str(indices[-1]),
        "SLURM_ARRAY_TASK_COUNT": str(len(indices)),
        "SLURM_ARRAY_TASK_MIN": str(indices[0]),
        "SLURM_ARRAY_TASK_MAX": str(indices[-1]),
        "SLURM_ARRAY_TASK_STEP": step,
    }
