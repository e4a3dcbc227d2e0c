"""Tests that start real processes on this machine (the local backend, recon as a
subprocess, notifier commands, lock holders): no Slurm needed, so they run everywhere."""
