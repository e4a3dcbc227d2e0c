"""A run's declared environment: validation, identity, the script that makes it, what
sbatch and the local backend are handed, and what a plan says of it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from reconciler.desired.desired import EnvironmentKind
from reconciler.desired.loader import load_desired
from reconciler.desired.source import WorktreeSource
from reconciler.engine.plan import plan
from reconciler.errors import SpecError
from reconciler.scheduler.base import Observation, SubmitRequest
from reconciler.scheduler.jobenv import BASE_PATH, submission_environment
from reconciler.scheduler.render import (
    ENVIRONMENT_RECORD,
    MODULE_INITS,
    RenderContext,
    environment_lines,
)
from reconciler.scheduler.slurm.adapter import SlurmScheduler
from reconciler.scheduler.slurm.testing import ScriptedRunner, ok
from reconciler.scheduler.tag import Tag
from reconciler.state.provenance import read_environment_record
from tests.docs import EXAMPLE, shown_block
from tests.planning import NOW
from tests.programs import hiding

RUN = """\
kind: Run
name: {name}
command: python3 -c 'print(1)'
{environment}"""


def project(tmp_path: Path, runs: dict[str, str], recon_yaml: str = "") -> Path:
    """A project on disk: each run's `environment:` block as written (or nothing)."""
    root = tmp_path / "project"
    (root / "specs").mkdir(parents=True)
    (root / "recon.yaml").write_text("project: envunit\nscheduler: local\n" + recon_yaml)
    (root / "environment.yml").write_text("dependencies: [numpy]\n")
    (root / "uv.lock").write_text("version = 1\n")
    text = "---\n".join(RUN.format(name=name, environment=block) for name, block in runs.items())
    (root / "specs" / "runs.yaml").write_text(text)
    return root


def hashes(root: Path) -> dict[str, str]:
    desired = load_desired(WorktreeSource(root), cache_dir=None)
    return {name: desired.runs[name].spec_hash for name in desired.runs}


def test_an_environment_joins_the_hash_only_where_declared(tmp_path: Path) -> None:
    plain = hashes(project(tmp_path / "a", {"a": "", "b": ""}))
    declared = hashes(
        project(tmp_path / "b", {"a": "environment:\n  modules: [gcc/12]\n", "b": ""})
    )
    assert declared["b"] == plain["b"] and declared["a"] != plain["a"]
    # Declaring nothing, or only inherit, keeps the hash a run had before the field.
    for block in ("environment: {}\n", "environment:\n  inherit: true\n"):
        assert hashes(project(tmp_path / block[14:18], {"a": block, "b": ""})) == plain


def test_a_file_joins_the_hash_by_its_content_and_a_passed_value_never(tmp_path: Path) -> None:
    files = "environment:\n  files: [environment.yml]\n  pass: [TOKEN]\n"
    root = project(tmp_path, {"a": files, "b": "environment:\n  files: [uv.lock]\n", "c": ""})
    before = hashes(root)
    (root / "environment.yml").write_text("dependencies: [numpy, scipy]\n")
    after = hashes(root)
    assert after["a"] != before["a"]
    assert after["b"] == before["b"] and after["c"] == before["c"]
    os.environ["TOKEN"] = "one"
    try:
        assert hashes(root) == after
    finally:
        del os.environ["TOKEN"]


def test_defaults_fill_the_fields_a_run_leaves_out(tmp_path: Path) -> None:
    defaults = "defaults:\n  environment:\n    modules: [gcc/12]\n    pass: [TOKEN]\n"
    root = project(tmp_path, {"a": "environment:\n  pass: [OTHER]\n", "b": ""}, recon_yaml=defaults)
    desired = load_desired(WorktreeSource(root), cache_dir=None)
    a, b = desired.runs["a"].spec.environment, desired.runs["b"].spec.environment
    assert a is not None and b is not None
    assert (a.modules, a.pass_) == (("gcc/12",), ("OTHER",))
    assert (b.modules, b.pass_) == (("gcc/12",), ("TOKEN",))
    assert desired.runs["b"].shape.environment is EnvironmentKind.DECLARED


