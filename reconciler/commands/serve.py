"""`recon serve`: a read-only web view of the project's runs, plan and allocations."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from reconciler.commands.common import (
    RepoArgument,
    RevisionOption,
    SchedulerOption,
    WorktreeOption,
    chosen,
    console,
    note_uncommitted,
    parse_duration,
    warn,
)
from reconciler.commands.graph import DEFAULT_LIMIT
from reconciler.errors import ReconError

TOKEN_VARIABLE = "RECON_SERVE_TOKEN"


def serve(
    repo: RepoArgument = Path("."),
    host: Annotated[
        str,
        typer.Option(
            "--host",
            metavar="ADDRESS",
            help="Listen on this address. A loopback one (127.0.0.0/8, ::1, localhost) "
            f"needs no token; any other needs one (--token-file or {TOKEN_VARIABLE}).",
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int, typer.Option("--port", min=1, max=65535, metavar="PORT", help="TCP port.")
    ] = 8470,
    interval: Annotated[
        str,
        typer.Option(
            "--interval",
            metavar="DURATION",
            help="Look at the cluster this often, however many browsers watch (10s, 1m).",
        ),
    ] = "10s",
    token_file: Annotated[
        Path | None,
        typer.Option(
            "--token-file",
            metavar="FILE",
            help=f"Require the token in FILE on every request (or set {TOKEN_VARIABLE}).",
        ),
    ] = None,
    limit: Annotated[
        int,
        typer.Option("--limit", min=1, metavar="N", help="Draw at most N nodes; the rest counted."),
    ] = DEFAULT_LIMIT,
    rev: RevisionOption = None,
    worktree: WorktreeOption = False,
    scheduler: SchedulerOption = None,
) -> None:
    """Serve a read-only web view: the run graph, each run's details, the plan, allocations.

    PROJECT is the folder holding recon.yaml (default: the current folder). Looks at the
    cluster like `recon status` (changing nothing, no journal) once per --interval in one
    background thread, and pushes changes to open pages. Listens on 127.0.0.1 only, unless
    --host names another address: on loopback (127.0.0.0/8, ::1) as it is, elsewhere only
    with a token; open the page with ?token=... once.

    \b
    Examples:
      recon serve                          http://127.0.0.1:8470/
      recon serve . --port 9000 --interval 30s
      RECON_SERVE_TOKEN=$(cat ~/.recon-token) recon serve --host 0.0.0.0
    """
    # The engine, Starlette and uvicorn are imported when serve runs: `--help` stays quick.
    from reconciler.engine.reconcile import Request, load, look_once
    from reconciler.web.app import accepted_hosts, create_app, is_loopback
    from reconciler.web.poller import Poller
    from reconciler.web.server import run_server

    seconds = parse_duration(interval).total_seconds()
    token = _token(token_file)
    if not is_loopback(host) and token is None:
        raise ReconError(
            f"--host {host} lets other machines read the view: set a token with --token-file "
            f"FILE or {TOKEN_VARIABLE}, or leave --host out to listen on 127.0.0.1 only"
        )
    request = Request(repo, rev, worktree, scheduler=chosen(scheduler))
    desired = warn(load(request))  # a bad project folder or spec fails here, not in a thread
    note_uncommitted(desired, rev, "serve")
    poller = Poller(lambda: look_once(request), seconds, graph_limit=limit)
    app = create_app(poller, token=token, hosts=accepted_hosts(host))
    shown = f"[{host}]" if ":" in host else host

    def listening() -> None:
        console.print(
            f"recon serve: http://{shown}:{port}/ for {desired.project.project}, looking "
            f"every {interval} (read-only; Ctrl-C stops)",
            highlight=False,
            soft_wrap=True,
        )

    run_server(app, host, port, on_listening=listening, on_exit=poller.halt)


def _token(path: Path | None) -> str | None:
    if path is not None:
        try:
            text = path.read_text().strip()
        except OSError as error:
            raise ReconError(f"--token-file {path}: {error.strerror or error}") from error
        if not text:
            raise ReconError(f"--token-file {path} is empty: write a long random token in it")
        return text
    text = os.environ.get(TOKEN_VARIABLE, "").strip()
    return text or None
