"""`recon watch` and cron-style `recon apply` on the real dev cluster, run as a user would.

Each test owns a temporary git repo with a project name of its own (the integration
harness: its jobs are found by their tag in sacct and squeue, cancelled or not, and
cancelled at the end). The commit-to-sbatch latency is printed (`pytest -s`) and bounded.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.state.lock import project_lock
from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm

TIMEOUT = 60.0
# "Within seconds": the watcher's quiet period, a pass (squeue, sacct, sbatch) and slack.
MAX_LATENCY_SECONDS = 10.0
RUNS = 20


class Watch:
    """A `recon watch` subprocess and the JSON lines it has logged so far."""

    def __init__(self, project: Project, *args: str, env: dict[str, str] | None = None) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "reconciler", "watch", ".", "--interval", "2s",
             "--log-format", "json", *args],
            cwd=project.root, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, **(env or {})},
        )  # fmt: skip
        self.lines: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self.seen: list[dict[str, Any]] = []
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(json.loads(line))

    def wait_for(
        self, event: str, where: Callable[[dict[str, Any]], bool] = lambda _: True
    ) -> dict[str, Any]:
        """The first line (from now on) of this event that matches."""
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.process.poll() is not None:
                    break
                continue
            self.seen.append(line)
            if line["event"] == event and where(line):
                return line
        raise AssertionError(f"no {event} line; the watch said: {self.seen} {self.stderr()}")

    def stderr(self) -> str:
        if self.process.poll() is None or self.process.stderr is None:
            return ""
        return self.process.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=10)


@pytest.fixture
def project(project: Project) -> Project:
    """The harness's project with its recon.yaml committed: a watch follows commits."""
    project.repo.commit(message="project")
    return project


@pytest.fixture
def watch(project: Project) -> Iterator[Watch]:
    started = Watch(project)
    yield started
    started.stop()


