"""The batch script sbatch gets for a run: recon's directives, then the user's command.

sbatch reads ``#SBATCH`` lines from the top of the script, skipping comments and blank
lines, and stops at the first command. So the script has two parts:

    #!/bin/bash
    #SBATCH ...                 recon's directives, built from allow-listed values only
    set -euo pipefail           the first command: sbatch reads no directive after it
    if ... sha256sum ...        a run with inputs: the skip check (``skip_check_block``)
    <environment>               modules loaded, a venv or conda env activated (when declared)
    export RECON_...=...        everything below holds user text, every value shell-quoted
    export <env>=...
    <staging>                   a run with staged outputs: where the job writes them
    cd <code_dir>
    <environment record>        what the job had, for its provenance manifest
    <command, or the script file's text>    (in a subshell, with staged outputs; in the
                                            background with a checkpoint: ``checkpoint_lines``)
    <publishing>                each staged output replaces its published one

Nothing a spec says can add a directive: names, partitions, constraints and sbatch_extra
flags are allow-listed by the spec models (they cannot hold a space, quote, ``#`` or line
break), the run directory is checked here, and all other user text comes after the first
command. One more thing reads past the first command: sbatch translates ``#PBS`` and
``#BSUB`` lines anywhere in the first hundred lines of a script into options (a ``#PBS -q
gpu`` line in a command would move the job). ``--ignore-pbs`` turns that off, so every
script carries it.

Pure: no I/O, no clock, no environment. The caller resolves paths and creates
``required_directories`` before calling sbatch.
"""

from __future__ import annotations

import os
import posixpath
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import assert_never

from reconciler.desired import matrix, templates
from reconciler.desired.checkpoint import Checkpoint
from reconciler.desired.desired import DesiredRun
from reconciler.desired.fields import env_suffix
from reconciler.desired.models import Allocation, Billing, Environment, NodeShape, RunResources
from reconciler.errors import SpecError, SpecIssue
from reconciler.scheduler.runfolder import (
    CHECKPOINTED_DIR,
    ENVIRONMENT_DIR,
    NOT_OUTPUTS,
    PUBLISHED_DIR,
    PUBLISHING_DIR,
    SKIPPED_DIR,
    UNWRITTEN_DIR,
    input_list_file,
    log_paths,
    logs_dir,
    previous_path,
    skip_check_file,
    staging_path,
)
from reconciler.scheduler.tag import Tag

StrPath = str | os.PathLike[str]

_HEREDOC_DELIMITER = "RECON_SCRIPT_EOF"
# Characters that need no quoting in an #SBATCH value; anything else is double-quoted.
_PLAIN_DIRECTIVE_VALUE = re.compile(r"^[A-Za-z0-9_./,:@+=%-]+$")
# sbatch reads a directive to the end of its line, and a backslash anywhere in an output
# file name turns off Slurm's %j substitution (the job then fails to start): a run
# directory holding either cannot be written into --output.
_UNWRITABLE_IN_DIRECTIVE = re.compile(r"[\x00-\x1f\x7f\\]")
# `#!interpreter [one argument]`, split as the kernel splits it.
_SHEBANG = re.compile(r"^#![ \t]*([^ \t\n]+)(?:[ \t]+([^\n]*?))?[ \t]*$")


@dataclass(frozen=True)
class RenderContext:
    """Where a run's job runs: everything the script needs beyond the run's spec."""

    project: str
    code_dir: StrPath  # absolute: the checkout of the commit; the command runs here
    run_dir: StrPath  # absolute: the run's directory (its layout: scheduler/runfolder)
    tag: Tag
    input_paths: Mapping[str, StrPath] = field(default_factory=dict)  # input name -> absolute
    # input name -> every path it reads: a gathered input's members' outputs; else its one
    input_lists: Mapping[str, tuple[StrPath, ...]] = field(default_factory=dict)
    # absolute: the project folder, which a relative `environment.venv` is relative to
    project_dir: StrPath = "/"

    def __post_init__(self) -> None:
        paths = {"code_dir": self.code_dir, "run_dir": self.run_dir}
        paths["project_dir"] = self.project_dir
        paths.update({f"input {name!r}": path for name, path in self.input_paths.items()})
        for what, path in paths.items():
            if not posixpath.isabs(os.fspath(path)):
                raise ValueError(f"{what} must be an absolute path, got {os.fspath(path)!r}")


