"""Serve environment steps over TCP until the learner says it is done.

Writes HOST PORT to the --ready file once listening, which is how the learner on the
other het component finds it (Slurm's SLURM_JOB_NODELIST_HET_GROUP_0 names the node too).
"""

import argparse
import os
import random
import socket

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--ready", required=True)
parser.add_argument("--timeout", type=float, default=300)
args = parser.parse_args()

server = socket.create_server(("", args.port))
server.settimeout(args.timeout)
with open(args.ready + ".tmp", "w") as stream:
    stream.write(f"{socket.gethostname()} {server.getsockname()[1]}\n")
os.replace(args.ready + ".tmp", args.ready)
print(f"environments served on {socket.gethostname()}:{server.getsockname()[1]}", flush=True)

rng = random.Random(1)
connection, _ = server.accept()
with connection, connection.makefile("rw") as channel:
    for line in channel:
        if line.strip() == "bye":
            break
        channel.write(f"{rng.uniform(-0.05, 0.05):.5f} {rng.uniform(-0.5, 0.5):.5f}\n")
        channel.flush()
print("learner done; environments shut down")
