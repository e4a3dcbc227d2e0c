"""Run the `recon` command line in-process, the way a shell would, and capture its result."""

from __future__ import annotations

import sys
from dataclasses import dataclass

import pytest

from reconciler.cli import main


@dataclass
class Result:
    code: int
    out: str
    err: str


def recon(capsys: pytest.CaptureFixture[str], *args: str) -> Result:
    capsys.readouterr()
    saved = sys.argv
    sys.argv = ["recon", *args]
    try:
        main()
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    finally:
        sys.argv = saved
    captured = capsys.readouterr()
    return Result(code, captured.out, captured.err)