def render_batch_script(run: DesiredRun, context: RenderContext) -> str:
    """The whole batch script for ``run``, ready for ``sbatch`` on stdin."""
    _check_context(run, context)
    staged = staged_outputs(run, context)
    body = _body(run, context)
    lines = [
        "#!/bin/bash",
        *_directives(run, context),
        "set -euo pipefail",
        *(skip_check_block(context.run_dir) if run.inputs else ()),
        *environment_lines(run.spec.environment, context),
        *_exports(run, context),
        *_staging_lines(staged),
        f"cd {shlex.quote(os.fspath(context.code_dir))}",
        *ENVIRONMENT_RECORD,
        *_command_lines(run, context, body, staged),
    ]
    return "\n".join(lines) + "\n"


def _command_lines(
    run: DesiredRun, context: RenderContext, body: str, staged: Mapping[str, str]
) -> list[str]:
    """The command, then its staged outputs published: in a subshell when anything follows
    it; in the background, waited for, when the run checkpoints (``checkpoint_lines``)."""
    publishing = _publishing_lines(run, context, staged) if staged else []
    if run.spec.checkpoint is not None:
        before, after = checkpoint_lines(run.spec.checkpoint.signal)
        return [*before, "(", body, ") &", *after, *publishing]
    return ["(", body, ")", *publishing] if staged else [body]


def checkpoint_lines(warning: str) -> tuple[list[str], list[str]]:
    """The lines around a checkpointing run's command (started in the background between
    them, so the shell is free to take signals while it runs): the warning signal and
    SIGTERM (a preemption's grace period, the time limit) are passed on to the command,
    to the script's whole process group when it leads one (as under Slurm and the local
    backend), else to the command's own process; that the warning came is remembered.
    Once the command has ended: an exit 0 goes on (to publishing); any other after a
    signal leaves the marker ``runfolder.checkpointed`` and ends the job with that
    status, publishing nothing; any other without one ends it as a failure."""
    signals = [warning] if warning == "TERM" else [warning, "TERM"]
    traps = [f"trap 'recon_forward {name}' {name}" for name in signals]
    before = [
        "# recon checkpoint: the warning signal and SIGTERM are passed on to the command,",
        "# which saves its progress and exits; the run's next job resumes from it.",
        "recon_warned=0",
        "recon_forward() {",
        "  recon_warned=1",
        "  trap '' \"$1\"",
        '  if [ "$(cut -d \' \' -f 5 /proc/$$/stat 2>/dev/null)" = "$$" ]; then',
        '    kill -s "$1" 0 2>/dev/null || true',
        '  else kill -s "$1" "${recon_command:-$$}" 2>/dev/null || true; fi',
        '  trap "recon_forward $1" "$1"',
        "}",
        *traps,
    ]
    marker = f'"$RECON_RUN_DIR/{CHECKPOINTED_DIR}"'
    job = '"${recon_job:-${SLURM_JOB_ID:-job}}"'
    after = [
        "recon_command=$!",
        # wait returns early when a trapped signal comes: wait again while it lives
        'while kill -0 "$recon_command" 2>/dev/null; do wait "$recon_command" || true; done',
        'recon_status=0; wait "$recon_command" || recon_status=$?',
        'if [ "$recon_status" -ne 0 ]; then',
        '  if [ "$recon_warned" = 1 ]; then',
        f"    {{ mkdir -p {marker} && : >{marker}/{job}; }} || true",
        '    echo "recon: the command exited $recon_status after the warning signal:'
        " its checkpoint stays, nothing published; the run's next job resumes\" >&2",
        "  fi",
        '  exit "$recon_status"',
        "fi",
    ]
    return before, after


def staged_outputs(run: DesiredRun, context: RenderContext) -> dict[str, str]:
    """The outputs the job stages, by name -> published path: every output but those
    declared ``staged: false``, one that holds the run's directory (``.``), whose logs
    and bookkeeping cannot be swapped away, and one inside another staged output, which
    is written inside that one's staging path and published with it. None for a run
    started in an allocation as a step of several tasks, each running this script."""
    resources = run.spec.resources
    if run.spec.allocation is not None and resources.step_nodes * resources.tasks_per_node > 1:
        return {}  # each of the step's tasks runs the whole script: none can publish alone
    run_dir = posixpath.normpath(os.fspath(context.run_dir))
    published = _output_paths(run, context, staging=False)
    staged = {
        name: path
        for name, path in sorted(published.items())
        if run.spec.outputs[name].staged
        and not (run_dir + "/").startswith(posixpath.normpath(path).rstrip("/") + "/")
    }
    return {
        name: path
        for name, path in staged.items()
        if not any(
            path.startswith(other.rstrip("/") + "/") for other in staged.values() if other != path
        )
    }


