"""Every GPU form Slurm offers, as recon types it: MIG profiles and any gres.conf type in
``gpus``, ``gpus_per_node``, ``gpus_per_task``, ``shards`` and other ``gres``. Parsed
and refused (with file, line and field), rendered to exact sbatch and srun options,
judged against sinfo's Gres column, counted in an allocation, and hashed so that a run
that uses none of them keeps its hash."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from reconciler.desired.desired import spec_hash
from reconciler.desired.loader import load_desired, open_source
from reconciler.desired.models import Allocation, NodeShape, Run, RunResources
from reconciler.desired.resources import Gpus, GresCount, mig_fraction
from reconciler.devcluster.render import fake_gpu_paths, render_gres_conf, render_slurm_conf
from reconciler.devcluster.spec import RELEASES, cluster_for
from reconciler.engine.ledger.cost import ledger
from reconciler.engine.plan.allocation_state import AllocationState, GpuShare, InUse, Ready
from reconciler.engine.plan.allocations.gpus import gpu_share, short_of
from reconciler.engine.plan.allocations.placement import beyond_allocation
from reconciler.engine.plan.fit import why_not_fit
from reconciler.engine.plan.forecast import Asks, RunEstimate
from reconciler.errors import SpecError, SpecIssue
from reconciler.report import cost as cost_report
from reconciler.scheduler.base import Held, ObservedJob
from reconciler.scheduler.partitions import Gres, Partition, shards_per_gpu
from reconciler.scheduler.render import shape_options
from reconciler.scheduler.slurm.parse import parse_sacct, parse_tres
from reconciler.scheduler.slurm.sinfo import parse_sinfo
from reconciler.scheduler.slurm.steps import sharing, step_options
from reconciler.scheduler.states import Health
from reconciler.scheduler.tag import Tag
from reconciler.scheduler.usage import JobUsage, usage_of
from reconciler.state.records import SubmissionRecord, SubmissionStatus
from tests.cli import recon
from tests.docs import ROOT
from tests.gitrepo import GitRepo
from tests.unit.test_cli_messages import inside


def resources(**fields: Any) -> RunResources:
    return RunResources.model_validate(fields)


# --- parsing ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "count", "gpu_type"),
    [
        ("1g.10gb:2", 2, "1g.10gb"),
        ("3g.40gb:1", 1, "3g.40gb"),
        ({"1g.10gb": 2}, 2, "1g.10gb"),
        ("nvidia_a100_3g.40gb:1", 1, "nvidia_a100_3g.40gb"),  # as AutoDetect=nvml names it
        ("A100:4", 4, "A100"),
        (4, 4, None),
    ],
)
def test_gpus_take_a_mig_profile_or_any_configured_type(
    raw: object, count: int, gpu_type: str | None
) -> None:
    assert Gpus.parse(raw) == Gpus(count, gpu_type)


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("a 100:1", "gpu type must be one name as gres.conf gives it"),
        ("1g.10gb:0", "gpus must be a count like 4, A100:4, 1g.10gb:2"),
        ("1g.10gb:two", "gpus must be a count"),
        ({"a100": 1, "v100": 1}, "exactly one type"),
        (True, "gpus must be a number"),
    ],
)
def test_malformed_gpus_say_the_accepted_forms(raw: object, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        Gpus.parse(raw)


def test_a_mig_slice_is_its_compute_slices_of_seven() -> None:
    assert mig_fraction("1g.10gb") == pytest.approx(1 / 7)
    assert mig_fraction("3g.40gb") == pytest.approx(3 / 7)
    assert mig_fraction("nvidia_a100_2g.20gb") == pytest.approx(2 / 7)
    assert mig_fraction("7g.80gb") == 1.0
    assert mig_fraction("a100") == 1.0
    assert mig_fraction(None) == 1.0


def test_gres_counts_take_slurms_binary_suffixes() -> None:
    assert GresCount.parse("100G") == GresCount(100 * 2**30, "100G")
    assert GresCount.parse("4k").count == 4096
    assert GresCount.parse(2) == GresCount(2, "2")
    with pytest.raises(ValueError, match="a gres count must be a whole number like 2"):
        GresCount.parse("100GB")


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"gpus": 1, "gpus_per_node": 1}, "gpus and gpus_per_node ask for the same thing"),
        ({"gpus": "a100:1", "shards": 2}, "give shards or gpus, not both"),
        ({"gpus_per_node": 1, "shards": 2}, "give shards or gpus, not both"),
        ({"gpus_per_task": 1, "gpus": 1}, "gpus_per_task gives each task its own GPUs"),
        ({"gpus_per_task": 1, "shards": 1}, "gpus_per_task gives each task its own GPUs"),
        ({"shards": 0}, "greater than or equal to 1"),
        ({"gres": {"gpu": 1}}, "gres 'gpu' has a field of its own: ask for GPUs with `gpus:`"),
        ({"gres": {"shard": 1}}, "ask for GPU shards with `shards:`"),
        ({"gres": {"mps": 100}}, "CUDA MPS shares are not supported"),
        ({"gres": {"local tmp": 1}}, "is not a gres name"),
    ],
)
def test_conflicting_or_malformed_forms_are_refused(fields: dict[str, Any], words: str) -> None:
    with pytest.raises(ValueError, match=words):
        resources(**fields)


def load_issues(repo: GitRepo, spec: str) -> list[SpecIssue]:
    repo.commit({"specs/a.yaml": spec})
    with pytest.raises(SpecError) as caught:
        load_desired(open_source(repo.root))
    return caught.value.issues


def test_a_malformed_gpu_form_is_named_by_file_line_and_field(repo: GitRepo) -> None:
    spec = (
        "kind: Run\nname: train\ncommand: python3 t.py\nresources:\n"
        "  partition: gpu\n  gpus: '1g.10gb:x'\n"
    )
    (issue,) = load_issues(repo, spec)
    assert (issue.file, issue.line, issue.field) == ("specs/a.yaml", 6, "resources.gpus")
    assert "gpus must be a count like 4, A100:4, 1g.10gb:2" in issue.message


def test_an_unknown_gres_value_is_named_by_its_field(repo: GitRepo) -> None:
    spec = (
        "kind: Run\nname: train\ncommand: python3 t.py\nresources:\n  gres:\n    localtmp: lots\n"
    )
    (issue,) = load_issues(repo, spec)
    assert issue.file == "specs/a.yaml"
    assert issue.field.startswith("resources.gres")
    assert issue.line in (5, 6)
    assert "a gres count must be a whole number" in issue.message


def test_gpus_per_task_lays_out_a_step_so_a_batch_run_is_refused_it(repo: GitRepo) -> None:
    spec = "kind: Run\nname: train\ncommand: python3 t.py\nresources:\n  gpus_per_task: 1\n"
    (issue,) = load_issues(repo, spec)
    assert (issue.line, issue.field) == (5, "resources.gpus_per_task")
    assert "lays out the step of a run inside an allocation" in issue.message


# --- rendering ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "options"),
    [
        ({"gpus": "a100:4"}, ["--gres=gpu:a100:4"]),  # today's form, unchanged
        ({"gpus": "1g.10gb:2"}, ["--gres=gpu:1g.10gb:2"]),
        ({"gpus": {"3g.40gb": 1}}, ["--gres=gpu:3g.40gb:1"]),
        ({"gpus_per_node": "1g.10gb:1"}, ["--gpus-per-node=1g.10gb:1"]),
        ({"gpus_per_node": 2}, ["--gpus-per-node=2"]),
        ({"shards": 2}, ["--gres=shard:2"]),
        ({"gres": {"localtmp": "100G"}}, ["--gres=localtmp:100G"]),
        (
            {"gpus": "A100:1", "gres": {"nvme:fast": 2, "localtmp": "100g"}},
            ["--gres=gpu:a100:1,localtmp:100G,nvme:fast:2"],  # one --gres: a second replaces
        ),
        ({"shards": 4, "gres": {"localtmp": 10}}, ["--gres=shard:4,localtmp:10"]),
        # one spec, one rendering: the largest binary suffix that divides the count
        ({"gres": {"localtmp": "102400M"}}, ["--gres=localtmp:100G"]),
        ({"gres": {"localtmp": 2048}}, ["--gres=localtmp:2K"]),
    ],
)
def test_each_form_is_rendered_to_its_sbatch_option(
    fields: dict[str, Any], options: list[str]
) -> None:
    assert shape_options(NodeShape.model_validate(fields)) == options


@pytest.mark.parametrize(
    ("fields", "options"),
    [
        (
            {"ntasks": 2, "gpus_per_task": "1g.10gb:1"},
            ("--nodes=1", "--ntasks=2", "--gpus-per-task=1g.10gb:1"),
        ),
        ({"gpus_per_task": 1}, ("--nodes=1", "--ntasks=1", "--gpus-per-task=1")),
        ({"shards": 2}, ("--nodes=1", "--ntasks=1", "--gres=shard:2")),
        ({"gpus": "3g.40gb:1"}, ("--nodes=1", "--ntasks=1", "--gres=gpu:3g.40gb:1")),
        # A CPU step beside GPUs with a GRES of its own: gpu:0 joins its one --gres.
        ({"gres": {"localtmp": "1G"}}, ("--nodes=1", "--ntasks=1", "--gres=gpu:0,localtmp:1G")),
    ],
)
def test_each_form_is_rendered_to_its_srun_options(
    fields: dict[str, Any], options: tuple[str, ...]
) -> None:
    assert step_options(resources(**fields), allocation_gpus=True) == options


@pytest.mark.parametrize(
    "fields", [{"gpus": "1g.10gb:1"}, {"gpus_per_node": 1}, {"gpus_per_task": 1}, {"shards": 1}]
)
def test_every_gpu_form_gets_its_devices_to_itself(fields: dict[str, Any]) -> None:
    assert sharing(resources(**fields)) == ("--exact",)
    assert sharing(resources(gres={"localtmp": 1})) == ("--overlap",)


# --- identity -------------------------------------------------------------------------


def run_hash(**fields: Any) -> str:
    return spec_hash(
        Run.model_validate(
            {"kind": "Run", "name": "train", "command": "python3 t.py", "allocation": "warm",
             "resources": fields}
        )
    )  # fmt: skip


def test_a_run_using_no_new_form_keeps_its_hash() -> None:
    # Pinned before the forms existed (tests/unit/test_slurm_steps.py holds the same).
    assert run_hash(cpus=2, memory="1GiB", gpus="a100:1", time="10m") == "839c16b1fae67df4"
    allocation = Allocation.model_validate(
        {"kind": "Allocation", "name": "warm", "time_limit": "1h",
         "resources": {"partition": "gpu", "gpus": "a100:2", "memory": "1GiB"},
         "setup": ["true"]}
    )  # fmt: skip
    assert spec_hash(allocation) == "4fc4922da25b96ba"
    batch = Run.model_validate(
        {"kind": "Run", "name": "b", "command": "true",
         "resources": {"gpus": "a100:2", "partition": "gpu", "memory": "2GiB"}}
    )  # fmt: skip
    assert spec_hash(batch) == "f14f701caf399461"


@pytest.mark.parametrize(
    "extra",
    [
        {"gpus": "1g.10gb:1"},
        {"gpus_per_node": "a100:1"},
        {"gpus_per_task": "a100:1"},
        {"shards": 2},
        {"gres": {"localtmp": "1G"}},
    ],
)
def test_a_new_form_is_a_new_spec(extra: dict[str, Any]) -> None:
    base: dict[str, Any] = {"cpus": 2, "memory": "1GiB", "time": "10m"}
    assert run_hash(**base, **extra) not in (run_hash(**base), "839c16b1fae67df4")


def test_het_components_without_new_forms_hash_as_before() -> None:
    def het(first: dict[str, Any]) -> str:
        return spec_hash(
            Run.model_validate(
                {"kind": "Run", "name": "h", "command": "true",
                 "resources": {"components": [first, {"cpus": 2}]}}
            )
        )  # fmt: skip

    # Pinned before the forms existed; an empty gres is no gres.
    assert het({"gpus": "a100:1"}) == "7ab232472b419f6e"
    assert het({"gpus": "a100:1", "gres": {}}) == het({"gpus": "a100:1"})
    assert het({"gpus": "a100:1", "gres": {"x": 1}}) != het({"gpus": "a100:1"})


# --- sinfo and the fit check -------------------------------------------------------------

# sinfo --noheader --Node --all --format=%P|%N|%c|%m|%G|%f|%T: Gres forms as Slurm prints
# them for MIG nodes (typed by profile, socket-bound), shards beside GPUs, and a count
# with a binary suffix.
MIG_CLUSTER = """\
cpu*|c1|8|16000|(null)|(null)|idle
gpu|g1|32|256000|gpu:1g.10gb:4(S:0),gpu:3g.40gb:1(S:1),shard:8|(null)|idle
gpu|g2|32|256000|gpu:a100:2(S:0-1),shard:a100:16,localtmp:500G|(null)|mixed
"""


def mig_cluster() -> tuple[Partition, ...]:
    parsed = parse_sinfo(MIG_CLUSTER)
    assert parsed.rejected == ()
    return parsed.partitions


def test_sinfo_gres_with_mig_types_and_shards_is_read() -> None:
    gpu = {p.name: p for p in mig_cluster()}["gpu"]
    g1, g2 = gpu.nodes
    assert g1.gres == (
        Gres(name="gpu", type="1g.10gb", count=4),
        Gres(name="gpu", type="3g.40gb", count=1),
        Gres(name="shard", count=8),
    )
    assert (g1.gpus(), g1.gpus("1g.10gb"), g1.gpus("3G.40GB"), g1.gres_count("shard")) == (
        5,
        4,
        1,
        8,
    )
    assert g2.gres_count("shard") == 16
    assert g2.gres_count("localtmp") == 500 * 2**30
    assert g1.gres_text == "gpu:1g.10gb:4, gpu:3g.40gb:1, shard:8"


@pytest.mark.parametrize(
    ("fields", "reason"),
    [
        ({"gpus": "1g.10gb:4"}, None),
        ({"gpus": "3g.40gb:1"}, None),
        ({"gpus_per_node": "1g.10gb:2"}, None),
        ({"shards": 16}, None),
        ({"gres": {"localtmp": "100G"}}, None),
        (
            {"gpus": "1g.10gb:5"},
            "partition gpu: asks 5 GPUs of type 1g.10gb per node; the most any node has is 4",
        ),
        (
            {"gpus": "2g.20gb:1"},
            "partition gpu: asks 1 GPU of type 2g.20gb per node; no node has that type "
            "(GPU types here: 1g.10gb, 3g.40gb, a100)",
        ),
        (
            {"shards": 17},
            "partition gpu: asks 17 GPU shards per node; the most any node has is 16",
        ),
        (
            {"gres": {"localtmp": "1T"}},
            f"partition gpu: asks gres localtmp:1T per node; the most any node has is "
            f"{500 * 2**30}",
        ),
        (
            {"gres": {"nvme": 1}},
            "partition gpu: asks gres nvme:1 per node; no node has nvme (the nodes have: "
            "gpu:1g.10gb:4, gpu:3g.40gb:1, shard:8; "
            f"gpu:a100:2, shard:a100:16, localtmp:{500 * 2**30})",
        ),
        # Each alone is somewhere; together nowhere.
        (
            {"gpus": "1g.10gb:1", "gres": {"localtmp": "1G"}},
            "partition gpu: no single node has 1 GPU of type 1g.10gb, gres localtmp:1G together",
        ),
    ],
)
def test_the_fit_check_judges_types_shards_and_gres_per_node(
    fields: dict[str, Any], reason: str | None
) -> None:
    assert why_not_fit(resources(partition="gpu", **fields), mig_cluster()) == reason


def test_a_shard_request_where_no_node_has_shards_names_what_the_nodes_have() -> None:
    reason = why_not_fit(resources(shards=1), mig_cluster())
    assert reason == (
        "default partition cpu: asks 1 GPU shard per node; no node has shard (no node has any GRES)"
    )


def test_gpus_per_task_is_judged_as_its_tasks_gpus_on_a_node() -> None:
    four = resources(partition="gpu", ntasks=4, gpus_per_task="1g.10gb:1")
    five = resources(partition="gpu", ntasks=5, gpus_per_task="1g.10gb:1")
    assert why_not_fit(four, mig_cluster()) is None
    assert why_not_fit(five, mig_cluster()) == (
        "partition gpu: asks 5 GPUs of type 1g.10gb per node; the most any node has is 4"
    )


# --- an allocation's GPU accounting -------------------------------------------------------


def state(**holds: Any) -> AllocationState:
    return AllocationState(
        name="warm",
        time_limit=timedelta(hours=1),
        ready=Ready(job_id="12", time_left=None),
        holds=NodeShape.model_validate(holds),
    )


@pytest.mark.parametrize(
    ("fields", "share"),
    [
        ({"gpus": "1g.10gb:2"}, GpuShare(gpus=2)),
        ({"gpus_per_node": 1, "nodes": 2}, GpuShare(gpus=2)),
        ({"gpus_per_task": 1, "ntasks": 3}, GpuShare(gpus=3)),
        ({"gpus_per_task": 2, "nodes": 2, "ntasks_per_node": 2}, GpuShare(gpus=8)),
        ({"shards": 3, "memory": "1GiB"}, GpuShare(shards=3, memory_mb=1024)),
        ({"gres": {"localtmp": 1}}, GpuShare()),
    ],
)
def test_a_steps_share_counts_every_gpu_form(fields: dict[str, Any], share: GpuShare) -> None:
    assert gpu_share(resources(**fields)) == share


def test_steps_never_exceed_an_allocations_gpus_or_shards() -> None:
    mig = state(gpus="1g.10gb:2")
    busy = InUse().plus("first", GpuShare(gpus=1))
    assert short_of(mig, resources(gpus="1g.10gb:1"), busy) is None
    assert short_of(mig, resources(gpus_per_task=1, ntasks=2), busy) == (
        "waits for 2 free GPUs in allocation warm (job 12): 1 of 2 in use by run first"
    )
    sharded = state(shards=4)
    used = InUse().plus("a", GpuShare(shards=2)).plus("b", GpuShare(shards=1))
    assert short_of(sharded, resources(shards=1), used) is None
    assert short_of(sharded, resources(shards=2), used) == (
        "waits for 2 free GPU shards in allocation warm (job 12): 3 of 4 in use by runs a, b"
    )


@pytest.mark.parametrize(
    ("holds", "asks", "beyond"),
    [
        ({"gpus": "1g.10gb:2"}, {"gpus": "1g.10gb:1"}, []),
        ({"gpus": "1g.10gb:2"}, {"gpus": "3g.40gb:1"}, ["gpus 3g.40gb:1, but it holds 1g.10gb:2"]),
        ({"gpus_per_node": 2}, {"gpus_per_task": 1, "ntasks": 2}, []),
        (
            {"gpus": 2},
            {"gpus_per_task": 1, "ntasks": 3},
            ["gpus_per_task 1 x 3 tasks > 2 per node"],
        ),
        ({"shards": 4}, {"shards": 4}, []),
        ({"shards": 4}, {"shards": 5}, ["shards 5 > 4 per node"]),
        ({"gpus": 1}, {"shards": 1}, ["shards 1, but it holds no GPU shards"]),
        ({"shards": 4}, {"gpus": 1}, ["gpus 1, but it holds GPU shards, not whole GPUs"]),
        ({}, {"gres": {"localtmp": "1G"}}, ["gres localtmp:1G, but it holds no localtmp"]),
        (
            {"gres": {"localtmp": "1G"}},
            {"gres": {"localtmp": "2G"}},
            ["gres localtmp:2G > 1G per node"],
        ),
    ],
)
def test_what_a_step_asks_beyond_its_allocation_in_every_form(
    holds: dict[str, Any], asks: dict[str, Any], beyond: list[str]
) -> None:
    assert beyond_allocation(NodeShape.model_validate(holds), resources(**asks)) == beyond


# --- what recon cost counts ----------------------------------------------------------------

SEVEN_HOURS = 7 * 3600
T0 = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def held_for_seven_hours(tres: str) -> JobUsage:
    """One job holding ``tres`` for 7 hours, as sacct's row of it reads."""
    row = (
        f"41|41|COMPLETED|0:0|None|2026-12-02T09:00:00|2026-12-02T09:00:00|"
        f"2026-12-02T16:00:00|gpu1|gpu|{SEVEN_HOURS}|600|{tres}|||/tmp/p|p-train|p\n"
    )
    parsed = parse_sacct(row, UTC)
    assert parsed.rejected == ()
    tag = Tag(project="p", deployment="0123456789ab", kind="run", name="train", spec_hash="0" * 16)
    usage = usage_of(ObservedJob(job_id="41", tag=tag, rows=parsed.records))
    assert usage is not None
    return usage


