"""Generate cart-pole-like episodes: a CSV of (state, action, reward) rows."""

import argparse
import csv
import math
import os
import random

parser = argparse.ArgumentParser()
parser.add_argument("--episodes", type=int, default=100)
parser.add_argument("--out", required=True)
parser.add_argument("--seed", type=int, default=7)
args = parser.parse_args()

rng = random.Random(args.seed)
os.makedirs(os.path.dirname(args.out) or ".", exist_ok=True)
with open(args.out, "w", newline="") as stream:
    writer = csv.writer(stream)
    writer.writerow(["episode", "step", "angle", "velocity", "action", "reward"])
    for episode in range(args.episodes):
        angle, velocity = rng.uniform(-0.05, 0.05), 0.0
        for step in range(50):
            action = 1 if angle + 0.1 * velocity > 0 else 0
            velocity += (0.02 if action else -0.02) + 0.05 * math.sin(angle)
            angle += 0.02 * velocity
            writer.writerow([episode, step, f"{angle:.5f}", f"{velocity:.5f}", action, 1])
print(f"wrote {args.episodes} episodes to {args.out}")