def _staging_lines(staged: Mapping[str, str]) -> list[str]:
    """Before the command: no publishing of an earlier job left half done (a pass rolls
    it back first), and an empty place for each staged output, beside its published
    path (``runfolder.staging_path``)."""
    if not staged:
        return []
    staging = [_bare(staging_path(path)) for path in staged.values()]
    publishing = f'"$RECON_RUN_DIR/{PUBLISHING_DIR}"'
    return [
        "# recon staging: the outputs are written beside their published paths, which they",
        "# replace only once the command has succeeded and written them all.",
        f'if [ -n "$(ls -A {publishing} 2>/dev/null)" ]; then',
        _fail("an earlier job's outputs are half published: recon apply rolls them back"),
        "fi",
        f"rm -rf -- {shlex.join(staging)}",
        f"mkdir -p -- {shlex.join(sorted({posixpath.dirname(path) for path in staging}))}",
    ]


def _publishing_lines(
    run: DesiredRun, context: RenderContext, staged: Mapping[str, str]
) -> list[str]:
    """After the command succeeded: every staged output (and a marker inside one) is
    there, or the job fails and publishes nothing. Then a marker names what is being
    published (a pass rolls back a job killed before it is removed,
    ``state/publishing``), each published output is kept aside (a file by a hard link,
    a folder by a rename) and replaced by a rename, the marker is moved to say all is
    published, and what was kept aside is removed."""
    written = [_bare(staging_path(path)) for path in staged.values()]
    checks = [
        f"[ -e {shlex.quote(path)} ] || recon_unwritten+={shlex.quote(' ' + name)}"
        for name, path in zip(staged, written, strict=True)
    ]
    published = _output_paths(run, context, staging=False)
    inner = [(name, path) for name, path in published.items() if name not in staged]
    run_dir = os.fspath(context.run_dir)
    inner += [
        (name, posixpath.join(run_dir, output.marker))
        for name, output in run.spec.outputs.items()
        if output.marker is not None
    ]
    for name, path in sorted(inner):  # a marker or an output inside a staged output
        for holder in staged.values():
            folder = holder.rstrip("/") + "/"
            if path.startswith(folder):
                written_at = shlex.quote(_written_at(path, staged).rstrip("/"))
                checks.append(
                    f"[ ! -e {shlex.quote(_bare(staging_path(folder)))} ] || [ -e {written_at} ] "
                    f"|| recon_unwritten+={shlex.quote(' ' + name)}"
                )
    previous = [_bare(previous_path(path)) for path in staged.values()]
    publish = [
        shlex.join(["recon_publish", _bare(path), _bare(staging_path(path)), _bare(old)])
        for path, old in zip(staged.values(), previous, strict=True)
    ]
    folders = sorted({posixpath.dirname(path) for path in written + previous})
    publishing = f'"$RECON_RUN_DIR/{PUBLISHING_DIR}"'
    had = "; ".join(shlex.join(["recon_had", _bare(path)]) for path in staged.values())
    return [
        "# recon publishing: the command succeeded; each staged output replaces its published one.",
        # A run's step in an allocation is known as its job `12.3`: srun sets SLURM_STEP_ID,
        # a batch job's script has none.
        'recon_job="${recon_job:-${SLURM_JOB_ID:-job}${SLURM_STEP_ID:+.$SLURM_STEP_ID}}"',
        "recon_unwritten=",
        *checks,
        'if [ -n "$recon_unwritten" ]; then',
        f'  {{ mkdir -p "$RECON_RUN_DIR/{UNWRITTEN_DIR}" && '
        f'echo $recon_unwritten >"$RECON_RUN_DIR/{UNWRITTEN_DIR}/$recon_job"; }} || true',
        '  echo "recon: the command did not write its declared outputs:$recon_unwritten;'
        " nothing published; write each where {outputs.NAME.path} points,"
        ' or set staged: false" >&2',
        "  exit 1",
        "fi",
        "recon_had() {",
        '  if [ -e "$1" ] || [ -L "$1" ]; then printf \'1 %s\\0\' "$1"',
        "  else printf '0 %s\\0' \"$1\"; fi",
        "}",
        "recon_publish() {",
        '  if [ -e "$1" ] || [ -L "$1" ]; then',
        '    if { [ -d "$1" ] && [ ! -L "$1" ]; } || [ -d "$2" ] || ! ln -- "$1" "$3" 2>/dev/null',
        '    then mv -T -- "$1" "$3"; fi',
        "  fi",
        '  mv -T -- "$2" "$1"',
        "}",
        f'recon_publishing="$RECON_RUN_DIR/{PUBLISHING_DIR}/$recon_job"',
        f"rm -rf -- {shlex.join(previous)}",
        f'mkdir -p -- {publishing} "$RECON_RUN_DIR/{PUBLISHED_DIR}" '
        + shlex.join(sorted({posixpath.dirname(path) for path in previous})),
        f'{{ {had}; }} >"$recon_publishing.new"',
        'mv -f -- "$recon_publishing.new" "$recon_publishing"',
        *publish,
        # One rename says all is published: a job killed from here on is a success's
        # (``runfolder.published_marker``), not a publishing to roll back.
        f'mv -f -- "$recon_publishing" "$RECON_RUN_DIR/{PUBLISHED_DIR}/$recon_job"',
        f"rm -rf -- {shlex.join(previous)}",
        f"rmdir -- {shlex.join(folders)} 2>/dev/null || true",
    ]


