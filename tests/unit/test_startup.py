"""`recon --help` and `recon version` stay quick: loading the command line imports no engine,
no networkx, no rocrate, no web or metrics server and not the dev cluster's bring-up; each
command imports what it needs when it runs."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "reconciler.engine",
    "networkx",
    "rocrate",
    "starlette",
    "uvicorn",
    "prometheus_client",
    "reconciler.devcluster.lifecycle",
    "reconciler.devcluster.render",
)


def test_importing_the_command_line_imports_nothing_heavy() -> None:
    # A fresh interpreter: this test session has imported the engine long ago.
    probe = (
        "import json, sys; import reconciler.cli; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert json.loads(done.stdout) == []


def test_the_probe_sees_a_heavy_import_when_there_is_one() -> None:
    probe = (
        "import json, sys; import reconciler.commands.watchlog; "
        f"print(json.dumps(sorted(m for m in sys.modules if m.startswith({HEAVY!r}))))"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )
    assert "reconciler.engine.watch" in json.loads(done.stdout)
