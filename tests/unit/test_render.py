"""The batch-script renderer: pinned scripts, the directive block as sbatch reads it, and
user text (env values, paths, commands, scripts) that must arrive byte-identical and inert.

Scripts are executed with a real bash (no Slurm needed: `#SBATCH` lines are comments to
bash), with a command that prints what arrived, so quoting is checked by the shell itself.
"""

from __future__ import annotations

import math
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from reconciler.desired import templates
from reconciler.desired.desired import DesiredRun, Location, effective_run
from reconciler.desired.models import Defaults, NodeShape, Project, Run
from reconciler.errors import SpecError
from reconciler.scheduler.render import (
    ENVIRONMENT_RECORD,
    RenderContext,
    array_batch_script,
    render_batch_script,
    required_directories,
)
from reconciler.scheduler.runfolder import log_files, log_paths
from reconciler.scheduler.tag import Tag

HASH = "0123456789abcdef"
LOCATION = Location("specs/train.yaml", 3)
RUN_DIR = "/srv/demo/runs/train"
CODE_DIR = "/srv/demo/code"
RECORD = "".join(line + "\n" for line in ENVIRONMENT_RECORD)


def desired(spec: dict[str, Any], script_text: str | None = None, **defaults: Any) -> DesiredRun:
    """A run named `train` in project `demo`, project defaults applied, with a fixed hash."""
    project = Project(project="demo", defaults=Defaults.model_validate(defaults))
    run = Run.model_validate({"kind": "Run", "name": "train", **spec})
    return DesiredRun(
        effective_run(run, project), location=LOCATION, spec_hash=HASH, script_text=script_text
    )


def context(
    run_dir: str | Path = RUN_DIR,
    code_dir: str | Path = CODE_DIR,
    input_paths: dict[str, str] | None = None,
    name: str = "train",
) -> RenderContext:
    tag = Tag(project="demo", deployment="0123456789ab", kind="run", name=name, spec_hash=HASH)
    return RenderContext("demo", code_dir, run_dir, tag, input_paths or {})


def sbatch_directives(script: str) -> list[list[str]]:
    """The arguments sbatch 22.05 takes from a script, one list per het component.

    A port of sbatch's `_opt_batch_script`: lines split at `\\n` only; `#SBATCH` (or the old
    `#SLURM`) at column 0 is a directive; blank and comment lines are skipped; the first
    other line ends the directives. The first line (the shebang) is a comment.
    """
    components: list[list[str]] = [[]]
    for line in script.split("\n"):
        magic = next((m for m in ("#SBATCH", "#SLURM") if line.startswith(m)), None)
        if magic is None:
            if line.strip(" \t\v\f\r") and not line.lstrip(" \t\v\f\r").startswith("#"):
                break
            continue
        arguments = sbatch_arguments(line[len(magic) :])
        if arguments in (["hetjob"], ["packjob"]):
            components.append([])
        else:
            components[-1].extend(arguments)
    return components


def sbatch_arguments(text: str) -> list[str]:
    """A port of sbatch's `get_argument` loop: whitespace splits, quotes group, a backslash
    escapes the next character, an unquoted `#` ends the line, an empty argument ends it."""
    arguments: list[str] = []
    position = 0
    while True:
        while position < len(text) and text[position] in " \t\n\v\f\r":
            position += 1
        argument, quote, escape = "", "", False
        while position < len(text) and (quote or text[position] not in " \t\n\v\f\r"):
            char = text[position]
            position += 1
            if escape:
                escape = False
            elif char == "\\":
                escape = True
                continue
            elif quote:
                if char == quote:
                    quote = ""
                    continue
            elif char in "\"'":
                quote = char
                continue
            elif char == "#":
                break
            argument += char
        assert not quote, f"sbatch would refuse an unmatched {quote} in {text!r}"
        if not argument:
            return arguments
        arguments.append(argument)


def execute(script: str, tmp_path: Path) -> subprocess.CompletedProcess[bytes]:
    """Run the script with bash in a bare environment, as the batch step would."""
    path = tmp_path / "job.sh"
    path.write_text(script)
    check = subprocess.run(["bash", "-n", str(path)], capture_output=True, check=False)
    assert check.returncode == 0, check.stderr
    return subprocess.run(
        ["bash", str(path)],
        cwd=tmp_path,
        env={"PATH": os.environ["PATH"], "LC_ALL": "C"},
        capture_output=True,
        check=False,
        timeout=30,
    )


def printing(tmp_path: Path, spec: dict[str, Any], **kwargs: Any) -> tuple[str, bytes]:
    """Render and run `spec`; the script and what its command printed."""
    # the job writes under its run folder (its environment record): a folder of the test's
    kwargs.setdefault("run_dir", str(tmp_path / "run"))
    script = render_batch_script(desired(spec), context(code_dir=tmp_path, **kwargs))
    result = execute(script, tmp_path)
    assert result.returncode == 0, result.stderr
    return script, result.stdout