def _bare(path: str) -> str:
    """A path as a shell command names it: without the slash a folder output may end in."""
    return path.rstrip("/") or "/"


def array_batch_script(member_script: str, tag: Tag, sweep_dir: StrPath, tasks: StrPath) -> str:
    """The script a sweep's job array is submitted with: a member's job-wide and shape
    directives (every member of a sweep asks for the same) with the array's own name,
    tag and logs, and a body that runs the task's member: its own batch script
    (``<tasks>/<index>.sh``), byte for byte (its #SBATCH lines are only comments there;
    the manifest's script_sha256 names those bytes), its output sent to the member's logs
    (the folder ``<tasks>/<index>.logs`` names) under the task's id, where ``log_files``
    finds them."""
    task = shlex.quote(os.fspath(tasks)) + '/"$SLURM_ARRAY_TASK_ID"'
    name = '"$logs/slurm-${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID}'
    return "\n".join(
        [
            "#!/bin/bash",
            *_array_directives(member_script, tag, sweep_dir),
            "set -euo pipefail",
            f'logs="$(cat {task}.logs)"',
            f'exec bash {task}.sh >>{name}.out" 2>>{name}.err"',
            "",
        ]
    )


def _array_directives(member_script: str, tag: Tag, sweep_dir: StrPath) -> list[str]:
    """A member's #SBATCH lines with the name, comment and logs made the array's."""
    out, err = log_paths(sweep_dir, array=True)
    made = (*tag.options, f"--output={out}", f"--error={err}")
    own = {option.split("=", 1)[0]: option for option in made}
    lines = []
    for line in member_script.splitlines()[1:]:
        if not line.startswith("#SBATCH "):
            break
        option = line.removeprefix("#SBATCH ").split("=", 1)[0]
        lines.append(f"#SBATCH {own[option]}" if option in own else line)
    return lines


def environment_lines(environment: Environment | None, context: RenderContext) -> list[str]:
    """The job's declared environment, made in the script: modules loaded, then a venv or
    conda environment activated. Nothing when none is declared: the job then runs in the
    environment it was submitted with (``scheduler/jobenv``). Module and conda scripts are
    not written for ``set -u``, so they run without it."""
    if environment is None:
        return []
    lines: list[str] = []
    if environment.modules:
        lines += [
            "# environment: modules",
            "set +u",
            "if ! command -v module >/dev/null 2>&1; then",
            f"  for init in {' '.join(MODULE_INITS)}; do",
            '    if [ -r "$init" ]; then . "$init"; break; fi',
            "  done",
            "fi",
            "if ! command -v module >/dev/null 2>&1; then",
            _fail("environment.modules: no module command (Lmod or Environment Modules)"),
            "fi",
            f"module load {shlex.join(environment.modules)}",
            "set -u",
        ]
    if environment.venv is not None:
        venv = posixpath.join(os.fspath(context.project_dir), environment.venv)
        lines += [
            "# environment: venv",
            f"export VIRTUAL_ENV={shlex.quote(posixpath.normpath(venv))}",
            'if [ ! -x "$VIRTUAL_ENV/bin/python" ]; then',
            _fail("environment.venv: no $VIRTUAL_ENV/bin/python"),
            "fi",
            'export PATH="$VIRTUAL_ENV/bin:$PATH"',
            "unset PYTHONHOME",
        ]
    if environment.conda is not None:
        lines += [
            "# environment: conda",
            "set +u",
            "if ! command -v conda >/dev/null 2>&1; then",
            f"  for base in {' '.join(_CONDA_BASES)}; do",
            '    if [ -x "$base/bin/conda" ]; then export PATH="$base/bin:$PATH"; break; fi',
            "  done",
            "fi",
            "if ! command -v conda >/dev/null 2>&1; then",
            _fail("environment.conda: no conda command (load a module that has it)"),
            "fi",
            'eval "$(conda shell.bash hook)"',
            f"conda activate {shlex.quote(environment.conda)}",
            "set -u",
        ]
    return lines


