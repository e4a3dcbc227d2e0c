"""Fit a linear policy (logistic regression by gradient descent) on the episodes."""

import argparse
import csv
import json
import math
import os
import random

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--out", required=True)
parser.add_argument("--epochs", type=int, default=20)
parser.add_argument("--lr", type=float, default=0.5)
parser.add_argument("--seed", type=int, default=None, help="shuffle the rows with this seed")
args = parser.parse_args()

with open(args.data) as stream:
    rows = [(float(r["angle"]), float(r["velocity"]), int(r["action"])) for r in csv.DictReader(stream)]
if args.seed is not None:
    random.Random(args.seed).shuffle(rows)

weights = [0.0, 0.0, 0.0]
for _ in range(args.epochs):
    for angle, velocity, action in rows:
        score = weights[0] * angle + weights[1] * velocity + weights[2]
        error = 1 / (1 + math.exp(-max(-30.0, min(30.0, score)))) - action
        weights = [w - args.lr * error * x for w, x in zip(weights, (angle, velocity, 1.0))]

# How many GPUs the job was given, not which: a rerun on other devices writes the same
# bytes, so runs that read this output are not rerun for it.
visible = os.environ.get("CUDA_VISIBLE_DEVICES")
gpus_seen = len(visible.split(",")) if visible else 0
os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
with open(args.out, "w") as stream:
    json.dump(
        {"weights": [round(w, 6) for w in weights], "gpus": gpus_seen},
        stream,
        indent=2,
    )
print(f"trained on {len(rows)} rows; policy in {args.out}")
