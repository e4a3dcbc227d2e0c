"""The local backend's reading of #SBATCH headers, on literal scripts, as sbatch reads them."""

from __future__ import annotations

from datetime import timedelta

import pytest

from reconciler.scheduler.local.directives import (
    Component,
    DirectiveError,
    WarningSignal,
    expand_pattern,
    parse_directives,
    parse_memory,
    parse_signal,
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
    assert directives.components == (Component(2, 1, memory_mb=1024), Component(3, 1, gpus=2))
    assert directives.cpus == 5
    # One component without a limit: the job, run as one, has none.
    assert directives.memory_mb is None
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


@pytest.mark.parametrize(
    ("text", "mebibytes"),
    [("100", 100), ("100M", 100), ("2G", 2048), ("2g", 2048), ("1T", 1 << 20), ("512K", 1),
     ("4096k", 4), ("0", 0), ("1024MB", 1024)],
)  # fmt: skip
def test_memory_sizes_as_sbatch_reads_them(text: str, mebibytes: int) -> None:
    assert parse_memory(text) == mebibytes


@pytest.mark.parametrize("text", ["", "1.5G", "lots", "-1", "2P"])
def test_memory_sizes_sbatch_refuses(text: str) -> None:
    with pytest.raises(DirectiveError, match="not a memory size"):
        parse_memory(text)


@pytest.mark.parametrize(
    ("lines", "components"),
    [
        (["--mem=2G"], (Component(1, 1, 2048),)),
        (["-c 4 --mem-per-cpu=100"], (Component(4, 1, 400),)),
        # The later of the two wins, as sbatch takes the last.
        (["--mem-per-cpu=100 -n 2", "--mem 300M"], (Component(1, 2, 300),)),
        (["--mem=0"], (Component(1, 1),)),  # all the node's memory: no limit here
        (
            ["--mem=1G", "hetjob", "-c 2 --mem-per-cpu=1G"],
            (Component(1, 1, 1024), Component(2, 1, 2048)),
        ),
    ],
)  # fmt: skip
def test_memory_per_component_and_the_jobs_limit(
    lines: list[str], components: tuple[Component, ...]
) -> None:
    header = "".join(f"#SBATCH {line}\n" for line in lines)
    directives = parse_directives(f"#!/bin/bash\n{header}true\n")
    assert directives.components == components
    if all(c.memory_mb is not None for c in components):
        assert directives.memory_mb == sum(c.memory_mb or 0 for c in components)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B:USR1@120", WarningSignal(10, timedelta(seconds=120), batch_only=True)),
        ("USR2", WarningSignal(12, timedelta(seconds=60), batch_only=False)),
        ("SIGTERM@5", WarningSignal(15, timedelta(seconds=5), batch_only=False)),
        ("10@0", WarningSignal(10, timedelta(0), batch_only=False)),
        ("RB:usr1@30", WarningSignal(10, timedelta(seconds=30), batch_only=True)),
        ("R:USR1@30", WarningSignal(10, timedelta(seconds=30), batch_only=False)),
    ],
)
def test_signal_forms_sbatch_takes(text: str, expected: WarningSignal) -> None:
    assert parse_signal(text) == expected


@pytest.mark.parametrize("text", ["B:USR9", "B:", "X:USR1", "USR1@", "USR1@70000", "0", "99"])
def test_signals_sbatch_refuses(text: str) -> None:
    with pytest.raises(DirectiveError, match="--signal"):
        parse_signal(text)


def test_the_warning_signal_is_read_from_the_header() -> None:
    script = "#!/bin/bash\n#SBATCH --time=1 --signal=B:USR1@30\ntrue\n"
    assert parse_directives(script).warning == parse_signal("B:USR1@30")
    assert parse_directives("#!/bin/bash\ntrue\n").warning is None


@pytest.mark.parametrize(
    ("header", "gpus"),
    [
        ("--gres=gpu:a100:2", 2),
        ("--gres=gpu", 1),
        ("--gres=gpu:a100", 1),
        ("--gres=localtmp:100,gpu:3", 3),
        ("--gres=localtmp:100", 0),
        ("-G 2", 2),
        ("--gpus=a100:1", 1),
        ("--nodes=2 --gpus-per-node=2", 4),
        ("--nodes=2 --gres=gpu:2", 4),
        ("--gres=gpu:0", 0),
    ],
)
def test_gpus_are_counted_per_job_whatever_their_type(header: str, gpus: int) -> None:
    directives = parse_directives(f"#!/bin/sh\n#SBATCH {header}\necho\n")
    assert directives.gpus == gpus


def test_an_unreadable_gpu_count_is_refused_as_sbatch_refuses_it() -> None:
    with pytest.raises(DirectiveError, match="--gpus=a100:two"):
        parse_directives("#!/bin/sh\n#SBATCH --gpus=a100:two\n")