# Where Lmod and Environment Modules keep the shell code that defines `module`: a login
# shell reads it from /etc/profile.d, a batch script must read it itself.
MODULE_INITS = (
    "/etc/profile.d/lmod.sh",
    "/etc/profile.d/modules.sh",
    "/usr/share/lmod/lmod/init/bash",
    "/usr/share/modules/init/bash",
)
# Where conda is installed when no module puts it on the PATH.
_CONDA_BASES = (
    '"$HOME/miniforge3"',
    '"$HOME/mambaforge"',
    '"$HOME/miniconda3"',
    '"$HOME/anaconda3"',
    "/opt/conda",
)


def _fail(message: str) -> str:
    """A line that ends the job with ``message`` (plain text: it is inside double quotes)."""
    return f'  echo "recon: {message} on $(hostname)" >&2; exit 1'


# What the job had, written where settle reads it into the provenance manifest
# (``runfolder.environment_record``): the interpreter, the modules, the venv or conda
# environment, the PATH. Names and versions only, never a variable's value beyond these.
# It must never fail the job.
ENVIRONMENT_RECORD = (
    'recon_job="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID:-}}"',
    f'{{ mkdir -p "$RECON_RUN_DIR/{ENVIRONMENT_DIR}" && printf '
    "'python=%s\\nmodules=%s\\nvenv=%s\\nconda=%s\\npath=%s\\n' "
    '"$(command -v python3 >/dev/null && python3 -V 2>&1 </dev/null)" "${LOADEDMODULES:-}" '
    '"${VIRTUAL_ENV:-}" "${CONDA_DEFAULT_ENV:-}" "$PATH" '
    f'>"$RECON_RUN_DIR/{ENVIRONMENT_DIR}/${{recon_job:-${{SLURM_JOB_ID:-job}}}}"; }} '
    "2>/dev/null || true",
)


SKIPPED = "skipped: inputs unchanged"


def skip_check_block(run_dir: StrPath) -> list[str]:
    """The skip check: when recon left the versions its inputs had at the run's last
    success (a run that may rerun) and they are the same now, the job ends at once, a
    success that leaves its outputs as they are, and says so in its log and a marker.

    Shell and coreutils only (``sha256sum --check``, ``find``, ``sort``, ``cmp``): no Python
    on the compute node. It runs before any variable of the spec's is exported. Any
    failure (a file missing, unreadable, or other) means "changed": the command runs."""
    check = shlex.quote(os.fspath(skip_check_file(run_dir, "")))
    marker = shlex.quote(os.fspath(Path(run_dir, SKIPPED_DIR)))
    # recon's bookkeeping, by either name, is no part of a folder's version (``outputs``)
    pruned = " -o ".join(f"-name {name}" for name in sorted(NOT_OUTPUTS))
    return [
        "# recon skip check: the inputs as the last success read them? Then nothing to do.",
        f"recon_check={check}",
        'if [ -f "$recon_check.sha256" ] && sha256sum --check --status "$recon_check.sha256" \\',
        '  && { [ ! -f "$recon_check.folders" ] || while IFS= read -r recon_folder; do',
        f"    find -H \"$recon_folder\" -mindepth 1 \\( {pruned} \\) -prune -o -printf '%y %p\\n'",
        '  done < "$recon_check.folders" | LC_ALL=C sort | cmp -s - "$recon_check.entries"; }',
        "then",
        '  recon_job="${SLURM_ARRAY_JOB_ID:+${SLURM_ARRAY_JOB_ID}_${SLURM_ARRAY_TASK_ID:-}}"',
        f'  {{ mkdir -p {marker} && : > {marker}/"${{recon_job:-${{SLURM_JOB_ID:-}}}}"; }} || true',
        f'  echo "recon: {SKIPPED} (as its last success read them): not running the command"',
        "  exit 0",
        "fi",
    ]


