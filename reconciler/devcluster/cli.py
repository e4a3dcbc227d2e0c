"""`recon dev-cluster up | down | status`."""

from __future__ import annotations

import typer

app = typer.Typer(help="Run a real Slurm cluster on this machine (root, Debian/Ubuntu).")