def at(line: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(line["time"])


def test_new_commit_is_submitted_within_seconds_and_sigterm_mid_pass_ends_cleanly(
    project: Project, watch: Watch
) -> None:
    watch.wait_for("pass")  # the first pass, of the commit without runs

    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 120")})
    committed = datetime.now(UTC)
    submitted = watch.wait_for("submitted", lambda line: line["run"] == "a")
    latency = (at(submitted) - committed).total_seconds()
    print(f"\ncommit -> sbatch latency: {latency:.2f} s")
    assert 0 < latency < MAX_LATENCY_SECONDS
    assert [run for run, _ in project.runs()] == ["a"]

    # Many runs in one commit make a pass of many sbatch calls; SIGTERM once the first
    # of them shows in squeue, so the signal lands in the middle of that pass.
    project.repo.commit(
        {f"specs/b{i:02}.yaml": run_spec(f"b{i:02}", "sleep 120") for i in range(RUNS)}
    )
    deadline = time.monotonic() + TIMEOUT
    while not project.queued("b"):
        assert time.monotonic() < deadline, f"no b job submitted; the watch said {watch.seen}"
        time.sleep(0.01)
    signalled, signalled_at = time.monotonic(), datetime.now(UTC)
    watch.process.send_signal(signal.SIGTERM)
    code = watch.process.wait(timeout=30)
    took = time.monotonic() - signalled
    assert code == 0, watch.stderr()
    assert took < 10
    watch.wait_for("stopped")
    last_pass = [line for line in watch.seen if line["event"] == "pass"][-1]
    mid_pass = at(last_pass) > signalled_at
    print(f"SIGTERM -> exit 0 in {took:.2f} s; the signal came mid-pass: {mid_pass}")
    assert mid_pass, "the pass ended before the signal: nothing was interrupted"

    # The pass that was interrupted finished: every run has one job; and the lock is free.
    after = project.recon("apply", ".", "--auto-approve", "--lock-timeout", "0")
    assert after.returncode == 0, after.stdout + after.stderr
    runs = project.runs()
    assert [run for run, _ in runs] == ["a", *(f"b{i:02}" for i in range(RUNS))], runs
    assert len(set(runs)) == len(runs)  # one job per run and spec hash


def test_watch_backs_off_while_another_apply_holds_the_lock(project: Project, watch: Watch) -> None:
    watch.wait_for("pass")
    with project_lock(project.root / ".recon", 0, purpose="cron apply"):
        project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 120")})
        retry = watch.wait_for("retry")
        assert retry["error"] == "LockedError" and "cron apply" in retry["message"]
        assert project.jobs() == []
    released = datetime.now(UTC)
    submitted = watch.wait_for("submitted", lambda line: line["run"] == "a")
    assert (at(submitted) - released).total_seconds() < MAX_LATENCY_SECONDS
    assert watch.process.poll() is None  # a held lock never ends the loop
    assert [run for run, _ in project.runs()] == ["a"]


def test_a_bad_commit_is_logged_and_the_next_one_applied(project: Project, watch: Watch) -> None:
    watch.wait_for("pass")
    project.repo.commit({"specs/a.yaml": "kind: Run\nname: a\nresources: {cpus: many}\n"})
    error = watch.wait_for("spec-error")
    assert error["level"] == "error" and "specs/a.yaml" in error["message"]
    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 120")})
    watch.wait_for("submitted", lambda line: line["run"] == "a")
    assert watch.process.poll() is None


def test_watch_notifies_a_failed_run(project: Project, tmp_path: Path) -> None:
    received = tmp_path / "received.jsonl"
    watch = Watch(project, "--notify", f"cat >> {received}")
    try:
        project.repo.commit({"specs/a.yaml": run_spec("a", "exit 3")})
        (job,) = [watch.wait_for("submitted")["job_id"]]
        deadline = time.monotonic() + TIMEOUT
        while '"run-failed"' not in (received.read_text() if received.exists() else ""):
            assert time.monotonic() < deadline, f"no run-failed; the watch said {watch.seen}"
            time.sleep(0.5)
    finally:
        watch.stop()
    events = [json.loads(line) for line in received.read_text().splitlines()]
    (failed,) = [e for e in events if e["event"] == "run-failed"]
    assert (failed["project"], failed["run"], failed["job_id"]) == (project.name, "a", job)
    assert "exit code 3" in failed["message"]
    assert any(e["event"] == "apply-finished" and e["counts"]["submitted"] == 1 for e in events)


def test_watch_outlives_passes_that_raise_and_tells_of_the_crash_loop(
    project: Project, tmp_path: Path
) -> None:
    received = tmp_path / "received.jsonl"
    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 120")})
    watch = Watch(
        project, "--notify", f"cat >> {received}", env={"RECON_FAULT_INJECT": "pass-start:raise:3"}
    )
    try:
        crashes = [watch.wait_for("pass-crashed") for _ in range(3)]
        recovered = watch.wait_for("recovered")
        submitted = watch.wait_for("submitted", lambda line: line["run"] == "a")
        assert watch.process.poll() is None
    finally:
        watch.stop()
    assert [c["failures"] for c in crashes] == [1, 2, 3]
    assert [c["delay"] for c in crashes] == [1, 2, 4]
    assert all(c["level"] == "error" and c["error"] == "InjectedFault" for c in crashes)
    assert "Traceback (most recent call last)" in crashes[0]["traceback"]
    assert "reconcile_once" in crashes[0]["traceback"]
    assert recovered["failures"] == 3
    assert [run for run, _ in project.runs()] == ["a"] and submitted["job_id"]
    events = [json.loads(line) for line in received.read_text().splitlines()]
    (failing,) = [e for e in events if e["event"] == "watch-failing"]
    assert failing["project"] == project.name
    assert failing["message"].startswith("3 passes in a row failed, still retrying; last: ")


# -- cron: `recon apply --auto-approve --quiet` every minute -----------------------------


def test_quiet_apply_prints_only_what_changed(project: Project) -> None:
    quiet = ("apply", ".", "--auto-approve", "--quiet", "--lock-timeout", "30")
    # (A project with no runs at all is warned about on stderr, quiet or not.)
    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 120")})
    changed = project.recon(*quiet)
    assert changed.returncode == 0, changed.stderr
    lines = changed.stdout.splitlines()
    assert lines[0].startswith("submitted a: job ") and lines[-1].startswith("Apply complete")
    assert "Plan:" not in changed.stdout  # the plan itself is not repeated every minute

    again = project.recon(*quiet)
    assert (again.returncode, again.stdout, again.stderr) == (0, "", "")


def test_overlapping_cron_apply_exits_with_the_lock_code_on_stderr(project: Project) -> None:
    project.repo.commit({"specs/a.yaml": run_spec("a", "sleep 120")})
    with project_lock(project.root / ".recon", 0, purpose="watch"):
        started = time.monotonic()
        result = project.recon("apply", ".", "--auto-approve", "--quiet", "--lock-timeout", "1")
        waited = time.monotonic() - started
    assert result.returncode == 3
    assert result.stdout == ""
    assert "holds the lock" in result.stderr and "watch" in result.stderr
    assert 1 <= waited < 30
    assert project.jobs() == []
