"""The CI, cron and systemd examples: valid YAML of the right shape, and every `recon ...`
command line in them parses with recon's own command line, so renaming a flag or a
command breaks this test instead of someone's pipeline.

The parse is click's own, on the command typer builds from `reconciler.cli.app`, after
the shell's variables are substituted. Not with `resilient_parsing=True`: that mode
ignores unknown options (it exists for shell completion), so a renamed flag would pass.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterator
from pathlib import Path
from typing import Any

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
UNITS = sorted((EXAMPLES / "cron").glob("*.service"))

# A command starts a shell line, or follows one of these.
_COMMAND_START = {";", "&&", "||", "|", "(", "$(", "!", "{", "if", "then", "else", "do", "time"}
_VARIABLE = re.compile(r"\$\{\{[^}]*\}\}|\$\{(\w+)\}|\$(\w+)")
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
            if Path(token).name == "recon" and (i == 0 or tokens[i - 1] in _COMMAND_START):
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
    )
    assert recon_commands(script, {"P": "proj"}) == [
        ["plan", "proj", "--against", "origin/main"],
        ["validate", "."],
        ["apply", "--quiet"],
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


def test_github_workflow_plans_each_pull_request_against_its_base() -> None:
    workflow = load_yaml(GITHUB)
    assert "pull_request" in workflow["on"]
    assert workflow["permissions"]["pull-requests"] == "write"
    steps = workflow["jobs"]["plan"]["steps"]
    uses = [str(step.get("uses", "")) for step in steps]
    (checkout,) = [step for step, name in zip(steps, uses, strict=True) if "checkout" in name]
    assert checkout["with"]["fetch-depth"] == 0
    assert any(name.startswith("actions/github-script") for name in uses)
    commands = parsed_commands([step["run"] for step in steps if "run" in step], workflow["env"])
    assert set(commands) == {"validate", "plan"}
    (plan,) = commands["plan"]
    assert plan["against"] == "origin/main" and plan["detailed_exitcode"]
    assert plan["output_format"].value == "markdown"


def test_gitlab_pipeline_plans_each_merge_request_against_its_target() -> None:
    pipeline = load_yaml(GITLAB)
    job = pipeline["recon-plan"]
    assert job["rules"] == [{"if": '$CI_PIPELINE_SOURCE == "merge_request_event"'}]
    assert job["variables"]["GIT_DEPTH"] == "0"
    commands = parsed_commands(job["script"], job["variables"])
    assert set(commands) == {"validate", "plan"}
    (plan,) = commands["plan"]
    assert plan["against"] == "origin/main" and plan["detailed_exitcode"]
    assert plan["output_format"].value == "markdown"
    assert any("/merge_requests/" in line and "notes" in line for line in job["script"])


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
