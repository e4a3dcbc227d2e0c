"""`recon watch --metrics-addr`: a real watch on a git repo with the local backend; its
Prometheus endpoint read over HTTP before and after a commit."""

from __future__ import annotations

import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from tests.gitrepo import GitRepo
from tests.local.serving import environment, free_port

PROJECT = "project: watched\nscheduler: local\n"
OPERATIONS = Path(__file__).resolve().parents[2] / "docs" / "operations.md"


def spec(name: str, text: str) -> str:
    return (
        f"kind: Run\nname: {name}\ncommand: echo {text} > {{outputs.out.path}}\n"
        "outputs:\n  out: out.txt\n"
    )


def documented_alert_metrics() -> set[str]:
    """The metrics the alert rule docs/operations.md shows names, its YAML read as
    Prometheus would (a rule group, each rule an alert with an expression)."""
    from ruamel.yaml import YAML

    text = OPERATIONS.read_text()
    marker = "<!-- doc-test: prometheus -->\n```yaml\n"
    assert text.count(marker) == 1
    rules = YAML(typ="safe").load(text.split(marker, 1)[1].split("```", 1)[0])
    (group,) = rules["groups"]
    (rule,) = group["rules"]
    assert rule["alert"] and "> 600" in rule["expr"]  # ten minutes
    names = set(re.findall(r"\brecon_[a-z_]+", rule["expr"]))
    assert names
    return names


def scrape(port: int) -> dict[str, float]:
    """Each sample of the endpoint, by its name and labels as the text format writes them."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    samples = {}
    for line in text.splitlines():
        match = re.match(r"^([a-z_]+(?:\{[^}]*\})?) (\S+)$", line)
        if match:
            samples[match.group(1)] = float(match.group(2))
    return samples


def wait_for(port: int, want: dict[str, float], timeout: float = 60) -> dict[str, float]:
    """The samples, once each wanted one is at least the given value."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            samples = scrape(port)
        except OSError:
            samples = {}
        if all(samples.get(name, -1) >= value for name, value in want.items()):
            return samples
        assert time.monotonic() < deadline, (want, samples)
        time.sleep(0.3)


def test_the_metrics_move_when_a_commit_is_applied(tmp_path: Path) -> None:
    repo = GitRepo(tmp_path / "watched")
    repo.commit({"recon.yaml": PROJECT, "specs/a.yaml": spec("first", "one")})
    port = free_port()
    watch = subprocess.Popen(
        [sys.executable, "-m", "reconciler", "watch", ".", "--interval", "1s",
         "--metrics-addr", f"127.0.0.1:{port}"],
        cwd=repo.root, env=environment(repo.root),
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        before = wait_for(
            port,
            {
                'recon_watch_passes_total{result="ok"}': 1,
                "recon_watch_submissions_total": 1,
                'recon_runs{health="succeeded",sync="current"}': 1,
            },
        )
        assert before["recon_watch_submissions_total"] == 1
        assert before['recon_watch_passes_total{result="crashed"}'] == 0
        assert before["recon_watch_observation_failures_total"] == 0
        assert before["recon_watch_pass_duration_seconds_count"] >= 1
        assert before["recon_watch_seconds_since_last_success"] < 30
        assert before["recon_watch_last_success_timestamp_seconds"] > time.time() - 60

        repo.commit({"specs/a.yaml": spec("first", "changed") + "---\n" + spec("second", "two")})
        after = wait_for(
            port,
            {
                "recon_watch_submissions_total": 3,  # first replaced, second new
                'recon_runs{health="succeeded",sync="current"}': 2,
            },
        )
        assert (
            after['recon_watch_passes_total{result="ok"}']
            > before['recon_watch_passes_total{result="ok"}']
        )
        assert (
            after["recon_watch_pass_duration_seconds_count"]
            > before["recon_watch_pass_duration_seconds_count"]
        )
        assert after["recon_watch_teardowns_total"] == 0
        # the jobs' CPU-hours, counted as they ended (the local backend holds no GPUs)
        assert after['recon_cpu_hours_total{outcome="succeeded"}'] > 0
        assert after['recon_gpu_hours_total{outcome="succeeded"}'] == 0
        served = {re.sub(r"\{.*", "", sample) for sample in after}
        for name in documented_alert_metrics():
            assert name in served, f"docs/operations.md's alert names {name}, not served"
    finally:
        watch.terminate()
        output = watch.communicate(timeout=60)[0]
    assert watch.returncode == 0, output
