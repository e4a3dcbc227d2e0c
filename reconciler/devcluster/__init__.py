"""A real multi-node Slurm cluster on this one machine, for development and tests."""
