"""Train against the environment server on the other het component."""

import argparse
import json
import os
import socket
import time

parser = argparse.ArgumentParser()
parser.add_argument("--env-host", default=None)
parser.add_argument("--port", type=int, default=None)
parser.add_argument("--wait-for", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--steps", type=int, default=200)
args = parser.parse_args()

deadline = time.monotonic() + 120
while not os.path.exists(args.wait_for):
    if time.monotonic() > deadline:
        raise SystemExit(f"environment server never became ready ({args.wait_for})")
    time.sleep(0.2)
with open(args.wait_for) as stream:
    host, port = stream.read().split()

observations = []
with socket.create_connection((host, int(port)), timeout=30) as connection:
    channel = connection.makefile("rw")
    for _ in range(args.steps):
        channel.write("step\n")
        channel.flush()
        observations.append([float(x) for x in channel.readline().split()])
    # Said before the server is told `bye`: both write to the job's one log, and the
    # server's last line must come after this one whatever the load.
    print(f"learned from {len(observations)} steps served by {host}:{port}", flush=True)
    channel.write("bye\n")
    channel.flush()

mean = [sum(column) / len(observations) for column in zip(*observations)]
# How many GPUs the job was given, not which: a rerun on other devices writes the same
# bytes, so runs that read this output are not rerun for it.
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
gpus_seen = len(visible.split(",")) if visible else 0
os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
with open(args.out, "w") as stream:
    json.dump(
        {
            "steps": len(observations),
            "mean_observation": mean,
            "env_nodes": os.environ.get("SLURM_JOB_NODELIST_HET_GROUP_0"),
            "gpus": gpus_seen,
        },
        stream,
        indent=2,
    )