def cost_examples() -> list[tuple[str, str, str]]:
    """docs/cost.md's table of what a MIG slice and a shard are worth."""
    text = (ROOT / "docs" / "cost.md").read_text()
    rows = re.findall(r"^\| `(cpu=[^`]+)` \| ([\d.]+) \| (\d+) \|$", text, re.MULTILINE)
    assert len(rows) == 4
    return rows


@pytest.mark.parametrize(("tres", "gpu_h", "shard_h"), cost_examples())
def test_the_cost_pages_mig_and_shard_example_is_what_recon_counts(
    tres: str, gpu_h: str, shard_h: str
) -> None:
    usage = held_for_seven_hours(tres)
    assert f"{usage.gpu_s / 3600:.3f}" == gpu_h
    assert f"{usage.shard_s / 3600:g}" == shard_h


def test_sacct_tres_with_mig_slices_and_shards() -> None:
    assert parse_tres("cpu=1,gres/gpu=1,gres/gpu:1g.10gb=1,node=1") == Held(
        cpus=1, gpus=1, nodes=1, gpu_value=1 / 7
    )
    # untyped beside typed: the untyped rest are whole GPUs
    mixed = parse_tres("gres/gpu=3,gres/gpu:3g.40gb=1")
    assert mixed is not None and mixed.gpu_equivalents == pytest.approx(2 + 3 / 7)
    assert parse_tres("gres/gpu=2,gres/gpu:a100=2") == Held(gpus=2)
    assert parse_tres("cpu=2,gres/shard=4,node=1") == Held(cpus=2, nodes=1, shards=4)