# --- Pinned scripts --------------------------------------------------------------------


def test_plain_run_script_pinned() -> None:
    run = desired(
        {
            "command": "python3 train.py --data {inputs.episodes.path} \\\n"
            "  --out {outputs.model.path} --name {run.name} --dir {run.dir}\n",
            "env": {"SEED": "42", "GREETING": "hello world"},
            "inputs": {"episodes": "prepare.dataset"},
            "outputs": {
                "model": "model/policy.json",
                "log": {"path": "/scratch/train.log", "staged": False},
            },
            "resources": {
                "time": "1d",
                "account": "ml",
                "qos": "normal",
                "partition": "gpu",
                "nodes": 1,
                "cpus": "8+",
                "memory": "32GiB",
                "gpus": "A100:4",
                "constraint": "ib&haswell",
                "sbatch_extra": ["--exclusive", "--mail-type=END"],
            },
        }
    )
    inputs = {"episodes": "/srv/demo/runs/prepare/data/episodes.csv"}
    assert render_batch_script(run, context(input_paths=inputs)) == (
        "#!/bin/bash\n"
        "#SBATCH --job-name=demo.train\n"
        "#SBATCH --comment=recon2:demo:0123456789ab:run:train:0123456789abcdef\n"
        "#SBATCH --output=/srv/demo/runs/train/logs/slurm-%j.out\n"
        "#SBATCH --error=/srv/demo/runs/train/logs/slurm-%j.err\n"
        "#SBATCH --ignore-pbs\n"
        "#SBATCH --time=1-00:00:00\n"
        "#SBATCH --account=ml\n"
        "#SBATCH --qos=normal\n"
        "#SBATCH --partition=gpu\n"
        "#SBATCH --nodes=1\n"
        "#SBATCH --cpus-per-task=8\n"
        "#SBATCH --mem=32768M\n"
        "#SBATCH --gres=gpu:a100:4\n"
        "#SBATCH --constraint=ib&haswell\n"
        "#SBATCH --exclusive\n"
        "#SBATCH --mail-type=END\n"
        "set -euo pipefail\n"
        "# recon skip check: the inputs as the last success read them? Then nothing to do.\n"
        "recon_check=/srv/demo/runs/train/inputs/unchanged\n"
        'if [ -f "$recon_check.sha256" ] && sha256sum --check --status "$recon_check.sha256" \\\n'
        '  && { [ ! -f "$recon_check.folders" ] || while IFS= read -r recon_folder; do\n'
        '    find -H "$recon_folder" -mindepth 1 \\( -name .recon -o -name .recon-run \\) '
        "-prune -o -printf '%y %p\\n'\n"
        '  done < "$recon_check.folders" | LC_ALL=C sort | cmp -s - "$recon_check.entries"; }\n'
        "then\n"
        '  recon_job="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID:-}}"\n'
        "  { mkdir -p /srv/demo/runs/train/.recon-run/skipped && "
        ': > /srv/demo/runs/train/.recon-run/skipped/"${recon_job:-${SLURM_JOB_ID:-}}"; } || true\n'
        '  echo "recon: skipped: inputs unchanged (as its last success read them): '
        'not running the command"\n'
        "  exit 0\n"
        "fi\n"
        "export RECON_PROJECT=demo\n"
        "export RECON_RUN=train\n"
        "export RECON_RUN_DIR=/srv/demo/runs/train\n"
        "export RECON_SPEC_HASH=0123456789abcdef\n"
        "export RECON_INPUT_EPISODES=/srv/demo/runs/prepare/data/episodes.csv\n"
        "export RECON_OUTPUT_LOG=/scratch/train.log\n"
        "export RECON_OUTPUT_MODEL=/srv/demo/runs/train/model/.recon-staging/policy.json\n"
        "export GREETING='hello world'\n"
        "export SEED=42\n"
        "# recon staging: the outputs are written beside their published paths, which they\n"
        "# replace only once the command has succeeded and written them all.\n"
        'if [ -n "$(ls -A "$RECON_RUN_DIR/.recon-run/publishing" 2>/dev/null)" ]; then\n'
        "  echo \"recon: an earlier job's outputs are half published: recon apply rolls them back"
        ' on $(hostname)" >&2; exit 1\n'
        "fi\n"
        "rm -rf -- /srv/demo/runs/train/model/.recon-staging/policy.json\n"
        "mkdir -p -- /srv/demo/runs/train/model/.recon-staging\n"
        "cd /srv/demo/code\n"
        f"{RECORD}"
        "(\n"
        "python3 train.py --data /srv/demo/runs/prepare/data/episodes.csv \\\n"
        "  --out /srv/demo/runs/train/model/.recon-staging/policy.json --name train --dir"
        " /srv/demo/runs/train\n"
        ")\n"
        "# recon publishing: the command succeeded; each staged output replaces its published"
        " one.\n"
        'recon_job="${recon_job:-${SLURM_JOB_ID:-job}${SLURM_STEP_ID:+.$SLURM_STEP_ID}}"\n'
        "recon_unwritten=\n"
        "[ -e /srv/demo/runs/train/model/.recon-staging/policy.json ] || recon_unwritten+='"
        " model'\n"
        'if [ -n "$recon_unwritten" ]; then\n'
        '  { mkdir -p "$RECON_RUN_DIR/.recon-run/unwritten" && echo $recon_unwritten'
        ' >"$RECON_RUN_DIR/.recon-run/unwritten/$recon_job"; } || true\n'
        '  echo "recon: the command did not write its declared outputs:$recon_unwritten; nothing'
        ' published; write each where {outputs.NAME.path} points, or set staged: false" >&2\n'
        "  exit 1\n"
        "fi\n"
        "recon_had() {\n"
        '  if [ -e "$1" ] || [ -L "$1" ]; then printf \'1 %s\\0\' "$1"\n'
        "  else printf '0 %s\\0' \"$1\"; fi\n"
        "}\n"
        "recon_publish() {\n"
        '  if [ -e "$1" ] || [ -L "$1" ]; then\n'
        '    if { [ -d "$1" ] && [ ! -L "$1" ]; } || [ -d "$2" ] || ! ln -- "$1" "$3" 2>/dev/null\n'
        '    then mv -T -- "$1" "$3"; fi\n'
        "  fi\n"
        '  mv -T -- "$2" "$1"\n'
        "}\n"
        'recon_publishing="$RECON_RUN_DIR/.recon-run/publishing/$recon_job"\n'
        "rm -rf -- /srv/demo/runs/train/model/.recon-previous/policy.json\n"
        'mkdir -p -- "$RECON_RUN_DIR/.recon-run/publishing" "$RECON_RUN_DIR/.recon-run/published"'
        " /srv/demo/runs/train/model/.recon-previous\n"
        '{ recon_had /srv/demo/runs/train/model/policy.json; } >"$recon_publishing.new"\n'
        'mv -f -- "$recon_publishing.new" "$recon_publishing"\n'
        "recon_publish /srv/demo/runs/train/model/policy.json"
        " /srv/demo/runs/train/model/.recon-staging/policy.json"
        " /srv/demo/runs/train/model/.recon-previous/policy.json\n"
        'mv -f -- "$recon_publishing" "$RECON_RUN_DIR/.recon-run/published/$recon_job"\n'
        "rm -rf -- /srv/demo/runs/train/model/.recon-previous/policy.json\n"
        "rmdir -- /srv/demo/runs/train/model/.recon-previous"
        " /srv/demo/runs/train/model/.recon-staging 2>/dev/null || true\n"
    )


