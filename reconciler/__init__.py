"""recon: a Git-native declarative reconciler for Slurm clusters."""

__version__ = "0.1.0"
