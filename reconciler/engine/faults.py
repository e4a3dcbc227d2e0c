"""Named fault points, so crash-safety is tested by really crashing.

`RECON_FAULT_INJECT=<point>` makes recon SIGKILL itself when it reaches that point (no
cleanup, no atexit, no journal flush: what a power cut or an OOM kill does). Unset, a
fault point costs one environment lookup.

Points: `after-sbatch` (sbatch returned a job id, the journal does not know it yet).
"""

from __future__ import annotations

import os
import signal

ENV = "RECON_FAULT_INJECT"


def fault_point(name: str) -> None:
    if os.environ.get(ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
