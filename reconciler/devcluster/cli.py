"""`recon dev-cluster up | down | status | run`, for the host's Slurm (22.05) or, with
`--slurm 24.11`, for the one in a Debian 13 root (rootfs.py)."""

from __future__ import annotations

import os
import socket
import time
from typing import TYPE_CHECKING

import typer

from reconciler.devcluster.spec import HOST_RELEASE

if TYPE_CHECKING:
    from reconciler.devcluster.health import ClusterHealth
    from reconciler.devcluster.spec import ClusterSpec

# The bring-up (lifecycle, health, rendering) is imported when a dev-cluster command
# runs: every other recon command loads this module too, and should not pay for it.

app = typer.Typer(
    help="Run a real Slurm cluster on this machine (root, Debian/Ubuntu).", no_args_is_help=True
)


def this_cluster() -> ClusterSpec:
    """The dev cluster of where this runs (the host, or a Debian 13 root); its nodes are
    addressed by the short hostname."""
    from reconciler.devcluster.rootfs import release_here
    from reconciler.devcluster.spec import GPU_FORMS_VARIABLE, HOST_RELEASE, cluster_for

    return cluster_for(
        release_here() or HOST_RELEASE,
        socket.gethostname().split(".")[0],
        gpu_forms=os.environ.get(GPU_FORMS_VARIABLE) == "1",
    )


SLURM = typer.Option(
    None,
    "--slurm",
    metavar="RELEASE",
    help="22.05: the host's own Slurm (the default on the host). "
    "24.11: Debian 13's, in a Debian 13 root under /var/lib/recon-dev/trixie.",
)


COMMAND = typer.Argument(..., metavar="COMMAND...", help="What to run, with its arguments.")


def _in_root_instead(release: str | None) -> bool:
    """Whether the command is for the Debian 13 root's cluster while we run on the host.

    Inside that root the command is carried out there as on the host, for its cluster."""
    from reconciler.devcluster.rootfs import release_here
    from reconciler.devcluster.spec import HOST_RELEASE, RELEASES

    here = release_here() or HOST_RELEASE
    if release is None or release == here:
        return False
    if release not in RELEASES:
        raise typer.BadParameter(
            f"no dev cluster for Slurm {release!r}: choose one of {', '.join(RELEASES)}",
            param_hint="--slurm",
        )
    if here != HOST_RELEASE:
        raise typer.BadParameter(
            f"this is the Debian 13 root of the Slurm {here} dev cluster; the {release} "
            "one is the host's: run the command outside the root",
            param_hint="--slurm",
        )
    return True


@app.command()
def up(
    timeout: float = typer.Option(
        180, metavar="SECONDS", help="Seconds to wait for the cluster to serve jobs."
    ),
    slurm: str | None = SLURM,
) -> None:
    """Start munge, MariaDB, slurmdbd, slurmctld and the slurmds; install them if missing."""
    if _in_root_instead(slurm):
        from reconciler.devcluster import rootfs
        from reconciler.devcluster.host import check_platform

        check_platform()
        with rootfs.locked():
            rootfs.ensure_root(typer.echo)
        code = rootfs.recon_inside(["dev-cluster", "up", f"--timeout={timeout:g}"])
        if code:
            raise typer.Exit(code=code)
        return
    from reconciler.devcluster import lifecycle

    started = time.monotonic()
    actions = lifecycle.up(this_cluster(), timeout=timeout, report=typer.echo)
    verdict = "already up" if not actions else "up"
    typer.echo(f"dev cluster {verdict} ({time.monotonic() - started:.1f} s)")


@app.command()
def down(slurm: str | None = SLURM) -> None:
    """Cancel every job and stop every daemon of the dev cluster."""
    if _in_root_instead(slurm):
        from reconciler.devcluster import rootfs
        from reconciler.devcluster.host import check_platform

        check_platform()
        with rootfs.locked():
            if not rootfs.is_built() or not rootfs.daemons_may_run():
                rootfs.unmount_all(typer.echo)
                typer.echo("dev cluster was not running")
                return
            # A shared folder missing or stale (say /work made anew) stops no daemon, but
            # recon inside needs its source tree to stop them: mount what is not there.
            rootfs.ensure_mounts(typer.echo)
            code = rootfs.recon_inside(["dev-cluster", "down"])
            if code:
                raise typer.Exit(code=code)
            rootfs.unmount_all(typer.echo)
        return
    from reconciler.devcluster import lifecycle

    actions = lifecycle.down(this_cluster(), report=typer.echo)
    typer.echo("dev cluster down" if actions else "dev cluster was not running")


@app.command()
def status(slurm: str | None = SLURM) -> None:
    """Show each daemon and node; exit 1 unless everything is up and every node usable."""
    if _in_root_instead(slurm):
        from reconciler.devcluster import rootfs

        problem = rootfs.not_ready()
        if problem:
            typer.echo(f"{problem}\nstart it with: sudo recon dev-cluster up --slurm {slurm}")
            raise typer.Exit(code=1)
        code = rootfs.recon_inside(["dev-cluster", "status"])
        if code:
            raise typer.Exit(code=code)
        return
    from reconciler.devcluster.health import check_health

    cluster = this_cluster()
    health = check_health(cluster)
    typer.echo(render_health(health, cluster.slurm_release))
    if not health.healthy:
        raise typer.Exit(code=1)


@app.command(
    context_settings={"allow_extra_args": True, "ignore_unknown_options": True},
)
def run(
    command: list[str] = COMMAND,
    slurm: str | None = SLURM,
) -> None:
    """Run a command where a release's Slurm commands and recon's Python are: with
    --slurm 24.11, inside the Debian 13 root, in the same directory, its exit code ours."""
    if not _in_root_instead(slurm):
        from reconciler.devcluster.runner import run_attached

        raise typer.Exit(code=run_attached(command))
    from reconciler.devcluster import rootfs

    problem = rootfs.not_ready()
    if problem:
        typer.echo(f"{problem}\nstart it with: sudo recon dev-cluster up --slurm {slurm}", err=True)
        raise typer.Exit(code=1)
    raise typer.Exit(code=rootfs.run_inside(command))


def render_health(health: ClusterHealth, release: str | None = None) -> str:
    lines = [
        f"{daemon.name:<12} {'up' if daemon.up else 'down':<5}"
        + (f" pid {','.join(map(str, daemon.pids))}" if daemon.up else "")
        for daemon in health.daemons
    ]
    if health.nodes:
        lines += ["", f"{'NODE':<8} {'PARTITIONS':<12} STATE"]
        lines += [f"{n.name:<8} {','.join(n.partitions):<12} {n.state}" for n in health.nodes]
    if health.problems:
        lines += ["", "problems:", *(f"  {problem}" for problem in health.problems)]
        flag = f" --slurm {release}" if release not in (None, HOST_RELEASE) else ""
        lines.append(f"start it with: sudo recon dev-cluster up{flag}")
    return "\n".join(lines)
