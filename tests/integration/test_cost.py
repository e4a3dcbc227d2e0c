"""`recon cost` on the real dev cluster: each figure equals what sacct says of the jobs.

A project with a GPU run, a sweep of two members, a run that fails twice (its attempt and
its one retry), a het run torn down after its GPU half failed, and an allocation whose
one run ends and which is then left idle until a commit drops it (released: a prune).
The test reads sacct itself (``AllocTRES`` times ``ElapsedRaw``, the allocation's steps'
``Start`` and ``End``) and sums each category its own way, then holds `recon cost
--format json` to those sums.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Iterable

import pytest

from reconciler.scheduler.tag import Tag
from tests.integration.harness import Project, run_spec

pytestmark = pytest.mark.slurm

GPU = (
    "kind: Run\nname: gpu\ncommand: 'sleep 3; echo ok > {outputs.out.path}'\n"
    "resources:\n  partition: gpu\n  cpus: 1\n  memory: 100MiB\n  gpus: 'a100:1'\n"
    "outputs:\n  out: out.txt\n"
)
SWEEP = (
    "kind: Run\nname: train\nmatrix:\n  seed: [0, 1]\nresources:\n  cpus: 1\n  memory: 100MiB\n"
    "command: 'sleep 2; echo {matrix.seed} > {outputs.model.path}'\noutputs:\n  model: model.txt\n"
)
HET = (
    "kind: Run\nname: het\n"
    "command: 'srun --het-group=0 sleep 300 &"
    ' srun --het-group=1 bash -c "sleep 2; exit 3" & wait\'\n'
    "resources:\n  time: 10\n  components:\n"
    "    - {partition: cpu, cpus: 1, memory: 100MiB}\n"
    '    - {partition: gpu, cpus: 1, memory: 100MiB, gpus: "a100:2"}\n'
    "outputs:\n  out: out.txt\n"
)
WARM = (
    "kind: Allocation\nname: warm\nresources:\n  partition: cpu\n  cpus: 2\n  memory: 500MiB\n"
    "time_limit: 10m\nmin_remaining: 1m\n"
)
FIRST = (
    "kind: Run\nname: first\nallocation: warm\ncommand: 'sleep 2; echo 1 > {outputs.out.path}'\n"
    "resources:\n  cpus: 1\n  memory: 100MiB\n  time: 2m\noutputs:\n  out: out.txt\n"
)
STATES = "BF,CA,CD,DL,F,NF,OOM,PD,PR,R,RQ,RS,RV,S,TO"
OWN_STEPS = {"batch", "extern", "interactive"}


def recon(project: Project, *args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "reconciler", *args],
        cwd=project.root,
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def sacct_rows(project: Project) -> list[dict[str, str]]:
    """Every row (steps too) of the project's jobs, as sacct prints them."""
    fields = "JobID,JobIDRaw,State,ElapsedRaw,AllocTRES,Start,End,JobName,Comment"
    listing = subprocess.run(
        ["sacct", "-n", "-P", "-S", "now-1hours", "-E", "now", "-s", STATES, "-o", fields],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    rows = [
        dict(zip(fields.split(","), line.split("|"), strict=True)) for line in listing.splitlines()
    ]
    ours: set[str] = set()
    for row in rows:
        tag = Tag.parse(row["Comment"])
        if tag is not None and tag.project == project.name:
            ours.add(_top(row["JobID"]))
    return [row for row in rows if _top(row["JobID"]) in ours]


def _top(job_id: str) -> str:
    return job_id.split(".")[0].split("+")[0].split("_")[0]


def _tres(text: str, key: str) -> int:
    counts = dict(item.split("=", 1) for item in text.split(",") if "=" in item)
    return int(counts.get(key, "0"))


def held_hours(rows: Iterable[dict[str, str]], key: str) -> float:
    """sum of count (``gres/gpu`` or ``cpu``) times ElapsedRaw over job-level rows, hours."""
    return (
        sum(
            _tres(row["AllocTRES"], key) * int(row["ElapsedRaw"] or 0)
            for row in rows
            if "." not in row["JobID"]
        )
        / 3600
    )


def run_of(row: dict[str, str], rows: list[dict[str, str]]) -> str:
    tags = {_top(r["JobID"]): Tag.parse(r["Comment"]) for r in rows if Tag.parse(r["Comment"])}
    tag = tags[_top(row["JobID"])]
    assert tag is not None
    return tag.name


def test_recon_cost_matches_sacct_for_each_category(project: Project) -> None:
    project.repo.commit(
        {
            "specs/gpu.yaml": GPU,
            "specs/train.yaml": SWEEP,
            "specs/flaky.yaml": run_spec("flaky", "sleep 1; exit 3", extra="retries: 1\n"),
            "specs/het.yaml": HET,
            "specs/warm.yaml": WARM,
            "specs/first.yaml": FIRST,
        }
    )
    waited = recon(project, "apply", ".", "--auto-approve", "--wait")
    assert "flaky" in waited.stdout + waited.stderr, waited.stdout + waited.stderr
    # The allocation is held idle for a while, then dropped from the repo: released.
    time.sleep(5)
    for spec in ("specs/warm.yaml", "specs/first.yaml"):
        (project.root / spec).unlink()
    project.repo.commit(message="drop warm")
    project.apply("--allow-prune-all")  # its one live job: the guard asks to confirm

    def settled() -> bool:
        project.apply()  # settles what ended into the journal, usage included
        # offline: a job still running is then not counted, only said
        shown = json.loads(recon(project, "cost", ".", "--offline", "--format", "json").stdout)
        return shown["jobs_running"] == 0 and bool(shown["allocations"])

    project.wait_for("every job to end and be settled", settled)
    cost = json.loads(recon(project, "cost", ".", "--format", "json").stdout)
    assert cost["jobs_without_usage"] == 0, cost

    rows = sacct_rows(project)
    jobs = [row for row in rows if "." not in row["JobID"]]
    by_run: dict[str, list[dict[str, str]]] = {}
    for row in jobs:
        by_run.setdefault(run_of(row, rows), []).append(row)

    gpu_current = held_hours(by_run["gpu"], "gres/gpu")
    # the sweep's members run as one job array, tagged as the sweep's
    sweep = [row for name, found in by_run.items() if name.startswith("train") for row in found]
    sweep_current = held_hours(sweep, "cpu")
    assert len(sweep) == 2, by_run.keys()
    failed = held_hours(by_run["flaky"], "cpu")
    assert len({_top(row["JobID"]) for row in by_run["flaky"]}) == 2  # attempt and retry
    torn_gpu = held_hours(by_run["het"], "gres/gpu")
    (warm,) = by_run["warm"]
    steps = [
        row for row in rows
        if _top(row["JobID"]) == warm["JobID"] and "." in row["JobID"]
        and row["JobID"].split(".")[1] not in OWN_STEPS
    ]  # fmt: skip
    busy = _union_seconds([(row["Start"], row["End"]) for row in steps])
    idle_cpu = _tres(warm["AllocTRES"], "cpu") * (int(warm["ElapsedRaw"]) - busy) / 3600

    total = cost["total"]
    assert gpu_current > 0 and torn_gpu > 0 and failed > 0 and idle_cpu > 0
    assert total["gpu_hours_by"]["current"] == pytest.approx(gpu_current, abs=1e-9)
    assert cost["sweeps"]["train"]["cpu_hours_by"]["current"] == pytest.approx(
        sweep_current, abs=1e-9
    )
    assert total["cpu_hours_by"]["failed"] == pytest.approx(failed, abs=1e-9)
    assert cost["runs"]["flaky"]["jobs"] == 2
    assert total["gpu_hours_by"]["cancelled"] == pytest.approx(torn_gpu, abs=1e-9)
    assert total["cpu_hours_by"]["idle"] == pytest.approx(idle_cpu, abs=1e-9)
    assert cost["runs"]["first"]["in_allocation_job"].startswith(warm["JobID"] + ".")
    # every job-level row sacct shows is in the total once (a run in the allocation inside it)
    assert total["gpu_hours"] == pytest.approx(held_hours(jobs, "gres/gpu"), abs=1e-9)
    assert total["cpu_hours"] == pytest.approx(held_hours(jobs, "cpu"), abs=1e-9)
    text = recon(project, "cost", ".")
    assert text.returncode == 0 and "alloc idle" in text.stdout, text.stdout + text.stderr

    # A change gives the GPU run 2 GPUs: its plan (no cluster asked) expects the last
    # run's ElapsedRaw times 2 GPUs.
    project.repo.commit({"specs/gpu.yaml": GPU.replace("'a100:1'", "'a100:2'")}, message="2 GPUs")
    against = recon(project, "plan", ".", "--against", "HEAD~1", "--format", "json")
    (gpu_job,) = by_run["gpu"]
    (expected,) = json.loads(against.stdout)["expected_cost"]["runs"]
    assert expected["name"] == "gpu" and expected["gpus"] == 2
    assert expected["gpu_hours"] == pytest.approx(2 * int(gpu_job["ElapsedRaw"]) / 3600, abs=1e-9)
    markdown = recon(project, "plan", ".", "--against", "HEAD~1", "--format", "markdown")
    assert "**Expected cost:" in markdown.stdout and "| `gpu` | 2 |" in markdown.stdout


def _union_seconds(spans: list[tuple[str, str]]) -> int:
    from datetime import datetime

    ordered = sorted((datetime.fromisoformat(a), datetime.fromisoformat(b)) for a, b in spans)
    busy, reach = 0, None
    for begin, end in ordered:
        begin = max(begin, reach) if reach else begin
        if end > begin:
            busy += int((end - begin).total_seconds())
            reach = end
    return busy


LONG = (
    "kind: Run\nname: long\ncommand: 'sleep 120; echo ok > {outputs.out.path}'\n"
    "resources:\n  partition: gpu\n  cpus: 1\n  memory: 100MiB\n  gpus: 'a100:1'\n  time: 5\n"
    "outputs:\n  out: out.txt\n"
)


def _elapsed(job_id: str) -> tuple[int, int]:
    """(GPUs, ElapsedRaw) of a job as sacct's window lists it now, as recon asks for it:
    (0, 0) until it does (accounting lists a job some seconds after it starts, later
    under load, where ``sacct -j`` already shows it)."""
    listing = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-S", "now-1hours", "-E", "now", "-s", STATES,
         "-o", "JobID,AllocTRES,ElapsedRaw"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for line in listing.splitlines():
        found, tres, elapsed = line.split("|")
        if found == job_id:
            return _tres(tres, "gres/gpu"), int(elapsed or 0)
    return 0, 0


def test_running_jobs_so_far_and_older_jobs_back_filled_once(project: Project) -> None:
    """A GPU run still running is counted as held so far (between two sacct readings of
    its ElapsedRaw taken around `recon cost`); a job whose usage the journal lacks (as
    one settled before recon read usage) is back-filled from sacct once, and equals
    what sacct says; --offline says what it leaves out instead."""
    import sqlite3

    project.repo.commit(
        {
            "specs/long.yaml": LONG,
            "specs/quick.yaml": run_spec("quick", "sleep 1; echo > {outputs.out.path}"),
        }
    )
    project.apply()
    long_id = project.listed_job_of("long")["id"]

    def quick_settled_and_long_accounted() -> bool:
        project.apply()
        records = _journal_rows(project)
        quick = [r for r in records if r["name"] == "quick"]
        return bool(quick) and quick[0]["final_health"] is not None and _elapsed(long_id)[1] > 0

    project.wait_for("quick to be settled, long to run", quick_settled_and_long_accounted)
    journal = project.root / ".recon" / "journal.sqlite"
    with sqlite3.connect(journal) as db:  # as a recon before usage was read left it
        db.execute("UPDATE submissions SET usage = NULL WHERE name = 'quick'")
        # and a job sacct holds no record of (an id never handed out on this cluster)
        db.execute(
            "INSERT INTO submissions (project, kind, name, spec_hash, git_commit, job_id,"
            " status, final_health, created_at, updated_at) SELECT project, kind, name,"
            " spec_hash, git_commit, '99999998', status, final_health, created_at, updated_at"
            " FROM submissions WHERE name = 'quick'"
        )

    offline = json.loads(recon(project, "cost", ".", "--offline", "--format", "json").stdout)
    assert (offline["jobs_running"], offline["jobs_without_usage"]) == (1, 2), offline
    assert "--offline" in offline["cluster_not_reached"]
    assert offline["total"]["gpu_hours"] == 0

    before = _elapsed(long_id)
    shown = recon(project, "cost", ".", "--format", "json")
    after = _elapsed(long_id)
    cost = json.loads(shown.stdout)
    assert (cost["jobs_running"], cost["jobs_running_counted"]) == (0, 1), cost
    running = cost["runs"]["long"]["gpu_hours_by"]["running"]
    assert before[0] * before[1] / 3600 <= running <= after[0] * after[1] / 3600, (before, after)
    assert cost["jobs_backfilled"] == 1 and cost["jobs_without_usage"] == 1
    assert cost["jobs_without_usage_not_in_accounting"] == 1  # 99999998: stamped, not asked again
    quick_rows = [r for r in sacct_rows(project) if run_of(r, sacct_rows(project)) == "quick"]
    quick_cpu = held_hours(quick_rows, "cpu")
    assert quick_cpu > 0
    assert cost["runs"]["quick"]["cpu_hours"] == pytest.approx(quick_cpu, abs=1e-9)
    quick_journal = [r for r in _journal_rows(project) if r["name"] == "quick"]
    assert [(r["usage"] is not None, r["usage_sought_at"] is not None) for r in quick_journal] == [
        (True, False),
        (False, True),
    ]
    again = json.loads(recon(project, "cost", ".", "--format", "json").stdout)
    assert again["jobs_backfilled"] == 0  # done once: the journal holds it now
    assert again["runs"]["quick"]["cpu_hours"] == pytest.approx(quick_cpu, abs=1e-9)
    text = recon(project, "cost", ".").stdout
    assert "still running counted as held so far" in text and "running" in text, text


def _journal_rows(project: Project) -> list[dict[str, object]]:
    import sqlite3

    path = project.root / ".recon" / "journal.sqlite"
    if not path.exists():
        return []
    with sqlite3.connect(path) as db:
        db.row_factory = sqlite3.Row
        return [dict(row) for row in db.execute("SELECT * FROM submissions ORDER BY id")]


def coupled(name: str, partner: str, command: str) -> str:
    return run_spec(name, command, extra=f"coupled_with: [{partner}]\n")


def test_a_run_held_back_for_its_coupled_partner_is_a_saving_valued_as_sacct_says(
    project: Project,
) -> None:
    """simulator and monitor succeed together; a commit makes monitor fail, so recon tears
    simulator's new job down and holds simulator back (blocked) instead of running it
    alone. The saving is what the torn-down job held (its AllocTRES) for the shorter of
    the wait and simulator's last success's ElapsedRaw, both read from sacct here."""
    project.repo.commit(
        {
            "specs/simulator.yaml": coupled(
                "simulator", "monitor", "sleep 2; echo > {outputs.out.path}"
            ),
            "specs/monitor.yaml": coupled(
                "monitor", "simulator", "sleep 1; echo > {outputs.out.path}"
            ),
        }
    )
    done = recon(project, "apply", ".", "--auto-approve", "--wait")
    assert done.returncode == 0, done.stdout + done.stderr
    (first,) = project.job_of("simulator")
    project.repo.commit(
        {
            "specs/simulator.yaml": coupled(
                "simulator", "monitor", "sleep 300; echo > {outputs.out.path}"
            ),
            "specs/monitor.yaml": coupled("monitor", "simulator", "sleep 3; exit 1"),
        },
        message="monitor breaks",
    )
    project.apply()

    def torn_down() -> bool:
        project.apply()
        jobs = project.job_of("simulator")
        return len(jobs) == 2 and all(
            job["state"].startswith(("COMPLETED", "CANCELLED")) for job in jobs
        )

    project.wait_for("simulator's second job to be torn down", torn_down)
    second = next(job for job in project.job_of("simulator") if job["id"] != first["id"])
    project.wait_for("the teardown to be settled", lambda: _settled(project, second["id"]))
    time.sleep(4)  # held back longer than the last success ran: the saving is capped by it
    cost = json.loads(recon(project, "cost", ".", "--offline", "--format", "json").stdout)
    rows = sacct_rows(project)
    last = next(r for r in rows if r["JobID"] == first["id"])
    torn = next(r for r in rows if r["JobID"] == second["id"])
    assert torn["State"].startswith("CANCELLED"), torn
    expected_cpu = _tres(torn["AllocTRES"], "cpu") * int(last["ElapsedRaw"]) / 3600
    saved = cost["saved"]["coupled_wait"]
    assert saved["jobs"] == 1 and saved["cpu_hours"] == pytest.approx(expected_cpu, abs=1e-9)
    assert "held back until it ran again" in saved["how"]


def _settled(project: Project, job_id: str) -> bool:
    project.apply()
    return any(
        row["job_id"] == job_id and row["final_health"] is not None and row["usage"] is not None
        for row in _journal_rows(project)
    )
