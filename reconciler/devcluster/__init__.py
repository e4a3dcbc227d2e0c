"""A real multi-node Slurm cluster on this one machine, for development and tests.

spec         what the cluster is (nodes, partitions, account, file layout); pure data
render       spec -> slurm.conf, gres.conf, cgroup.conf, slurmdbd.conf; pure text
daemons      how each daemon starts and how to recognise it in /proc; pure
health       node states from sinfo, the problems that keep the cluster from serving
accounting   MariaDB database and the sacctmgr cluster/account/user records
host         platform checks, Debian packages, directories, munge key, fake GPUs
processes    find, start and stop daemons
runner       the one function that runs external commands
lifecycle    up and down: look at what runs, start or stop the rest, wait until usable
rootfs       the Debian 13 root the Slurm 24.11 cluster, recon and its tests run in
cli          `recon dev-cluster up | down | status | run`, for 22.05 or (--slurm) 24.11
"""