def test_het_run_script_pinned() -> None:
    run = desired(
        {
            "command": "srun --het-group=1 learner --out {outputs.policy.path}",
            "outputs": {"policy": {"path": "policy.json", "staged": False}},
            "resources": {
                "time": "00:15:00",
                "components": [
                    {"partition": "cpu", "cpus": 2, "memory": "1GiB"},
                    {
                        "partition": "gpu",
                        "cpus": 2,
                        "gpus": {"A100": 2},
                        "sbatch_extra": ["--exclusive"],
                    },
                ],
            },
        }
    )
    assert render_batch_script(run, context()) == (
        "#!/bin/bash\n"
        "#SBATCH --job-name=demo.train\n"
        "#SBATCH --comment=recon2:demo:0123456789ab:run:train:0123456789abcdef\n"
        "#SBATCH --output=/srv/demo/runs/train/logs/slurm-%j.out\n"
        "#SBATCH --error=/srv/demo/runs/train/logs/slurm-%j.err\n"
        "#SBATCH --ignore-pbs\n"
        "#SBATCH --time=00:15:00\n"
        "#SBATCH --partition=cpu\n"
        "#SBATCH --cpus-per-task=2\n"
        "#SBATCH --mem=1024M\n"
        "#SBATCH hetjob\n"
        "#SBATCH --partition=gpu\n"
        "#SBATCH --cpus-per-task=2\n"
        "#SBATCH --gres=gpu:a100:2\n"
        "#SBATCH --exclusive\n"
        "set -euo pipefail\n"
        "export RECON_PROJECT=demo\n"
        "export RECON_RUN=train\n"
        "export RECON_RUN_DIR=/srv/demo/runs/train\n"
        "export RECON_SPEC_HASH=0123456789abcdef\n"
        "export RECON_OUTPUT_POLICY=/srv/demo/runs/train/policy.json\n"
        "cd /srv/demo/code\n"
        f"{RECORD}"
        "srun --het-group=1 learner --out /srv/demo/runs/train/policy.json\n"
    )


