"""Score every policy a list names on the episodes, best first, as a CSV table."""

import argparse
import csv
import json

parser = argparse.ArgumentParser()
parser.add_argument("--data", required=True)
parser.add_argument("--list", required=True, help="a file naming one policy per line")
parser.add_argument("--out", required=True)
args = parser.parse_args()

with open(args.data) as stream:
    rows = list(csv.DictReader(stream))
with open(args.list) as stream:
    policies = [line.strip() for line in stream if line.strip()]


def accuracy(path):
    with open(path) as policy:
        weights = json.load(policy)["weights"]
    hits = sum(
        (weights[0] * float(r["angle"]) + weights[1] * float(r["velocity"]) + weights[2] > 0)
        == (r["action"] == "1")
        for r in rows
    )
    return round(hits / len(rows), 4)


scores = sorted(((accuracy(path), path) for path in policies), reverse=True)
with open(args.out, "w", newline="") as stream:
    writer = csv.writer(stream)
    writer.writerow(["accuracy", "policy"])
    writer.writerows(scores)
print(f"compared {len(scores)} policies; best {scores[0][0]:.3f}")