@pytest.mark.parametrize(
    ("flag", "words"),
    [
        ("--tres-per-task=gres/gpu:1", "write resources.gpus_per_task for GPUs per task"),
        ("--gres=localtmp:10G", "write resources.gpus, resources.shards or resources.gres"),
        ("--gpus-per-task=1", "write resources.gpus_per_task (a run inside an allocation)"),
        ("--gpus-per-node=2", "write resources.gpus_per_node"),
        ("--gpus-per-socket=1", "is set by recon itself"),
    ],
)
def test_gpu_flags_in_sbatch_extra_point_to_their_fields(flag: str, words: str) -> None:
    with pytest.raises(ValueError, match=re.escape(words)):
        NodeShape.model_validate({"sbatch_extra": [flag]})


# --- the dev cluster's GPU forms' configuration ----------------------------------------


def test_the_dev_clusters_gpu_forms_are_off_unless_asked() -> None:
    for release in RELEASES:
        plain = cluster_for(release, "h")
        assert plain == cluster_for(release, "h", gpu_forms=False)
        assert all(not node.slices and not node.shards_per_gpu for node in plain.nodes)
        assert render_gres_conf(plain).splitlines()[1:] == [
            "NodeName=gpu1 Name=gpu Type=a100 File=/dev/fakegpu/nvidia[0-3]"
        ]
        conf = render_slurm_conf(plain)
        assert "GresTypes=gpu\n" in conf
        assert "AccountingStorageTRES=gres/gpu\n" in conf
        assert " Gres=gpu:a100:4 " in conf