def test_script_file_run_pinned() -> None:
    text = "#!/usr/bin/env python3\nimport os\nprint(os.environ['RECON_OUTPUT_METRICS'])\n"
    run = desired({"script": "scripts/evaluate.py", "outputs": {"metrics": "m.json"}}, text)
    assert render_batch_script(run, context(code_dir="/srv/demo/my code")) == (
        "#!/bin/bash\n"
        "#SBATCH --job-name=demo.train\n"
        "#SBATCH --comment=recon2:demo:0123456789ab:run:train:0123456789abcdef\n"
        "#SBATCH --output=/srv/demo/runs/train/logs/slurm-%j.out\n"
        "#SBATCH --error=/srv/demo/runs/train/logs/slurm-%j.err\n"
        "#SBATCH --ignore-pbs\n"
        "set -euo pipefail\n"
        "export RECON_PROJECT=demo\n"
        "export RECON_RUN=train\n"
        "export RECON_RUN_DIR=/srv/demo/runs/train\n"
        "export RECON_SPEC_HASH=0123456789abcdef\n"
        "export RECON_OUTPUT_METRICS=/srv/demo/runs/train/.recon-staging/m.json\n"
        "# recon staging: the outputs are written beside their published paths, which they\n"
        "# replace only once the command has succeeded and written them all.\n"
        'if [ -n "$(ls -A "$RECON_RUN_DIR/.recon-run/publishing" 2>/dev/null)" ]; then\n'
        "  echo \"recon: an earlier job's outputs are half published: recon apply rolls them back"
        ' on $(hostname)" >&2; exit 1\n'
        "fi\n"
        "rm -rf -- /srv/demo/runs/train/.recon-staging/m.json\n"
        "mkdir -p -- /srv/demo/runs/train/.recon-staging\n"
        "cd '/srv/demo/my code'\n"
        f"{RECORD}"
        "(\n"
        "/usr/bin/env python3 /dev/fd/3 3<<'RECON_SCRIPT_EOF'\n"
        "#!/usr/bin/env python3\n"
        "import os\n"
        "print(os.environ['RECON_OUTPUT_METRICS'])\n"
        "RECON_SCRIPT_EOF\n"
        ")\n"
        "# recon publishing: the command succeeded; each staged output replaces its published"
        " one.\n"
        'recon_job="${recon_job:-${SLURM_JOB_ID:-job}${SLURM_STEP_ID:+.$SLURM_STEP_ID}}"\n'
        "recon_unwritten=\n"
        "[ -e /srv/demo/runs/train/.recon-staging/m.json ] || recon_unwritten+=' metrics'\n"
        'if [ -n "$recon_unwritten" ]; then\n'
        '  { mkdir -p "$RECON_RUN_DIR/.recon-run/unwritten" && echo $recon_unwritten'
        ' >"$RECON_RUN_DIR/.recon-run/unwritten/$recon_job"; } || true\n'
        '  echo "recon: the command did not write its declared outputs:$recon_unwritten; nothing'
        ' published; write each where {outputs.NAME.path} points, or set staged: false" >&2\n'
        "  exit 1\n"
        "fi\n"
        "recon_had() {\n"
        '  if [ -e "$1" ] || [ -L "$1" ]; then printf \'1 %s\\0\' "$1"\n'
        "  else printf '0 %s\\0' \"$1\"; fi\n"
        "}\n"
        "recon_publish() {\n"
        '  if [ -e "$1" ] || [ -L "$1" ]; then\n'
        '    if { [ -d "$1" ] && [ ! -L "$1" ]; } || [ -d "$2" ] || ! ln -- "$1" "$3" 2>/dev/null\n'
        '    then mv -T -- "$1" "$3"; fi\n'
        "  fi\n"
        '  mv -T -- "$2" "$1"\n'
        "}\n"
        'recon_publishing="$RECON_RUN_DIR/.recon-run/publishing/$recon_job"\n'
        "rm -rf -- /srv/demo/runs/train/.recon-previous/m.json\n"
        'mkdir -p -- "$RECON_RUN_DIR/.recon-run/publishing" "$RECON_RUN_DIR/.recon-run/published"'
        " /srv/demo/runs/train/.recon-previous\n"
        '{ recon_had /srv/demo/runs/train/m.json; } >"$recon_publishing.new"\n'
        'mv -f -- "$recon_publishing.new" "$recon_publishing"\n'
        "recon_publish /srv/demo/runs/train/m.json /srv/demo/runs/train/.recon-staging/m.json"
        " /srv/demo/runs/train/.recon-previous/m.json\n"
        'mv -f -- "$recon_publishing" "$RECON_RUN_DIR/.recon-run/published/$recon_job"\n'
        "rm -rf -- /srv/demo/runs/train/.recon-previous/m.json\n"
        "rmdir -- /srv/demo/runs/train/.recon-previous /srv/demo/runs/train/.recon-staging"
        " 2>/dev/null || true\n"
    )


# --- Directives --------------------------------------------------------------------------

JOB_WIDE_PREFIXES = (
    "--job-name=",
    "--comment=",
    "--output=",
    "--error=",
    "--ignore-pbs",
    "--time=",
    "--account=",
    "--qos=",
)