def required_files(run: DesiredRun, context: RenderContext) -> dict[Path, str]:
    """Files to write before sbatch: each input's list of paths (``input_list_file``)."""
    return {
        input_list_file(context.run_dir, name): "".join(
            os.fspath(path) + "\n" for path in _paths_of(name, context)
        )
        for name in sorted(run.inputs)
    }


def _paths_of(name: str, context: RenderContext) -> tuple[StrPath, ...]:
    return context.input_lists.get(name) or (context.input_paths[name],)


def required_directories(run: DesiredRun, context: RenderContext) -> tuple[Path, ...]:
    """What must exist before sbatch: the log directory (Slurm fails a job whose --output
    directory is missing, before the script runs, with nothing in any log) and the parent
    directory of every output, so a command can write ``{outputs.X.path}`` straight away."""
    logs = logs_dir(context.run_dir)
    published = _output_paths(run, context, staging=False)
    parents = {Path(path.rstrip("/")).parent for path in published.values()}
    if run.spec.checkpoint is not None:  # and the checkpoint's folder, kept across attempts
        parents.add(Path(checkpoint_dir(run, context)))
    return (logs, *sorted(parents - {logs}))


def _check_context(run: DesiredRun, context: RenderContext) -> None:
    # A mismatch would make the job's comment claim a spec it does not run.
    tag = context.tag
    if (tag.project, tag.kind, tag.name, tag.spec_hash) != (
        context.project,
        "run",
        run.name,
        run.spec_hash,
    ):
        raise ValueError(f"tag {tag.format()} is not run {run.name!r} at {run.spec_hash}")
    if set(context.input_paths) != set(run.inputs):
        raise ValueError(
            f"input paths given for {sorted(context.input_paths)}, "
            f"but run {run.name!r} has inputs {sorted(run.inputs)}"
        )
    if _UNWRITABLE_IN_DIRECTIVE.search(os.fspath(context.run_dir)):
        message = (
            f"the run's directory {os.fspath(context.run_dir)!r} holds a line break, control "
            "character or backslash, which cannot be written in an #SBATCH --output line; "
            "choose a workdir (or project location) without them"
        )
        raise SpecError([SpecIssue(run.location.file, run.location.line, "workdir", message)])


def _directives(run: DesiredRun, context: RenderContext) -> list[str]:
    """One block per het component, separated by `#SBATCH hetjob`; a plain run has one.

    Job-wide settings go in component 0's block only: Slurm takes them from there.
    """
    resources = run.spec.resources
    blocks = [shape_options(shape) for shape in resources.shapes]
    blocks[0] = _job_wide_options(resources, context, run.spec.checkpoint) + blocks[0]
    lines: list[str] = []
    for index, block in enumerate(blocks):
        if index:
            lines.append("#SBATCH hetjob")
        lines.extend(f"#SBATCH {option}" for option in block)
    return lines


def _job_wide_options(
    resources: RunResources, context: RenderContext, checkpoint: Checkpoint | None = None
) -> list[str]:
    out, err = log_paths(context.run_dir)
    options = [
        *context.tag.options,
        f"--output={_directive_value(out)}",
        f"--error={_directive_value(err)}",
        "--ignore-pbs",
    ]
    if resources.time is not None:
        options.append(f"--time={resources.time.text}")
    options.extend(billing_options(resources))
    if checkpoint is not None:
        # --no-requeue: a preemption on a REQUEUE partition ends the job (PREEMPTED) for
        # recon to submit the next one, instead of Slurm requeuing it under the same id.
        seconds = checkpoint.before_end.seconds
        options += [f"--signal=B:{checkpoint.signal}@{seconds}", "--no-requeue"]
    return options


def billing_options(billing: Billing) -> list[str]:
    """Whom the job is charged to, as sbatch and salloc both read it."""
    options = []
    if billing.account is not None:
        options.append(f"--account={billing.account}")
    if billing.qos is not None:
        options.append(f"--qos={billing.qos}")
    return options