def test_a_run_naming_its_venv_takes_no_conda_from_the_defaults(tmp_path: Path) -> None:
    defaults = "defaults:\n  environment:\n    conda: lab\n    modules: [gcc/12]\n"
    root = project(tmp_path, {"a": "environment:\n  venv: .venv\n", "b": ""}, defaults)
    desired = load_desired(WorktreeSource(root), cache_dir=None)
    a, b = desired.runs["a"].spec.environment, desired.runs["b"].spec.environment
    assert a is not None and (a.venv, a.conda, a.modules) == (".venv", None, ("gcc/12",))
    assert b is not None and (b.venv, b.conda) == (None, "lab")


@pytest.mark.parametrize(
    ("block", "field", "words"),
    [
        ("environment:\n  venv: .venv\n  conda: lab\n", "environment", "not both"),
        ("environment:\n  pass: [MY-TOKEN]\n", "environment.pass.0", "not a valid"),
        ("environment:\n  modules: [gcc 12]\n", "environment.modules.0", "module name"),
        ("environment:\n  shell: zsh\n", "environment.shell", "unknown field"),
        ("environment:\n  files: [conda.yml]\n", "environment.files", "not a file of the repo"),
        ("environment:\n  files: [../x.yml]\n", "environment", "not inside the repo"),
    ],
)
def test_a_bad_environment_names_file_line_and_field(
    tmp_path: Path, block: str, field: str, words: str
) -> None:
    root = project(tmp_path, {"a": block})
    with pytest.raises(SpecError) as raised:
        load_desired(WorktreeSource(root), cache_dir=None)
    (issue,) = raised.value.issues
    assert (issue.file, issue.field) == ("specs/runs.yaml", field), issue
    assert issue.line is not None and issue.line >= 4 and words in issue.message, issue


def test_a_default_file_missing_from_the_commit_is_named_in_recon_yaml(tmp_path: Path) -> None:
    defaults = "defaults:\n  environment:\n    files: [requirements.lock]\n"
    root = project(tmp_path, {"a": ""}, recon_yaml=defaults)
    with pytest.raises(SpecError) as raised:
        load_desired(WorktreeSource(root), cache_dir=None)
    (issue,) = raised.value.issues
    assert (issue.file, issue.line, issue.field) == (
        "recon.yaml",
        5,
        "defaults.environment.files",
    )