def test_array_script_pinned() -> None:
    """A sweep's array: a member's directives with the array's name, tag and logs, and a
    body that runs the task's own script into its member's logs."""
    member = render_batch_script(desired({"command": "true"}, partition="cpu"), context())
    tag = Tag(project="demo", deployment="0123456789ab", kind="run", name="seeds",
              spec_hash="00112233aabbccdd")  # fmt: skip
    script = array_batch_script(member, tag, "/srv/demo/runs/seeds", "/srv/demo/tasks")
    task = '/srv/demo/tasks/"$SLURM_ARRAY_TASK_ID"'
    logs = '"$logs/slurm-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}'
    assert script == (
        "#!/bin/bash\n"
        "#SBATCH --job-name=demo.seeds\n"
        "#SBATCH --comment=recon2:demo:0123456789ab:run:seeds:00112233aabbccdd\n"
        "#SBATCH --output=/srv/demo/runs/seeds/logs/slurm-%A_%a.out\n"
        "#SBATCH --error=/srv/demo/runs/seeds/logs/slurm-%A_%a.err\n"
        "#SBATCH --ignore-pbs\n"
        "#SBATCH --partition=cpu\n"
        "set -euo pipefail\n"
        f'logs="$(cat {task}.logs)"\n'
        f'exec bash {task}.sh >>{logs}.out" 2>>{logs}.err"\n'
    )


def test_job_wide_settings_only_in_component_zero() -> None:
    run = desired(
        {
            "command": "true",
            "resources": {
                "time": "2h",
                "account": "ml",
                "qos": "high",
                "components": [{"partition": "cpu"}, {"partition": "gpu"}, {"nodes": 2}],
            },
        }
    )
    first, *others = sbatch_directives(render_batch_script(run, context()))
    assert [o for o in first if o.startswith(JOB_WIDE_PREFIXES)] == [
        "--job-name=demo.train",
        "--comment=recon2:demo:0123456789ab:run:train:0123456789abcdef",
        "--output=/srv/demo/runs/train/logs/slurm-%j.out",
        "--error=/srv/demo/runs/train/logs/slurm-%j.err",
        "--ignore-pbs",
        "--time=02:00:00",
        "--account=ml",
        "--qos=high",
    ]
    assert others == [["--partition=gpu"], ["--nodes=2"]]


def test_plain_run_is_one_component() -> None:
    run = desired({"command": "true", "resources": {"partition": "cpu"}})
    components = sbatch_directives(render_batch_script(run, context()))
    assert len(components) == 1
    assert components[0][-1] == "--partition=cpu"


def test_memory_left_out_renders_no_mem() -> None:
    run = desired({"command": "true", "resources": {"cpus": 2}})
    (options,) = sbatch_directives(render_batch_script(run, context()))
    assert "--cpus-per-task=2" in options
    assert not [o for o in options if o.startswith("--mem")]


def test_project_default_memory_is_rendered() -> None:
    run = desired({"command": "true"}, memory="1GB")
    (options,) = sbatch_directives(render_batch_script(run, context()))
    assert f"--mem={math.ceil(10**9 / 2**20)}M" in options


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({"cpus": "8+"}, "--cpus-per-task=8"),
        ({"memory": "32GB+"}, "--mem=30518M"),  # 32e9 bytes is 30517.58 MiB: rounded up
        ({"memory": "1.5MiB"}, "--mem=2M"),
        ({"gpus": "A100:4"}, "--gres=gpu:a100:4"),
        ({"gpus": {"H100-80GB": 1}}, "--gres=gpu:h100-80gb:1"),
        ({"gpus": 2}, "--gres=gpu:2"),
    ],
)
def test_resource_directive(resources: dict[str, Any], expected: str) -> None:
    run = desired({"command": "true", "resources": resources})
    (options,) = sbatch_directives(render_batch_script(run, context()))
    assert expected in options


@pytest.mark.parametrize(
    "command",
    [
        "#SBATCH --partition=evil\necho hi",
        "echo hi\n#SBATCH --partition=evil",
        "\n\n#SBATCH --partition=evil",
        "#SBATCH hetjob\n#SBATCH --partition=evil",
    ],
)
def test_command_text_never_becomes_a_directive(command: str) -> None:
    baseline = render_batch_script(desired({"command": "true"}), context())
    script = render_batch_script(desired({"command": command}), context())
    assert "\n#SBATCH --partition=evil" in script
    assert sbatch_directives(script) == sbatch_directives(baseline)


def test_pbs_translation_is_turned_off() -> None:
    # sbatch translates #PBS/#BSUB lines anywhere in a script's first hundred lines,
    # commands or not, unless --ignore-pbs is among the directives.
    script = render_batch_script(desired({"command": "echo '\n#PBS -q evil\n'"}), context())
    assert "\n#PBS -q evil\n" in script
    assert "--ignore-pbs" in sbatch_directives(script)[0]