def shape_options(shape: NodeShape) -> list[str]:
    """The options of one node shape, as sbatch and salloc both read them."""
    # `8+` CPUs or `32GB+` memory mean "at least": asking for exactly the minimum satisfies
    # that on any node, and Slurm has no way to ask for "more if you have it".
    options = []
    if shape.partition is not None:
        options.append(f"--partition={shape.partition}")
    if shape.nodes is not None:
        options.append(f"--nodes={shape.nodes}")
    options.extend(resource_options(shape))
    if shape.constraint is not None:
        options.append(f"--constraint={shape.constraint}")
    options.extend(shape.sbatch_extra)
    return options


def allocation_options(spec: Allocation) -> tuple[str, ...]:
    """What an allocation holds, as salloc reads it (and the local backend, which reads
    Slurm's words): the time limit, whom it is charged to, and the node shape."""
    return (
        f"--time={spec.time_limit.text}",
        *billing_options(spec.resources),
        *shape_options(spec.resources),
    )


def resource_options(shape: NodeShape, *, hide_gpus: bool = False) -> list[str]:
    """CPUs, memory, GPUs, shards and other GRES per node: the part of a shape that jobs
    and steps share. ``hide_gpus``: a step that asks for no GPU in an allocation that
    holds some (``gpu:0``, in the one --gres)."""
    options = []
    if shape.cpus is not None:
        options.append(f"--cpus-per-task={shape.cpus.count}")
    # No memory given: no --mem at all, so the cluster's DefMemPerCPU applies. (`--mem=0`
    # would mean the whole node.)
    if shape.memory is not None:
        options.append(f"--mem={shape.memory.mebibytes}M")
    if shape.gpus_per_node is not None:
        options.append(f"--gpus-per-node={shape.gpus_per_node.option}")
    # One --gres for every generic resource: a second --gres replaces the first.
    gres = [f"gpu:{shape.gpus.option}"] if shape.gpus is not None else []
    if hide_gpus:  # a step's `gpu:0`: see scheduler/slurm/steps.py
        gres.append("gpu:0")
    if shape.shards is not None:
        gres.append(f"shard:{shape.shards}")
    gres.extend(f"{name}:{count.option}" for name, count in sorted(shape.gres.items()))
    if gres:
        options.append(f"--gres={','.join(gres)}")
    return options


def _directive_value(value: str) -> str:
    """A value in an #SBATCH line: sbatch splits at spaces and stops at `#` unless quoted.

    Only `"` needs escaping inside double quotes; backslashes never get here.
    """
    if _PLAIN_DIRECTIVE_VALUE.match(value):
        return value
    return '"' + value.replace('"', '\\"') + '"'


def _exports(run: DesiredRun, context: RenderContext) -> list[str]:
    """Sorted by name in each group, so key order in the YAML never changes the script."""
    variables = {
        "RECON_PROJECT": context.project,
        "RECON_RUN": run.name,
        "RECON_RUN_DIR": os.fspath(context.run_dir),
        "RECON_SPEC_HASH": run.spec_hash,
    }
    for name in sorted(context.input_paths):
        variables[f"RECON_INPUT_{env_suffix(name)}"] = os.fspath(context.input_paths[name])
    outputs = _output_paths(run, context, staging=True)
    for name in sorted(outputs):
        variables[f"RECON_OUTPUT_{env_suffix(name)}"] = outputs[name]
    if run.spec.checkpoint is not None:
        variables["RECON_CHECKPOINT_DIR"] = checkpoint_dir(run, context)
    if run.member is not None:
        for axis, value in run.member.values:
            variables[f"RECON_MATRIX_{env_suffix(axis)}"] = matrix.text(value)
    # User values are literal text: `$HOME` in a value stays `$HOME`.
    variables.update(sorted(run.spec.env.items()))
    return [f"export {key}={shlex.quote(value)}" for key, value in variables.items()]


def checkpoint_dir(run: DesiredRun, context: RenderContext) -> str:
    """The absolute folder of a run's checkpoint (``{checkpoint.path}``)."""
    assert run.spec.checkpoint is not None
    return posixpath.join(os.fspath(context.run_dir), run.spec.checkpoint.folder)


