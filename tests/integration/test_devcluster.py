"""The dev cluster serves real jobs: status, accounting with comments, GPUs, idempotent up.

Other test sessions may share the cluster, so no test assumes it has a node to itself.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest
from typer.testing import CliRunner

from reconciler.devcluster import lifecycle
from reconciler.devcluster.cli import app
from reconciler.devcluster.health import check_health
from reconciler.devcluster.spec import ClusterSpec

pytestmark = pytest.mark.slurm

# sacct learns of a job from slurmctld a moment after squeue does.
JOB_TIMEOUT = 60


def slurm(*argv: str) -> str:
    return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=30).stdout


def sacct_row(job_id: str, fields: str) -> list[str] | None:
    out = slurm("sacct", "--parsable2", "--noheader", "--allocations", "-j", job_id, "-o", fields)
    lines = out.splitlines()
    return lines[0].split("|") if lines else None


def wait_until_finished(job_id: str, fields: str = "JobID,State,Comment") -> list[str]:
    """The job's sacct row once sacct records an end state."""
    deadline = time.monotonic() + JOB_TIMEOUT
    while time.monotonic() < deadline:
        row = sacct_row(job_id, fields)
        if row and row[1] not in {"PENDING", "RUNNING", "REQUEUED", "SUSPENDED"}:
            return row
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not finish in {JOB_TIMEOUT} s: {row}")


def test_status_reports_all_three_nodes_usable(slurm_cluster: ClusterSpec) -> None:
    result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 0, result.output
    node_rows = {
        line.split()[0]: line.split()
        for line in result.output.splitlines()
        if line.split() and line.split()[0] in slurm_cluster.node_names
    }
    assert set(node_rows) == {"cpu1", "cpu2", "gpu1"}
    assert node_rows["gpu1"][1] == "gpu,preempt"
    assert all(row[2] in {"idle", "mix", "alloc", "comp"} for row in node_rows.values())


def test_batch_job_completes_and_sacct_keeps_its_comment(tmp_path: Path) -> None:
    comment = f"xyz-{uuid.uuid4().hex[:8]}"
    job_id = slurm(
        "sbatch",
        "--parsable",
        f"--comment={comment}",
        f"--output={tmp_path}/%j.out",
        "--wrap",
        "echo hi",
    ).strip()

    job, state, stored_comment = wait_until_finished(job_id)

    assert (job, state, stored_comment) == (job_id, "COMPLETED", comment)
    assert (tmp_path / f"{job_id}.out").read_text() == "hi\n"
    account = sacct_row(job_id, "JobID,Account")
    assert account == [job_id, "recon"]


def test_gpu_job_sees_the_gpus_it_was_given(tmp_path: Path) -> None:
    job_id = slurm(
        "sbatch",
        "--parsable",
        "--partition=gpu",
        "--gres=gpu:a100:2",
        f"--output={tmp_path}/%j.out",
        "--wrap",
        'echo "$CUDA_VISIBLE_DEVICES $SLURM_JOB_GPUS"',
    ).strip()

    assert wait_until_finished(job_id)[1] == "COMPLETED"
    visible, allocated = (tmp_path / f"{job_id}.out").read_text().split()
    assert visible == allocated
    if jobs_on_node_during("gpu1", job_id) == {job_id}:
        assert visible == "0,1"
    else:  # other jobs held GPUs meanwhile: any two devices of the four
        assert len(set(visible.split(","))) == 2
        assert set(visible.split(",")) <= {"0", "1", "2", "3"}
    alloc_tres = sacct_row(job_id, "JobID,AllocTRES")
    assert alloc_tres is not None and "gres/gpu=2" in alloc_tres[1]


def jobs_on_node_during(node: str, job_id: str) -> set[str]:
    """Jobs that ran on `node` at any time while `job_id` ran (sacct's window semantics)."""
    row = sacct_row(job_id, "JobID,Start,End")
    assert row is not None
    out = slurm(
        "sacct",
        "--parsable2",
        "--noheader",
        "--allocations",
        f"--nodelist={node}",
        f"--starttime={row[1]}",
        f"--endtime={row[2]}",
        "-o",
        "JobID",
    )
    return set(out.split())


def test_second_up_is_a_quick_no_op(slurm_cluster: ClusterSpec) -> None:
    pids_before = {d.name: d.pids for d in check_health(slurm_cluster).daemons}
    started = time.monotonic()

    actions = lifecycle.up(slurm_cluster, report=lambda _: None)

    assert actions == ()
    assert time.monotonic() - started < 20
    assert {d.name: d.pids for d in check_health(slurm_cluster).daemons} == pids_before


def test_status_prints_what_docs_cli_md_shows() -> None:
    """docs/cli.md's `recon dev-cluster status`, process ids and node states aside (other
    sessions' jobs make a node mixed or allocated)."""
    from tests.docs import ROOT, matches, shown_commands

    (shown,) = [
        item
        for item in shown_commands(ROOT / "docs" / "cli.md")
        if item.command == "recon dev-cluster status"
    ]
    result = CliRunner().invoke(app, ["status"])
    assert result.exit_code == 0, result.output

    def masked(text: str) -> str:
        text = re.sub(r"\bpid \d+", "pid N", text)
        states = r"\b(idle|mix(?:ed)?|alloc(?:ated)?|comp(?:leting)?|resv|reserved)\b"
        return re.sub(states, "<state>", text)

    assert matches(masked(result.output), masked(shown.output)), result.output
