"""`recon dev-cluster up | down | status`."""

from __future__ import annotations

import socket
import time
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from reconciler.devcluster.health import ClusterHealth
    from reconciler.devcluster.spec import ClusterSpec

# The bring-up (lifecycle, health, rendering) is imported when a dev-cluster command
# runs: every other recon command loads this module too, and should not pay for it.

app = typer.Typer(
    help="Run a real Slurm cluster on this machine (root, Debian/Ubuntu).", no_args_is_help=True
)


def this_cluster() -> ClusterSpec:
    """The dev cluster of this machine; its nodes are addressed by the short hostname."""
    from reconciler.devcluster.spec import default_cluster

    return default_cluster(socket.gethostname().split(".")[0])


@app.command()
def up(
    timeout: float = typer.Option(
        180, metavar="SECONDS", help="Seconds to wait for the cluster to serve jobs."
    ),
) -> None:
    """Start munge, MariaDB, slurmdbd, slurmctld and the slurmds; install them if missing."""
    from reconciler.devcluster import lifecycle

    started = time.monotonic()
    actions = lifecycle.up(this_cluster(), timeout=timeout, report=typer.echo)
    verdict = "already up" if not actions else "up"
    typer.echo(f"dev cluster {verdict} ({time.monotonic() - started:.1f} s)")


@app.command()
def down() -> None:
    """Cancel every job and stop every daemon of the dev cluster."""
    from reconciler.devcluster import lifecycle

    actions = lifecycle.down(this_cluster(), report=typer.echo)
    typer.echo("dev cluster down" if actions else "dev cluster was not running")


@app.command()
def status() -> None:
    """Show each daemon and node; exit 1 unless everything is up and every node usable."""
    from reconciler.devcluster.health import check_health

    health = check_health(this_cluster())
    typer.echo(render_health(health))
    if not health.healthy:
        raise typer.Exit(code=1)


def render_health(health: ClusterHealth) -> str:
    lines = [
        f"{daemon.name:<12} {'up' if daemon.up else 'down':<5}"
        + (f" pid {','.join(map(str, daemon.pids))}" if daemon.up else "")
        for daemon in health.daemons
    ]
    if health.nodes:
        lines += ["", f"{'NODE':<8} {'PARTITION':<10} STATE"]
        lines += [f"{n.name:<8} {n.partition:<10} {n.state}" for n in health.nodes]
    if health.problems:
        lines += ["", "problems:", *(f"  {problem}" for problem in health.problems)]
        lines.append("start it with: sudo recon dev-cluster up")
    return "\n".join(lines)
