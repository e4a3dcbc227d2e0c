"""Checkpoints on the real cluster, end to end through `recon apply --wait`:

- a run that needs about 150 s of work with a one-minute time limit saves its progress
  when warned (`--signal=B:USR1@30`) and finishes after three or more requeues, with one
  output written once and a manifest listing every job; one job of it alive at any moment
  (squeue sampled all along), none counted as a failure; the same run without a
  checkpoint times out until its timeout budget is spent, and says so;
- a run on the preemptible partition, preempted by a `gpu` job that needs its node,
  resumes from its checkpoint and finishes, drawing from no budget.

Slurm's smallest time limit is a minute, it looks for jobs past theirs about every 30 s
and warns up to a minute early (docs/cli.md, time limits): minutes, not seconds, a test.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from reconciler.scheduler.tag import Tag
from reconciler.state.paths import JOURNAL_FILE
from tests.integration.harness import Project

pytestmark = pytest.mark.slurm

# One step of work a second, resumed from the count its checkpoint holds, saved after
# every step; warned (or sent SIGTERM), it saves and exits 3. Done, it writes its output
# (appended: written twice, it would say so).
COUNT = """\
kind: Run
name: count
command: |
  n=$(cat {{checkpoint.path}}/n 2>/dev/null || echo 0)
  echo "$SLURM_JOB_ID $n" >> {{checkpoint.path}}/starts
  trap 'echo $n > "$RECON_CHECKPOINT_DIR/n"; exit 3' USR1 TERM
  while [ "$n" -lt {steps} ]; do
    sleep 1 || true
    n=$((n + 1)); echo $n > "$RECON_CHECKPOINT_DIR/n.new"
    mv "$RECON_CHECKPOINT_DIR/n.new" "$RECON_CHECKPOINT_DIR/n"
  done
  printf '%s\\n' "$n" >> {{outputs.report.path}}
resources:
  cpus: 1
  memory: 100MiB
{resources}outputs:
  report: report.txt
"""
TIMED = COUNT.format(steps=150, resources='  time: "00:01:00"\n')
CHECKPOINT = "checkpoint: {path: ckpt/, signal: USR1, before_end: 30s, max_requeues: 12}\n"
# The same work, started over by each job.
PLAIN = """\
kind: Run
name: count
command: |
  n=0; while [ "$n" -lt 150 ]; do sleep 1; n=$((n + 1)); done
  echo $n > {outputs.report.path}
resources:
  cpus: 1
  memory: 100MiB
  time: "00:01:00"
retries: {timeout: 1}
outputs:
  report: report.txt