def test_percent_space_quote_and_hash_in_run_dir_reach_slurm_as_written() -> None:
    run_dir = '/data/50% off/"it\'s" #1'
    script = render_batch_script(desired({"command": "true"}), context(run_dir=run_dir))
    out, err = sbatch_directives(script)[0][2:4]
    assert out == '--output=/data/50%% off/"it\'s" #1/logs/slurm-%j.out'
    assert err == '--error=/data/50%% off/"it\'s" #1/logs/slurm-%j.err'
    assert (out.removeprefix("--output="), err.removeprefix("--error=")) == log_paths(run_dir)


@pytest.mark.parametrize("run_dir", ["/data/a\nb", "/data/a\\b", "/data/a\rb", "/data/a\x00b"])
def test_run_dir_that_cannot_be_written_in_a_directive_is_refused(run_dir: str) -> None:
    with pytest.raises(SpecError) as error:
        render_batch_script(desired({"command": "true"}), context(run_dir=run_dir))
    (issue,) = error.value.issues
    assert (issue.file, issue.line, issue.field) == ("specs/train.yaml", 3, "workdir")


# --- User text arrives intact and inert --------------------------------------------------

HOSTILE = [
    "line one\nline two",
    "a\n#SBATCH --partition=evil\nb",
    "$(touch CANARY)",
    "`touch CANARY`",
    "'; touch CANARY; '",
    '"; touch CANARY; "',
    "x; touch CANARY",
    "\\'\\\"\\\\",
    "${HOME:-$(touch CANARY)}",
    "\n#!/bin/sh\ntouch CANARY\n",
    "tab\there\r\nand a trailing backslash\\",
    "ünïcødé ✓ % %j %%",
    "",
]


@pytest.mark.parametrize("value", HOSTILE)
def test_env_value_arrives_byte_identical_and_runs_nothing(tmp_path: Path, value: str) -> None:
    spec = {"command": 'printf %s "$VALUE"', "env": {"VALUE": value}}
    script, printed = printing(tmp_path, spec)
    assert printed == value.encode()
    assert not (tmp_path / "CANARY").exists()
    baseline = render_batch_script(desired({"command": "true"}), context(run_dir=tmp_path / "run"))
    assert sbatch_directives(script) == sbatch_directives(baseline)


@pytest.mark.parametrize("value", HOSTILE[:-1])
def test_template_paths_arrive_as_one_word_each(tmp_path: Path, value: str) -> None:
    run_dir = tmp_path / "run dir 'x'"
    spec = {
        "command": "printf '<%s>\\n' {inputs.data.path} {outputs.out.path} {run.dir} {run.name}",
        "inputs": {"data": "prepare.dataset"},
        "outputs": {"out": {"path": value, "staged": False}},
    }
    _, printed = printing(tmp_path, spec, run_dir=run_dir, input_paths={"data": f"/in/{value}"})
    expected = [f"/in/{value}", os.path.join(run_dir, value), str(run_dir), "train"]
    assert printed == "".join(f"<{word}>\n" for word in expected).encode()
    assert not (tmp_path / "CANARY").exists()


def test_every_token_validation_knows_is_rendered(tmp_path: Path) -> None:
    known = templates.known_tokens(["data"], ["out"])
    spec = {
        "command": "printf '<%s>\\n' " + " ".join(f"{{{token}}}" for token in sorted(known)),
        "inputs": {"data": "prepare.dataset"},
        "outputs": {"out": {"path": "o.txt", "staged": False}},
    }
    run_dir = tmp_path / "r"  # the job writes its environment record under it
    _, printed = printing(tmp_path, spec, run_dir=str(run_dir), input_paths={"data": "/in/d"})
    assert printed.decode().splitlines() == [
        f"<{run_dir}/inputs/data.list>",
        "</in/d>",
        "</in/d>",
        f"<{run_dir}/o.txt>",
        f"<{run_dir}>",
        "<train>",
    ]


def test_env_and_output_variables_reach_the_job(tmp_path: Path) -> None:
    spec = {
        "command": "env | grep -E '^(RECON_|SEED=)' | sort; touch \"$RECON_OUTPUT_MODEL\"",
        "env": {"SEED": "7"},
        "inputs": {"raw-data": "prepare.dataset"},
        "outputs": {"model": "m/p.json", "abs": {"path": "/elsewhere/x", "staged": False}},
    }
    run_dir = tmp_path / "r"  # the job writes its environment record under it
    _, printed = printing(tmp_path, spec, run_dir=str(run_dir), input_paths={"raw-data": "/in/d"})
    assert printed.decode().splitlines() == [
        "RECON_INPUT_RAW_DATA=/in/d",
        "RECON_OUTPUT_ABS=/elsewhere/x",
        f"RECON_OUTPUT_MODEL={run_dir}/m/.recon-staging/p.json",
        "RECON_PROJECT=demo",
        "RECON_RUN=train",
        f"RECON_RUN_DIR={run_dir}",
        "RECON_SPEC_HASH=0123456789abcdef",
        "SEED=7",
    ]


