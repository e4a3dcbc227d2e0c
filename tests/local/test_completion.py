"""Shell completion: the script `recon completion SHELL` prints, sourced in a real bash
and a real zsh, completes recon's commands and options by asking recon itself.

recon is put on PATH as a small launcher of this checkout, as an installed `recon` is;
zsh comes from Debian's package, installed by the test when missing (it fails, never
skips, when it cannot).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.programs import installed

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def path(tmp_path: Path) -> str:
    """PATH with `recon` first: this checkout's, run by this Python."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "recon"
    launcher.write_text(f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m reconciler "$@"\n')
    launcher.chmod(0o755)
    return f"{bin_dir}{os.pathsep}{os.environ['PATH']}"


def shell(argv: list[str], script: str, path: str, home: Path) -> list[str]:
    result = subprocess.run(
        [*argv, script],
        capture_output=True,
        text=True,
        timeout=60,
        env={"PATH": path, "HOME": str(home), "LANG": "C.UTF-8"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout.splitlines()


BASH = """
source <(recon completion bash)
complete -p recon
COMP_WORDS=(recon pl); COMP_CWORD=1; _recon_completion recon
echo "commands: ${COMPREPLY[*]}"
COMP_WORDS=(recon apply --auto); COMP_CWORD=2; _recon_completion recon
echo "options: ${COMPREPLY[*]}"
COMP_WORDS=(recon plan --format ''); COMP_CWORD=3; _recon_completion recon
echo "formats: ${COMPREPLY[*]}"
"""


def test_bash_completes_commands_options_and_values(path: str, tmp_path: Path) -> None:
    lines = shell(["bash", "--norc", "--noprofile", "-c"], BASH, path, tmp_path)
    assert lines == [
        "complete -o default -F _recon_completion recon",
        "commands: plan",
        "options: --auto-approve",
        "formats: text markdown json",
    ]


# compinit registers the script's `compdef`; zsh's completion widgets need a terminal, so
# `_arguments` (what the function hands recon's answer to) prints what it was given.
ZSH = """
autoload -Uz compinit && compinit -u -d "$HOME/zcompdump"
source <(recon completion zsh)
echo "registered: $_comps[recon]"
_arguments() { print -r -- "$@" }
words=(recon pl); CURRENT=2; _recon_completion
words=(recon plan --det); CURRENT=3; _recon_completion
"""


def test_zsh_completes_commands_and_options(path: str, tmp_path: Path) -> None:
    zsh = installed("zsh")
    lines = shell([zsh, "-f", "-c"], ZSH, path, tmp_path)
    assert lines[0] == "registered: _recon_completion"
    assert lines[1].startswith('*: :(("plan":"Show what apply would do')
    assert lines[2].startswith('*: :(("--detailed-exitcode":')


def test_an_unknown_shell_is_refused_with_the_choices(path: str, tmp_path: Path) -> None:
    result = subprocess.run(
        ["recon", "completion", "tcsh"],
        capture_output=True,
        text=True,
        env={"PATH": path, "HOME": str(tmp_path)},
    )
    assert result.returncode == 1
    assert "'tcsh' is not one of 'bash', 'zsh', 'fish'" in result.stderr
