"""Score a policy: how often it picks the action in the episodes."""

import argparse
import csv
import json

parser = argparse.ArgumentParser()
parser.add_argument("--model", required=True)
parser.add_argument("--data", required=True)
parser.add_argument("--out", required=True)
args = parser.parse_args()

with open(args.model) as stream:
    weights = json.load(stream)["weights"]
with open(args.data) as stream:
    rows = list(csv.DictReader(stream))
hits = sum(
    (weights[0] * float(r["angle"]) + weights[1] * float(r["velocity"]) + weights[2] > 0)
    == (r["action"] == "1")
    for r in rows
)
with open(args.out, "w") as stream:
    json.dump({"accuracy": round(hits / len(rows), 4), "rows": len(rows)}, stream, indent=2)
print(f"accuracy {hits / len(rows):.3f}")