def test_the_dev_clusters_gpu_forms_give_slices_and_shards_on_fake_devices() -> None:
    cluster = cluster_for("24.11", "h", gpu_forms=True)
    assert render_gres_conf(cluster).splitlines()[1:] == [
        "NodeName=gpu1 Name=gpu Type=a100 File=/dev/fakegpu/nvidia[0-3]",
        "NodeName=gpu1 Name=gpu Type=1g.10gb File=/dev/fakegpu/nvidia[4-5]",
        "NodeName=gpu1 Name=gpu Type=3g.40gb File=/dev/fakegpu/nvidia6",
        *(f"NodeName=gpu1 Name=shard Count=2 File=/dev/fakegpu/nvidia{i}" for i in range(4)),
    ]
    conf = render_slurm_conf(cluster)
    assert "GresTypes=gpu,shard\n" in conf
    assert "AccountingStorageTRES=gres/gpu,gres/shard,gres/gpu:1g.10gb,gres/gpu:3g.40gb\n" in conf
    assert " Gres=gpu:a100:4,gpu:1g.10gb:2,gpu:3g.40gb:1,shard:8 " in conf
    (gpu1,) = [node for node in cluster.nodes if node.gres is not None]
    assert len(fake_gpu_paths(cluster, gpu1)) == 7


