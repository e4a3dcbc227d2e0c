"""Sizes suggested from what the jobs used, on the real dev cluster: a sweep of three
members, each asking 1 GiB and 2 CPUs and using ~200 MiB and one CPU for 3 s of 5, is settled
with sacct's MaxRSS and TotalCPU in its journal, and `recon cost` suggests 1.5 x the most
MaxRSS sacct itself shows, rounded up to 128 MiB, and one CPU.
"""

from __future__ import annotations

import json
import math
import subprocess

import pytest

from tests.integration.harness import Project

pytestmark = pytest.mark.slurm

HUNGRY = """\
kind: Run
name: hungry
matrix:
  seed: [0, 1, 2]
resources: {cpus: 2, memory: 1GiB}
command: python3 scripts/hungry.py {outputs.out.path}
outputs:
  out: out.txt
"""
# ~200 MiB resident for 5 s, longer than the dev clusters' accounting samples
# (JobAcctGatherFrequency task=2): 3 s of one busy CPU, then 2 s idle, so that it kept
# well under one CPU busy on average whatever ElapsedRaw's whole seconds round away
SCRIPT = """\
import sys, time
block = bytearray(200 * 1024 * 1024)
for page in range(0, len(block), 4096):
    block[page] = 1
start = time.process_time()
while time.process_time() - start < 3:
    pass
time.sleep(2)
open(sys.argv[1], "w").write("fed")
"""


def max_rss_mib(project: Project) -> float:
    """The most MaxRSS sacct shows for a step of the project's jobs, in MiB."""
    ids = [job["id"] for job in project.jobs()]
    listed = subprocess.run(
        ["sacct", "-n", "-P", "-j", ",".join(ids), "-o", "JobID,MaxRSS"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    peaks = [line.split("|")[1] for line in listed.splitlines() if line.split("|")[1]]
    assert peaks and all(peak[-1] in "KMG" for peak in peaks), listed  # sacct picks the unit
    return max(float(peak[:-1]) * {"K": 1 / 1024, "M": 1, "G": 1024}[peak[-1]] for peak in peaks)


def test_recon_cost_suggests_sizes_from_sacct_max_rss_and_total_cpu(project: Project) -> None:
    project.repo.commit({"specs/hungry.yaml": HUNGRY, "scripts/hungry.py": SCRIPT})
    project.apply("--wait")

    def sized() -> bool:
        project.apply()  # settles what ended, with what it used
        shown = json.loads(project.recon("cost", ".", "--format", "json").stdout)
        return "hungry" in (shown["sizes"] or {}).get("sweeps", {})

    project.wait_for("three settled successes with what they used", sized)
    sizes = json.loads(project.recon("cost", ".", "--format", "json").stdout)["sizes"]
    hungry = sizes["sweeps"]["hungry"]
    memory, cpus = hungry["memory_mib_per_node"], hungry["cpus"]
    peak = max_rss_mib(project)
    assert hungry["jobs"] == 3 and 200 <= peak <= 400
    assert memory["needed"] == pytest.approx(peak)
    assert memory["suggested"] == math.ceil(peak * 1.5 / 128) * 128
    assert (memory["held"], memory["change"]) == (1024.0, "lower")
    # one CPU busy for 3 s of each job's 5, of the two it held
    assert (cpus["held"], cpus["suggested"], cpus["change"]) == (2.0, 1.0, "lower")
    assert 0.2 <= cpus["needed"] <= 0.66  # recon's own wrapping of the script takes time too
    # the project's default limit, 10 minutes, against a few seconds' run
    assert hungry["time_limit_seconds"]["held"] == 600.0
    assert hungry["time_limit_seconds"]["change"] == "lower"
    assert hungry["saved_cpu_hours"] > 0 and hungry["saved_memory_gib_hours"] > 0
    text = project.recon("cost", ".").stdout
    assert "hungry (sweep)" in text and "(lower)" in text