def test_command_runs_in_code_dir_under_strict_shell(tmp_path: Path) -> None:
    code = tmp_path / "code dir"
    code.mkdir()
    script = render_batch_script(
        desired({"command": "pwd\nfalse\necho not reached"}),
        context(code_dir=code, run_dir=tmp_path / "run"),
    )
    result = execute(script, tmp_path)
    assert result.returncode == 1
    assert result.stdout == f"{code}\n".encode()


def test_yaml_key_order_does_not_change_the_script() -> None:
    forward = {"command": "true", "env": {"A": "1", "B": "2"}, "outputs": {"x": "x", "y": "y"}}
    backward = {"command": "true", "env": {"B": "2", "A": "1"}, "outputs": {"y": "y", "x": "x"}}
    assert render_batch_script(desired(forward), context()) == render_batch_script(
        desired(backward), context()
    )


# --- Script files ------------------------------------------------------------------------


def script_run(text: str) -> DesiredRun:
    return desired(
        {"script": "scripts/job", "outputs": {"out": {"path": "out.txt", "staged": False}}}, text
    )


def test_script_without_shebang_runs_like_a_command(tmp_path: Path) -> None:
    text = "echo $RECON_RUN\nfalse\necho no\n"
    script = render_batch_script(
        script_run(text), context(code_dir=tmp_path, run_dir=tmp_path / "run")
    )
    assert script.endswith(f"\ncd {tmp_path}\n{RECORD}{text}")
    result = execute(script, tmp_path)
    assert (result.returncode, result.stdout) == (1, b"train\n")


def test_bash_script_runs_under_its_own_shell_options(tmp_path: Path) -> None:
    # Run as `./script` would: no `set -e` it did not ask for.
    text = '#!/bin/bash\nfalse\necho "after, in $RECON_RUN, args: $#"\n'
    result = execute(
        render_batch_script(script_run(text), context(code_dir=tmp_path, run_dir=tmp_path / "run")),
        tmp_path,
    )
    assert (result.returncode, result.stdout) == (0, b"after, in train, args: 0\n")


def test_python_script_gets_env_and_the_job_stdin(tmp_path: Path) -> None:
    text = (
        "#!/usr/bin/env python3\nimport os, sys\n"
        "print(os.environ['RECON_OUTPUT_OUT'], repr(sys.stdin.read()), os.getcwd())\n"
        "sys.exit(3)\n"
    )
    run_dir = tmp_path / "r"  # the job writes its environment record under it
    script = render_batch_script(script_run(text), context(run_dir=str(run_dir), code_dir=tmp_path))
    path = tmp_path / "job.sh"
    path.write_text(script)
    result = subprocess.run(
        ["bash", str(path)], input=b"job stdin", capture_output=True, cwd="/", check=False
    )
    assert (result.returncode, result.stdout) == (
        3,
        f"{run_dir}/out.txt 'job stdin' {tmp_path}\n".encode(),
    )


def test_shebang_argument_is_passed_as_the_kernel_would(tmp_path: Path) -> None:
    # One argument, inner spaces kept, outer ones dropped: echo shows the two inner spaces.
    text = "#! /bin/echo  one  two \t\nignored\n"
    result = execute(
        render_batch_script(script_run(text), context(code_dir=tmp_path, run_dir=tmp_path / "run")),
        tmp_path,
    )
    assert result.stdout == b"one  two /dev/fd/3\n"


def test_heredoc_delimiter_is_no_line_of_the_script(tmp_path: Path) -> None:
    text = "#!/bin/cat\nRECON_SCRIPT_EOF\nRECON_SCRIPT_EOF_1\n$(touch CANARY) 'x' \\\nend"
    script = render_batch_script(
        script_run(text), context(code_dir=tmp_path, run_dir=tmp_path / "run")
    )
    assert "3<<'RECON_SCRIPT_EOF_2'\n" in script
    result = execute(script, tmp_path)
    assert result.stdout == (text + "\n").encode()
    assert not (tmp_path / "CANARY").exists()


# --- Paths for the submitter -------------------------------------------------------------


def test_log_paths_and_files() -> None:
    assert log_paths("/r/a%b") == ("/r/a%%b/logs/slurm-%j.out", "/r/a%%b/logs/slurm-%j.err")
    assert log_files("/r/a%b", "42") == (
        Path("/r/a%b/logs/slurm-42.out"),
        Path("/r/a%b/logs/slurm-42.err"),
    )


def test_required_directories() -> None:
    run = desired(
        {
            "command": "true",
            "outputs": {"a": "x/y.csv", "b": "z.txt", "c": "ckpt/", "d": "/scratch/u/out.h5"},
        }
    )
    assert required_directories(run, context(run_dir="/r")) == (
        Path("/r/logs"),
        Path("/r"),
        Path("/r/x"),
        Path("/scratch/u"),
    )


# --- The caller's side of the contract ---------------------------------------------------


def test_tag_must_match_the_run() -> None:
    with pytest.raises(ValueError, match="is not run 'train'"):
        render_batch_script(desired({"command": "true"}), context(name="other"))