def test_a_nodes_shards_per_gpu_are_over_its_whole_gpus() -> None:
    dev = parse_sinfo(
        "gpu|gpu1|8|16000|gpu:a100:4,gpu:1g.10gb:2,gpu:3g.40gb:1,shard:8|(null)|idle\n"
    ).partitions
    assert dev[0].nodes[0].shards_per_gpu == 2.0
    assert shards_per_gpu(dev) == (2.0, None)
    # g1 shards no whole GPU; g2 has 16 shards over 2 a100s
    assert shards_per_gpu(mig_cluster()) == (8.0, None)
    assert shards_per_gpu(parse_sinfo(MIG_CLUSTER.replace("shard:a100:16", "")).partitions) == (
        None,
        "no node of the cluster has GPU shards",
    )
    apart = MIG_CLUSTER + "gpu|g3|32|256000|gpu:a100:4,shard:4|(null)|idle\n"
    assert shards_per_gpu(parse_sinfo(apart).partitions) == (
        None,
        "the cluster's nodes have different shards per GPU (1, 8)",
    )


def shard_record(shards: int, hours: float) -> SubmissionRecord:
    usage = JobUsage(
        elapsed_s=hours * 3600, cpus=1, cpu_s=hours * 3600, shard_s=shards * hours * 3600
    )
    return SubmissionRecord(
        id=1, project="p", kind="run", name="eval", spec_hash="s1", commit="c1", job_id="7",
        status=SubmissionStatus.SUBMITTED, final_health=Health.SUCCEEDED,
        usage_json=json.dumps(usage.to_json()), created_at=T0, updated_at=T0,
    )  # fmt: skip


