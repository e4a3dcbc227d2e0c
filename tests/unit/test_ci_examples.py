"""The CI, cron and systemd examples, the GitHub Action (action.yml) and the GitLab CI
component (templates/): valid for their CI's own schema (schemastore's, as
check-jsonschema vendors them), of the right shape, and every `recon ...` command line in
them parses with recon's own command line, so renaming a flag or a command breaks this
test instead of someone's pipeline. tests/e2e/test_ci_action.py runs the action and the
component.

The parse is click's own, on the command typer builds from `reconciler.cli.app`, after
the shell's variables are substituted. Not with `resilient_parsing=True`: that mode
ignores unknown options (it exists for shell completion), so a renamed flag would pass.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Iterator
from importlib import resources
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import typer
import typer.core
import typer.main
from ruamel.yaml import YAML

from reconciler.cli import app

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
GITHUB = EXAMPLES / "ci" / "github-actions.yml"
GITLAB = EXAMPLES / "ci" / "gitlab-ci.yml"
CRONTAB = EXAMPLES / "cron" / "crontab"
ACTION = EXAMPLES.parent / "action.yml"
COMPONENT = EXAMPLES.parent / "templates" / "recon-plan.yml"
UNITS = sorted((EXAMPLES / "cron").glob("*.service"))

# A command starts a shell line, or follows one of these.
_COMMAND_START = {";", "&&", "||", "|", "(", "$(", "!", "{", "if", "then", "else", "do", "time"}
_VARIABLE = re.compile(r"\$\{\{[^}]*\}\}|\$\{(\w+)\}|\$(\w+)")
_ASSIGNMENT = re.compile(r"[A-Za-z_]\w*=.*")
_HEREDOC = re.compile(r"<<-?\s*['\"]?(\w+)['\"]?")


def load_yaml(path: Path) -> Any:
    return YAML(typ="safe").load(path.read_text(encoding="utf-8"))


def substitute(line: str, values: dict[str, str]) -> str:
    """`$VAR`, `${VAR}` and `${{ expression }}` replaced as a shell (or the CI) would."""

    def value(match: re.Match[str]) -> str:
        name = match.group(1) or match.group(2)
        return values.get(name, "main") if name else "main"

    return _VARIABLE.sub(value, line)


def shell_lines(script: str) -> Iterator[str]:
    """The lines of a shell script, continuations joined and here-document bodies left
    out (they are another language's text)."""
    lines = iter(script.replace("\\\n", " ").splitlines())
    for line in lines:
        yield line
        heredoc = _HEREDOC.search(line)
        if heredoc:
            for body in lines:
                if body.strip() == heredoc.group(1):
                    break


def recon_commands(script: str, values: dict[str, str]) -> list[list[str]]:
    """Every `recon` invocation in a shell script: its arguments, variables substituted."""
    found = []
    for line in shell_lines(script):
        lexer = shlex.shlex(substitute(line, values), posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""
        tokens = list(lexer)
        comment = next((i for i, token in enumerate(tokens) if token.startswith("#")), None)
        tokens = tokens[:comment]
        for i, token in enumerate(tokens):
            before = i
            while before > 0 and _ASSIGNMENT.fullmatch(tokens[before - 1]):
                before -= 1  # `PATH=... recon`: variables set for the command
            if Path(token).name == "recon" and (
                before == 0 or tokens[before - 1] in _COMMAND_START
            ):
                found.append(_arguments(tokens[i + 1 :]))
    return found


def _arguments(tokens: list[str]) -> list[str]:
    """The tokens up to the end of the command (an operator or a redirection)."""
    args: list[str] = []
    for token in tokens:
        if set(token) <= set("();<>|&"):
            if token[0] in "<>" and args and args[-1].isdigit():
                args.pop()  # `2>` is a redirection of stderr, not an argument
            break
        args.append(token)
    return args


def parse(args: list[str]) -> dict[str, Any]:
    """Parse `recon ARGS` the way the real command line does; raise on a bad flag."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    name, *rest = args
    with group.make_context("recon", [name], resilient_parsing=True) as context:
        command = group.get_command(context, name)
        if command is None:
            raise LookupError(f"recon has no command {name!r}")
        with command.make_context(name, list(rest), parent=context) as sub:
            return dict(sub.params)


def parsed_commands(scripts: list[str], values: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
    by_name: dict[str, list[dict[str, Any]]] = {}
    for script in scripts:
        for args in recon_commands(script, values):
            by_name.setdefault(args[0], []).append(parse(args))
    return by_name


# -- the checker itself ------------------------------------------------------------------


def test_the_checker_finds_commands_where_a_shell_runs_them() -> None:
    script = (
        "pip install recon\n"
        'code=0; recon plan "$P" --against "origin/${{ github.base_ref }}" > plan.md || code=$?\n'
        "if ! recon validate .; then exit 1; fi  # recon apply in a comment\n"
        "python3 - <<'EOF'\nrecon apply --not-shell\nEOF\n"
        "/opt/recon/bin/recon apply --quiet 2>&1 | logger\n"
        "cd /srv && PATH=/usr/bin recon status\n"
    )
    assert recon_commands(script, {"P": "proj"}) == [
        ["plan", "proj", "--against", "origin/main"],
        ["validate", "."],
        ["apply", "--quiet"],
        ["status"],
    ]


@pytest.mark.parametrize(
    "args",
    [["plan", "--against-rev", "x"], ["apply", "--quiet-please"], ["plans", "."]],
    ids=["renamed-flag", "unknown-flag", "renamed-command"],
)
def test_a_renamed_flag_or_command_fails_the_parse(args: list[str]) -> None:
    with pytest.raises((typer.TyperException, LookupError), match=r"No such|no command"):
        parse(args)


def test_a_bad_value_fails_the_parse() -> None:
    with pytest.raises(typer.TyperException, match="markdwn"):
        parse(["plan", "--format", "markdwn"])


# -- the examples ------------------------------------------------------------------------


def schema_errors(document: Any, schema: str) -> list[str]:
    """What schemastore's schema (vendored by check-jsonschema: no network) finds wrong."""
    text = resources.files("check_jsonschema.builtin_schemas.vendor").joinpath(schema)
    loaded = json.loads(text.read_text(encoding="utf-8"))
    validator = jsonschema.validators.validator_for(loaded)(loaded)
    return [
        f"{list(error.absolute_path)}: {error.message}" for error in validator.iter_errors(document)
    ]


def component_documents() -> tuple[dict[str, Any], dict[str, Any]]:
    """The component's header (spec:) and its jobs: two YAML documents."""
    spec, jobs = YAML(typ="safe").load_all(COMPONENT.read_text(encoding="utf-8"))
    return spec, jobs


def test_the_action_is_valid_for_github() -> None:
    action = load_yaml(ACTION)
    assert schema_errors(action, "github-actions.json") == []
    assert action["runs"]["using"] == "composite"
    broken = {**action, "runs": {**action["runs"], "using": "compsite"}}
    assert schema_errors(broken, "github-actions.json"), "the schema check finds nothing"


def test_the_component_is_valid_for_gitlab() -> None:
    spec, jobs = component_documents()
    assert schema_errors(spec, "gitlab-ci.json") == []
    assert schema_errors(jobs, "gitlab-ci.json") == []
    assert set(spec["spec"]["inputs"]) == {
        "stage",
        "project",
        "package",
        "image",
        "fail_on_changes",
        "durations",
    }
    broken = {"spec": {**spec["spec"], "input": spec["spec"]["inputs"]}}  # a misspelt key
    assert schema_errors(broken, "gitlab-ci.json"), "the schema check finds nothing"


@pytest.mark.parametrize(
    ("path", "schema"),
    [(GITHUB, "github-workflows.json"), (GITLAB, "gitlab-ci.json")],
    ids=["github", "gitlab"],
)
def test_the_examples_are_valid_for_their_ci(path: Path, schema: str) -> None:
    assert schema_errors(load_yaml(path), schema) == []


def test_the_action_plans_against_the_base_in_markdown() -> None:
    action = load_yaml(ACTION)
    scripts = [step["run"] for step in action["runs"]["steps"]]
    commands = parsed_commands(scripts, {"PROJECT": ".", "BASE": "origin/main"})
    assert set(commands) == {"plan"}
    (plan,) = commands["plan"]
    assert plan["against"] == "origin/main" and plan["detailed_exitcode"]
    assert plan["output_format"].value == "markdown"
    # Inputs reach the shell through env only: a branch name is text, not code.
    assert not any("${{" in script for script in scripts)
    # the durations input reaches recon plan as its --durations, by the variable it reads
    (step,) = [step for step in action["runs"]["steps"] if step.get("id") == "plan"]
    assert step["env"]["RECON_DURATIONS"] == "${{ inputs.durations }}"
    assert action["inputs"]["durations"]["default"] == ""
    assert option_envvar("plan", "durations") == "RECON_DURATIONS"


def option_envvar(command: str, option: str) -> str | None:
    """The variable a command's option is read from when not given."""
    group = typer.main.get_command(app)
    assert isinstance(group, typer.core.TyperGroup)
    with group.make_context("recon", [command], resilient_parsing=True) as context:
        found = group.get_command(context, command)
    assert found is not None
    (param,) = [p for p in found.params if p.name == option]
    return param.envvar if isinstance(param.envvar, str) else None


def test_the_component_plans_each_merge_request_against_its_target() -> None:
    _, jobs = component_documents()
    (job,) = jobs.values()
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    commands = parsed_commands(job["script"], {"RECON_PROJECT": "."})
    assert set(commands) == {"plan"}
    (plan,) = commands["plan"]
    assert plan["against"] == "origin/main" and plan["detailed_exitcode"]
    assert plan["output_format"].value == "markdown"
    assert job["variables"]["RECON_DURATIONS"] == "$[[ inputs.durations ]]"


def test_the_examples_use_the_action_and_the_component() -> None:
    workflow = load_yaml(GITHUB)
    assert "pull_request" in workflow["on"]
    assert workflow["permissions"]["pull-requests"] == "write"
    uses = [str(step.get("uses", "")) for step in workflow["jobs"]["plan"]["steps"]]
    assert uses[0].startswith("actions/checkout@") and "OWNER/recon@v0.1.0" in uses
    pipeline = load_yaml(GITLAB)
    (included,) = pipeline["include"]
    name = COMPONENT.name.removesuffix(".yml")
    assert included["component"] == f"$CI_SERVER_FQDN/OWNER/recon/{name}@0.1.0"
    spec, _ = component_documents()
    assert set(included["inputs"]) <= set(spec["spec"]["inputs"])


@pytest.mark.parametrize("path", [GITHUB, GITLAB], ids=["github", "gitlab"])
def test_ci_examples_document_every_exit_code(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    for code in "0123":
        assert re.search(rf"^#\s+{code}\s+\S", text, re.MULTILINE), f"exit code {code}"


def test_crontab_applies_quietly_with_a_lock_timeout_and_no_flock() -> None:
    lines = [
        line
        for line in CRONTAB.read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.lstrip().startswith("#") and "=" not in line.split()[0]
    ]
    (entry,) = lines
    schedule, command = entry.split()[:5], " ".join(entry.split()[5:])
    assert schedule == ["*"] * 5
    assert "flock" not in command
    (apply,) = parsed_commands([command], {})["apply"]
    assert apply["auto_approve"] and apply["quiet"] and apply["lock_timeout"] == 30


def test_systemd_units_run_commands_recon_accepts() -> None:
    commands: dict[str, list[dict[str, Any]]] = {}
    for unit in UNITS:
        starts = [
            line.removeprefix("ExecStart=")
            for line in unit.read_text(encoding="utf-8").splitlines()
            if line.startswith("ExecStart=")
        ]
        assert len(starts) == 1, unit
        for name, parsed in parsed_commands(starts, {}).items():
            commands.setdefault(name, []).extend(parsed)
    (watch,) = commands["watch"]
    assert watch["branch"] == "main" and watch["pull"] and watch["log_format"].value == "json"
    (apply,) = commands["apply"]
    assert apply["auto_approve"] and apply["quiet"]
    timer = (EXAMPLES / "cron" / "recon-apply.timer").read_text(encoding="utf-8")
    assert "OnCalendar=minutely" in timer