"""


class Sampler:
    """squeue sampled in a thread while a test waits: the most jobs of one project's run
    alive at once."""

    def __init__(self, project: str) -> None:
        self.project = project
        self.most = 0
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _sample(self) -> None:
        while not self._stop.is_set():
            listing = subprocess.run(
                ["squeue", "-h", "-o", "%k"], capture_output=True, text=True, check=False
            ).stdout
            tags = [Tag.parse(comment) for comment in listing.splitlines()]
            live = sum(1 for tag in tags if tag is not None and tag.project == self.project)
            self.most = max(self.most, live)
            self.samples += 1
            self._stop.wait(0.5)


def apply_wait(project: Project, timeout: float) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", "apply", ".", "--auto-approve", "--wait"],
        cwd=project.root,
        env={**os.environ, "COLUMNS": "200"},
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def endings(project: Project) -> list[tuple[str, str | None, str | None]]:
    """(job id, health, ending) of every job the journal holds, in job order."""
    with sqlite3.connect(project.root / ".recon" / JOURNAL_FILE) as db:
        rows = db.execute(
            "SELECT job_id, final_health, ending FROM submissions "
            "WHERE job_id IS NOT NULL ORDER BY CAST(job_id AS INTEGER)"
        )
        return [(str(job_id), health, ending) for job_id, health, ending in rows]


def status_row(project: Project) -> dict[str, object]:
    shown = project.recon("status", ".", "--format", "json")
    assert shown.returncode == 0, shown.stdout + shown.stderr
    (row,) = json.loads(shown.stdout)
    return dict(row)


@pytest.fixture
def high_jobs() -> Iterator[list[str]]:
    """Raw sbatch jobs a test submits; cancelled when it ends."""
    made: list[str] = []
    yield made
    if made:
        subprocess.run(["scancel", *made], capture_output=True, check=False, timeout=30)


def test_a_run_past_its_time_limit_resumes_until_done_and_without_a_checkpoint_fails(
    project: Project,
) -> None:
    project.repo.commit({"specs/count.yaml": TIMED + CHECKPOINT})
    started = time.monotonic()
    with Sampler(project.name) as sampled:
        waited = apply_wait(project, timeout=900)
    took = time.monotonic() - started
    assert waited.returncode == 0, waited.stdout + waited.stderr
    run = project.root / "runs" / "count"
    assert (run / "report.txt").read_text() == "150\n"  # written once
    starts = [line.split() for line in (run / "ckpt" / "starts").read_text().splitlines()]
    assert len(starts) >= 4, starts  # three requeues or more
    assert [int(n) for _, n in starts] == sorted(int(n) for _, n in starts)  # resumed
    assert sampled.most == 1 and sampled.samples > 100, (sampled.most, sampled.samples)
    ended = endings(project)
    assert [job_id for job_id, _, _ in ended] == [job_id for job_id, _ in starts]
    # Every job before the last ended to be resumed, none a failure of its own.
    assert all(ending in ("checkpointed", "timeout") for _, _, ending in ended[:-1]), ended
    assert ended[-1][1:] == ("succeeded", None), ended
    assert "resumes from its checkpoint" in waited.stdout, waited.stdout
    row = status_row(project)
    assert (row["sync"], row["health"], row["retry_budget"]) == ("current", "succeeded", None)
    manifest = json.loads((run / ".recon-run" / "manifest.json").read_text())
    assert [a["job_id"] for a in manifest["attempts"]] == [job_id for job_id, _ in starts]
    assert all(a["elapsed_s"] for a in manifest["attempts"]), manifest["attempts"]
    print(f"\n{len(starts)} jobs ({len(starts) - 1} requeues) in {took:.0f} s: {ended}")

    # The same work without a checkpoint: each job starts over and times out.
    project.repo.commit({"specs/count.yaml": PLAIN})
    failed = apply_wait(project, timeout=600)
    assert failed.returncode != 0, failed.stdout
    row = status_row(project)
    assert row["health"] == "failed", row
    assert "no timeout retries left (retries.timeout: 1)" in str(row["reason"]), row
    assert row["retry_budget"] == {"kind": "timeout", "shared": False, "allowed": 1, "failed": 2}
    assert [ending for _, _, ending in endings(project)][-2:] == ["timeout", "timeout"]


def test_a_preempted_run_resumes_from_its_checkpoint(
    project: Project, high_jobs: list[str]
) -> None:
    spec = COUNT.format(steps=40, resources="  partition: preempt\n  gpus: a100:4\n  time: 10\n")
    project.repo.commit({"specs/count.yaml": spec + CHECKPOINT})
    project.apply()
    saved = project.root / "runs" / "count" / "ckpt" / "n"

    def working() -> bool:
        return saved.exists() and int(saved.read_text() or 0) >= 5

    project.wait_for("the run to save 5 steps", working)
    high = subprocess.run(
        ["sbatch", "--parsable", "--partition=gpu", "--gres=gpu:a100:4", "--time=5",
         f"--job-name={project.name}-high", "--output=/dev/null", "--wrap", "sleep 5"],
        capture_output=True, text=True, check=True, timeout=30,
    ).stdout.strip()  # fmt: skip
    high_jobs.append(high)
    with Sampler(project.name) as sampled:
        waited = apply_wait(project, timeout=600)
    assert waited.returncode == 0, waited.stdout + waited.stderr
    run = project.root / "runs" / "count"
    assert (run / "report.txt").read_text() == "40\n"
    starts = [line.split() for line in (run / "ckpt" / "starts").read_text().splitlines()]
    assert len(starts) == 2 and int(starts[1][1]) >= 5, starts  # resumed where it stopped
    ended = endings(project)
    assert ended[0][2] in ("checkpointed", "preempted"), ended
    assert ended[-1][1:] == ("succeeded", None), ended
    assert sampled.most == 1, sampled.most
    row = status_row(project)
    assert (row["health"], row["retry_budget"]) == ("succeeded", None), row
    print(f"\npreempted and resumed: {ended}")