def test_recon_cost_counts_a_shard_at_its_share_of_a_gpu_when_the_cluster_says_it() -> None:
    # 2 shards for 7 hours on nodes of 4 shards per GPU: half a GPU for 7 hours
    valued = ledger([shard_record(2, 7)], {"eval": "s1"}, shards_per_gpu=4.0)
    assert valued.project.gpu_h == pytest.approx(3.5)
    assert valued.shard_h == 0
    unvalued = ledger([shard_record(2, 7)], {"eval": "s1"})
    assert unvalued.project.gpu_h == 0
    assert unvalued.shard_h == pytest.approx(14)
    book = replace(
        unvalued, shards_unvalued="--offline: the cluster's shards per GPU were not read"
    )
    assert (
        "14.000 GPU shard-hours held, not in the GPU-h: --offline: the cluster's shards per "
        "GPU were not read." in cost_report.as_text(book, "p")
    )


def test_the_cost_pages_shard_valuation_is_what_recon_counts() -> None:
    text = (ROOT / "docs" / "cost.md").read_text()
    assert "counts the last job's\n14 shard-hours as 3.5 GPU-hours." in text
    usage = held_for_seven_hours("cpu=1,gres/shard=2,mem=1G,node=1")
    record = replace(shard_record(2, 7), usage_json=json.dumps(usage.to_json()))
    nodes = parse_sinfo("gpu|g|8|16000|gpu:a100:2,shard:8|(null)|idle\n").partitions
    ratio, _ = shards_per_gpu(nodes)
    assert ledger([record], {"eval": "s1"}, shards_per_gpu=ratio).project.gpu_h == 3.5