def _output_paths(run: DesiredRun, context: RenderContext, *, staging: bool) -> dict[str, str]:
    """Absolute path of every output; a relative one is relative to the run's directory.
    With ``staging``, where the job writes it: a staged output's staging path."""
    run_dir = os.fspath(context.run_dir)
    published = {name: posixpath.join(run_dir, output.path) for name, output in run.outputs.items()}
    if not staging:
        return published
    staged = staged_outputs(run, context)
    return {name: _written_at(path, staged) for name, path in published.items()}


def _written_at(published: str, staged: Mapping[str, str]) -> str:
    """Where the job writes a path: inside the staging path of the staged output that
    holds it (or is it), else where it is published."""
    for holder in staged.values():
        folder = holder.rstrip("/") + "/"
        if published == holder:
            return staging_path(holder)
        if published.startswith(folder):
            return _bare(staging_path(folder)) + "/" + published[len(folder) :]
    return published


def _body(run: DesiredRun, context: RenderContext) -> str:
    # Trailing newlines of a YAML block or a file would only leave blank lines at the end.
    if run.spec.command is not None:
        return _command(run.spec.command, run, context).rstrip("\n")
    if run.script_text is None:
        raise ValueError(f"run {run.name!r} has `script:` but its text was not loaded")
    return _script(run.script_text)


def _command(command: str, run: DesiredRun, context: RenderContext) -> str:
    """The command with its tokens filled; each value is shell-quoted, so a path with a
    space or a quote stays one word (write tokens bare, not inside quotes)."""
    axes = [axis for axis, _ in run.member.values] if run.member is not None else []
    values = _TokenValues(run, context)
    checkpoint = run.spec.checkpoint is not None
    filled = templates.fill_in(
        values, sorted(context.input_paths), run.outputs, axes, checkpoint=checkpoint
    )
    return templates.render(command, filled)


@dataclass(frozen=True)
class _TokenValues:
    """What each of ``templates``' tokens stands for in one run's command, shell-quoted."""

    target: DesiredRun
    context: RenderContext

    def run(self, field: templates.RunField) -> str:
        match field:
            case "name":
                return shlex.quote(self.target.name)
            case "dir":
                return shlex.quote(os.fspath(self.context.run_dir))
            case _:
                assert_never(field)

    def input(self, name: str, field: templates.InputField) -> str:
        match field:
            case "path":
                return shlex.quote(os.fspath(self.context.input_paths[name]))
            case "paths":
                paths = _paths_of(name, self.context)
                return " ".join(shlex.quote(os.fspath(path)) for path in paths)
            case "list":
                return shlex.quote(os.fspath(input_list_file(self.context.run_dir, name)))
            case _:
                assert_never(field)

    def output(self, name: str, field: templates.OutputField) -> str:
        match field:
            case "path":
                return shlex.quote(_output_paths(self.target, self.context, staging=True)[name])
            case _:
                assert_never(field)

    def checkpoint(self, field: templates.CheckpointField) -> str:
        match field:
            case "path":
                return shlex.quote(checkpoint_dir(self.target, self.context))
            case _:
                assert_never(field)

    def matrix(self, axis: str) -> str:
        assert self.target.member is not None
        return shlex.quote(matrix.text(self.target.member.value(axis)))


def _script(text: str) -> str:
    """A `script:` file's text, embedded so the job runs exactly the content that was hashed
    (the file at code_dir may have changed since).

    Without a shebang the text is a shell snippet and runs like a command, in this shell.
    With one, it runs under its own interpreter, as `./script` would: `#!/usr/bin/env
    python3` under Python, and `#!/bin/bash` without the `set -euo pipefail` above, which
    a script that did not ask for it may not survive. The interpreter reads the text from
    a quoted here-document on fd 3 (no expansion inside; stdin stays the job's own), whose
    delimiter is a word that is no line of the text.
    """
    shebang = _SHEBANG.match(text.split("\n", 1)[0])
    if shebang is None:
        return text.rstrip("\n")
    interpreter = [word for word in shebang.groups() if word]
    delimiter = _heredoc_delimiter(text)
    body = text if text.endswith("\n") else text + "\n"
    command = shlex.join([*interpreter, "/dev/fd/3"])
    return f"{command} 3<<'{delimiter}'\n{body}{delimiter}"


def _heredoc_delimiter(text: str) -> str:
    lines = set(text.split("\n"))
    delimiter, suffix = _HEREDOC_DELIMITER, 0
    while delimiter in lines:
        suffix += 1
        delimiter = f"{_HEREDOC_DELIMITER}_{suffix}"
    return delimiter