def test_input_paths_must_match_the_inputs() -> None:
    run = desired({"command": "true", "inputs": {"data": "prepare.dataset"}})
    with pytest.raises(ValueError, match="input paths"):
        render_batch_script(run, context())
    with pytest.raises(ValueError, match="absolute"):
        context(input_paths={"data": "relative/path"})


def test_paths_must_be_absolute() -> None:
    with pytest.raises(ValueError, match="run_dir"):
        context(run_dir="runs/train")
    with pytest.raises(ValueError, match="code_dir"):
        context(code_dir="code")


# --- The spec allow-lists the renderer relies on -----------------------------------------


@pytest.mark.parametrize(
    "flag",
    [
        "--part=gpu",  # getopt_long takes an unambiguous prefix: this is --partition
        "--comm=evil",  # --comment: the tag
        "--job=x",  # --job-name
        "--out=/tmp/x",  # --output
        "--dep=afterok:1",  # --dependency
        "--test-only",  # sbatch exits 0 and submits nothing
        "--clusters=other",  # the job would be invisible to squeue/sacct here
        "--cluster=other",
        "--uid=1000",  # likewise
        "--mem",
    ],
)
def test_sbatch_extra_refuses_managed_options_and_their_abbreviations(flag: str) -> None:
    with pytest.raises(ValidationError, match="set by recon itself"):
        NodeShape(sbatch_extra=(flag,))


@pytest.mark.parametrize(
    "flag",
    [
        "--exclusive",
        "--mail-type=END",
        "--time-min=10",
        "--wait-all-nodes=1",
        "--mem-bind=local",
        "--cluster-constraint=a",
        "--signal=B:USR1@60",
    ],
)
def test_sbatch_extra_keeps_unmanaged_options(flag: str) -> None:
    assert NodeShape(sbatch_extra=(flag,)).sbatch_extra == (flag,)


@pytest.mark.parametrize(("field", "names"), [("inputs", ("a-b", "a_b")), ("outputs", ("x", "X"))])
def test_names_that_make_the_same_variable_are_refused(field: str, names: tuple[str, str]) -> None:
    value = "prepare.dataset" if field == "inputs" else "out"
    with pytest.raises(ValidationError, match="would both be RECON_"):
        Run.model_validate(
            {"kind": "Run", "name": "a", "command": "x", field: dict.fromkeys(names, value)}
        )


# --- Properties --------------------------------------------------------------------------

# Any text the YAML loader could hand over: no NUL (refused by the models), no lone
# surrogates (not UTF-8, so never in a spec file).
TEXT = st.text(st.characters(exclude_categories=["Cs"], exclude_characters="\x00"))
PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(value=TEXT)
def test_any_env_value_is_inert(tmp_path: Path, value: str) -> None:
    spec = {"command": 'printf %s "$VALUE"', "env": {"VALUE": value}}
    script, printed = printing(tmp_path, spec)
    assert printed == value.encode()
    assert len(sbatch_directives(script)[0]) == 5  # job name, comment, logs, --ignore-pbs


@PROPERTY
@given(path=TEXT.filter(str.strip))
def test_any_output_path_arrives_as_one_word(tmp_path: Path, path: str) -> None:
    spec = {
        "command": 'printf "%s|" {outputs.o.path} "$RECON_OUTPUT_O"',
        "outputs": {"o": {"path": path, "staged": False}},
    }
    run_dir = str(tmp_path / "r")
    script, printed = printing(tmp_path, spec, run_dir=run_dir)
    absolute = os.path.join(run_dir, path)
    assert printed == f"{absolute}|{absolute}|".encode()
    assert len(sbatch_directives(script)[0]) == 5


@PROPERTY
@given(tail=st.text(st.characters(exclude_categories=("Cs", "Cc"), exclude_characters="\\")))
def test_any_writable_run_dir_reaches_slurm_as_written(tail: str) -> None:
    run_dir = "/" + tail
    script = render_batch_script(desired({"command": "true"}), context(run_dir=run_dir))
    (options,) = sbatch_directives(script)
    assert options[2:4] == [f"--output={log_paths(run_dir)[0]}", f"--error={log_paths(run_dir)[1]}"]
    assert options[4] == "--ignore-pbs"


@PROPERTY
@given(
    lines=st.lists(
        st.sampled_from(["RECON_SCRIPT_EOF", "RECON_SCRIPT_EOF_1", "EOF", "'", ")"])
        | TEXT.map(lambda text: text.replace("\n", " ")),
        max_size=8,
    )
)
def test_any_script_text_reaches_its_interpreter_byte_identical(
    tmp_path: Path, lines: list[str]
) -> None:
    text = "\n".join(["#!/bin/cat", *lines]) + "\n"
    script = render_batch_script(
        script_run(text), context(code_dir=tmp_path, run_dir=tmp_path / "run")
    )
    result = execute(script, tmp_path)
    assert (result.returncode, result.stdout) == (0, text.encode())