def test_a_plans_forecast_counts_a_mig_slice_at_its_share() -> None:
    asks = Asks.of(resources(gpus="3g.40gb:2", nodes=1, time="1h"))
    assert asks.gpus == 2
    assert asks.gpu_equivalents == pytest.approx(6 / 7)
    assert Asks.of(resources(gpus="a100:2")).gpu_value is None
    estimate = RunEstimate("r", asks, last_s=7 * 3600)
    assert estimate.gpu_h == pytest.approx(6.0)


@pytest.mark.parametrize(
    ("resources_yaml", "line", "words"),
    [
        ("  gpus: '1g.10gb:0'\n", 5, "specs/a.yaml:5: resources.gpus: gpus must be a count"),
        ("  shards: two\n", 5, "specs/a.yaml:5: resources.shards:"),
        ("  gres: {gpu: 1}\n", 5, "gres 'gpu' has a field of its own"),
        ("  gpus: 1\n  shards: 2\n", 4, "give shards or gpus, not both"),
    ],
)
def test_recon_plan_says_a_malformed_gpu_form_without_a_traceback(
    repo: GitRepo,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    resources_yaml: str,
    line: int,
    words: str,
) -> None:
    spec = "kind: Run\nname: train\ncommand: python3 t.py\nresources:\n" + resources_yaml
    repo.commit({"specs/a.yaml": spec})
    monkeypatch.setenv("RECON_SCHEDULER", "local")
    with inside(repo.root):
        result = recon(capsys, "plan")
    assert result.code == 1, result.out
    assert "Traceback" not in result.err
    assert words in result.err, result.err
    assert f"specs/a.yaml:{line}" in result.err, result.err
