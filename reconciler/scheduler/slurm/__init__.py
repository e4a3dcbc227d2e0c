"""The Slurm adapter: argv builders, one runner, pure parsers, and the class that joins them."""

from reconciler.scheduler.slurm.adapter import SlurmScheduler

__all__ = ["SlurmScheduler"]
