"""`recon completion SHELL`: the shell's completion script, to source or install.

typer's own `--show-completion` guesses the shell from the parent process; a script for
a named shell is what a package, a dotfile or a test needs."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated

import typer

PROG_NAME = "recon"
# What the script sets for recon to answer with completions instead of running: click's
# name for it, made from the program's name.
COMPLETE_VARIABLE = "_RECON_COMPLETE"


class Shell(StrEnum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def completion(
    shell: Annotated[Shell, typer.Argument(metavar="SHELL", help="bash, zsh or fish.")],
) -> None:
    """Print the shell completion script for bash, zsh or fish.

    \b
    Examples:
      source <(recon completion bash)                   in ~/.bashrc
      recon completion zsh > "${fpath[1]}/_recon"       zsh, then compinit
      recon completion fish > ~/.config/fish/completions/recon.fish
    """
    from typer._completion_shared import get_completion_script

    print(get_completion_script(prog_name=PROG_NAME, complete_var=COMPLETE_VARIABLE, shell=shell))