def test_the_job_starts_from_the_base_and_what_it_passes_whoever_applies(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from reconciler.desired.models import Environment

    declared = Environment.model_validate({"pass": ["TOKEN", "ABSENT"]})
    shells = [
        {"PATH": "/opt/conda/bin:/usr/bin", "PYTHONPATH": "/home/x/src", "TOKEN": "t"},
        {"PATH": "/usr/bin", "CONDA_PREFIX": "/opt/conda", "TOKEN": "t", "LANG": "fr_FR"},
    ]
    made = [submission_environment(declared, shell) for shell in shells]
    assert made[0] == made[1]
    assert made[0] is not None
    environment, passed = made[0]
    assert environment["PATH"] == BASE_PATH and environment["TOKEN"] == "t"
    assert set(environment) == {"PATH", "HOME", "USER", "LOGNAME", "LANG", "TOKEN"}
    assert passed == ("TOKEN",)
    assert submission_environment(Environment(inherit=True), shells[0]) is None


def test_sbatch_runs_in_the_jobs_environment_and_its_secret_stays_out_of_repr() -> None:
    runner = ScriptedRunner(sbatch=[ok("41\n")])
    scheduler = SlurmScheduler(runner=runner)
    tag = Tag(
        project="envunit", deployment="0123456789ab", kind="run", name="a", spec_hash="0" * 16
    )
    request = SubmitRequest(
        script="#!/bin/bash\ntrue\n",
        workdir=Path("/tmp"),
        tag=tag,
        environment={"PATH": BASE_PATH, "TOKEN": "s3cr3t"},
        passed=("TOKEN",),
    )
    assert scheduler.submit(request) == "41"
    (env,) = runner.environments
    assert env is not None and env["TOKEN"] == "s3cr3t" and env["PATH"] == BASE_PATH
    assert not any(arg.startswith("--export") for arg in runner.calls[0][0])
    assert "s3cr3t" not in repr(request)
    # A run that inherits: sbatch gets recon's own environment, as before.
    runner = ScriptedRunner(sbatch=[ok("42\n")])
    SlurmScheduler(runner=runner).submit(request.model_copy(update={"environment": None}))
    assert runner.environments == [None]


def context(project_dir: str = "/srv/demo") -> RenderContext:
    tag = Tag(project="demo", deployment="0123456789ab", kind="run", name="a", spec_hash="0" * 16)
    return RenderContext("demo", "/srv/demo/code", "/srv/demo/runs/a", tag, {}, {}, project_dir)


def bash(
    lines: list[str], env: dict[str, str], cwd: Path, hidden: tuple[str, ...] = ()
) -> subprocess.CompletedProcess[str]:
    """The lines run by bash as a batch script runs them; each of ``hidden`` (a path)
    absent for it, whatever the machine holds there."""
    script = "set -euo pipefail\n" + "\n".join(lines) + "\n"
    return subprocess.run(
        hiding(hidden, ["/bin/bash", "-c", script]),
        env=env, cwd=cwd, capture_output=True, text=True,
    )  # fmt: skip


def test_a_venv_is_activated_and_a_missing_one_ends_the_job(tmp_path: Path) -> None:
    from reconciler.desired.models import Environment

    venv = tmp_path / "project" / ".venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text("#!/bin/sh\necho venv-python\n")
    python.chmod(0o755)
    lines = environment_lines(
        Environment(venv=".venv"), context(project_dir=str(tmp_path / "project"))
    )
    shown = bash([*lines, "python", 'echo "$VIRTUAL_ENV"'], {"PATH": BASE_PATH}, tmp_path)
    assert shown.stdout.split() == ["venv-python", str(venv)], shown.stderr
    shutil.rmtree(venv)
    failed = bash([*lines, "echo ran"], {"PATH": BASE_PATH}, tmp_path)
    assert failed.returncode == 1 and "ran" not in failed.stdout
    assert "recon: environment.venv: no" in failed.stderr


def test_modules_without_a_module_command_end_the_job(tmp_path: Path) -> None:
    from reconciler.desired.models import Environment

    lines = environment_lines(Environment(modules=("gcc/12",)), context())
    # Hidden: a machine with Lmod or Environment Modules installed defines `module` there.
    failed = bash([*lines, "echo ran"], {"PATH": BASE_PATH}, tmp_path, hidden=MODULE_INITS)
    assert failed.returncode == 1 and "no module command (Lmod" in failed.stderr


def test_no_environment_block_unless_declared() -> None:
    assert environment_lines(None, context()) == []


def test_the_record_says_what_the_job_had_and_never_fails_it(tmp_path: Path) -> None:
    env = {"PATH": BASE_PATH, "RECON_RUN_DIR": str(tmp_path), "SLURM_JOB_ID": "7"}
    env["LOADEDMODULES"] = "gcc/12:cuda/12"
    done = bash([*ENVIRONMENT_RECORD, "echo after"], env, tmp_path)
    assert done.stdout == "after\n", done.stderr
    had = read_environment_record(tmp_path, "7")
    assert had is not None and had["modules"] == "gcc/12:cuda/12" and had["path"] == BASE_PATH
    assert had["python"].startswith("Python 3")
    array = {**env, "SLURM_ARRAY_JOB_ID": "9", "SLURM_ARRAY_TASK_ID": "2"}
    bash(list(ENVIRONMENT_RECORD), array, tmp_path)
    assert read_environment_record(tmp_path, "9_2") is not None
    (tmp_path / ".recon-run").chmod(0o500)  # unwritable: the job goes on all the same
    try:
        done = bash([*ENVIRONMENT_RECORD, "echo after"], {**env, "SLURM_JOB_ID": "8"}, tmp_path)
    finally:
        (tmp_path / ".recon-run").chmod(0o700)
    assert done.returncode == 0 and done.stdout == "after\n"


def test_the_record_of_a_job_an_earlier_release_submitted_is_read_where_it_wrote_it(
    tmp_path: Path,
) -> None:
    # That job's script has the earlier bookkeeping folder, .recon, written in it.
    (tmp_path / ".recon" / "environment").mkdir(parents=True)
    (tmp_path / ".recon" / "environment" / "5").write_text("python=Python 3.9.2\nmodules=\n")
    assert read_environment_record(tmp_path, "5") == {"python": "Python 3.9.2", "modules": ""}
    assert read_environment_record(tmp_path, "6") is None


def example_without_environment(tmp_path: Path) -> Path:
    root = tmp_path / "cartpole"
    shutil.copytree(EXAMPLE, root, ignore=shutil.ignore_patterns(".recon", "runs"))
    text = (root / "recon.yaml").read_text()
    lines = text.splitlines(keepends=True)
    kept = [line for line in lines if not line.startswith("  environment: {}")]
    assert len(kept) == len(lines) - 1, "the example declares its environment in one line"
    (root / "recon.yaml").write_text("".join(kept))
    return root


NOTE_BLOCK = "docs/specs.md: No environment declared for runs actor-learner, prepare, see"


def test_a_plan_that_submits_runs_declaring_nothing_says_so(tmp_path: Path) -> None:
    desired = load_desired(WorktreeSource(example_without_environment(tmp_path)))
    made = plan(
        desired, Observation(taken_at=NOW, jobs=(), complete=True), [], NOW, scheduler="local"
    )
    shown = shown_block(NOTE_BLOCK)
    assert shown.body.strip() in made.notes, made.notes
    # The example declares its environment: its plans have no such note.
    example = load_desired(WorktreeSource(EXAMPLE))
    quiet = plan(
        example, Observation(taken_at=NOW, jobs=(), complete=True), [], NOW, scheduler="local"
    )
    assert not [note for note in quiet.notes if "environment" in note]


def test_every_plan_warns_of_runs_that_inherit(tmp_path: Path) -> None:
    root = example_without_environment(tmp_path)
    text = (root / "recon.yaml").read_text()
    (root / "recon.yaml").write_text(
        text.replace("defaults:\n", "defaults:\n  environment:\n    inherit: true\n")
    )
    desired = load_desired(WorktreeSource(root))
    made = plan(
        desired, Observation(taken_at=NOW, jobs=(), complete=True), [], NOW, scheduler="local"
    )
    (note,) = [note for note in made.notes if "Results depend on who applies" in note]
    assert "runs actor-learner, prepare, seeds and 3 more take" in note, note


def test_the_manifest_section_names_no_passed_value(tmp_path: Path) -> None:
    from reconciler.state.provenance import environment_used

    root = project(tmp_path, {"a": "environment:\n  files: [uv.lock]\n  pass: [TOKEN]\n"})
    run = load_desired(WorktreeSource(root), cache_dir=None).runs["a"]
    used = environment_used(run, {"python": "Python 3.11.2"})
    data = json.loads(used.model_dump_json())
    assert data["passed"] == ["TOKEN"] and list(data["files"]) == ["uv.lock"]
    assert data["kind"] == "declared" and data["had"] == {"python": "Python 3.11.2"}


# The example's hashes as recon computed them before `environment:` existed (commit
# f03e355), with a `script:` run beside them: a project upgraded without declaring an
# environment, or declaring an empty one or only `inherit`, resubmits nothing.
HASHES_BEFORE = {
    "actor-learner": "c554d02f649ea644",
    "compare": "d53ebb116e495763",
    "evaluate": "a28603f8cf563114",
    "hello": "06756f0ff92b9924",
    "prepare": "ca927ea4f4b2a575",
    "seeds[lr=0.1,seed=0]": "fcffca26593e7d74",
    "seeds[lr=0.1,seed=1]": "baa011c9b4afe5d5",
    "seeds[lr=0.1,seed=2]": "940aef53bd1b0fc0",
    "seeds[lr=0.5,seed=0]": "de0ede69dbf0634a",
    "seeds[lr=0.5,seed=1]": "71f98e388a4638b5",
    "seeds[lr=0.5,seed=2]": "829f5fd187f88663",
    "train": "1093f897e193c0e4",
}


@pytest.mark.parametrize(
    "declared", ["", "  environment: {}\n", "  environment:\n    inherit: true\n"]
)
def test_upgrading_keeps_every_hash_of_a_project_that_declares_nothing(
    tmp_path: Path, declared: str
) -> None:
    root = example_without_environment(tmp_path)
    text = (root / "recon.yaml").read_text()
    (root / "recon.yaml").write_text(text.replace("defaults:\n", "defaults:\n" + declared))
    (root / "scripts" / "hello.sh").write_text('#!/bin/bash\necho hi > "$RECON_OUTPUT_OUT"\n')
    (root / "specs" / "hello.yaml").write_text(
        'kind: Run\nname: hello\nscript: scripts/hello.sh\nenv:\n  A: "1"\n'
        "outputs:\n  out: out.txt\n"
    )
    desired = load_desired(WorktreeSource(root), cache_dir=None)
    assert {name: desired.runs[name].spec_hash for name in desired.runs} == HASHES_BEFORE
    assert desired.allocations["interactive"].spec_hash == "7d2ba4655cc53acd"


def test_modules_are_loaded_in_order_when_module_is_defined(tmp_path: Path) -> None:
    from reconciler.desired.models import Environment

    lines = environment_lines(Environment(modules=("gcc/12", "cuda/12.1")), context())
    # `module` as Lmod defines it for a shell: a function, exported by the environment.
    module = {"BASH_FUNC_module%%": '() {  shift; export LOADEDMODULES="$*"; }'}
    done = bash([*lines, 'echo "$LOADEDMODULES"'], {"PATH": BASE_PATH, **module}, tmp_path)
    assert done.returncode == 0 and done.stdout == "gcc/12 cuda/12.1\n", done.stderr


def test_a_conda_env_is_activated_through_condas_own_hook(tmp_path: Path) -> None:
    from reconciler.desired.models import Environment

    home = tmp_path / "home"
    conda = home / "miniforge3" / "bin" / "conda"
    conda.parent.mkdir(parents=True)
    # What `conda shell.bash hook` prints, reduced to what activation does.
    conda.write_text(
        '#!/bin/sh\necho \'conda() { export CONDA_DEFAULT_ENV="$2"; '
        'export PATH="/envs/$2/bin:$PATH"; }\'\n'
    )
    conda.chmod(0o755)
    lines = environment_lines(Environment(conda="lab"), context())
    env = {"PATH": BASE_PATH, "HOME": str(home)}
    done = bash([*lines, 'echo "$CONDA_DEFAULT_ENV $PATH"'], env, tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"lab /envs/lab/bin:{conda.parent}:{BASE_PATH}\n"
    missing = bash([*lines, "echo ran"], {"PATH": BASE_PATH, "HOME": str(tmp_path)}, tmp_path)
    assert missing.returncode == 1 and "no conda command" in missing.stderr
