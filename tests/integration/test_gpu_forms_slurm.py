"""Every GPU form on real Slurm: MIG-like types, shards and per-task GPUs on the dev
cluster's GPU node, with its GPU forms' configuration (reconciler/devcluster/spec.py
``with_gpu_forms``: `RECON_DEV_CLUSTER_GPU_FORMS=1 recon dev-cluster up`).

That configuration is off by default: the tests that need it (fixture ``gpu_forms``)
skip, saying so, on a cluster up without it, and run on one up with it. Those of forms
the plain dev cluster offers (``gpus_per_node``, ``gpus_per_task`` on its a100s) always
run. What a job was given is read inside the job
(``CUDA_VISIBLE_DEVICES``, ``SLURM_*``) and checked against ``scontrol show job -d``."""

from __future__ import annotations

import functools

import pytest

from reconciler.devcluster.spec import GPU_FORMS_VARIABLE, MIG_LIKE_SLICES, SHARDS_PER_GPU
from reconciler.scheduler.partitions import Node
from reconciler.scheduler.slurm import SlurmScheduler
from tests.integration.harness import Project
from tests.integration.test_allocations import apply_until, gpu_indices, held, step_run, warm

pytestmark = pytest.mark.slurm

# The fake devices of the GPU node: four a100 (0-3), then the slices in order.
SLICE_DEVICES = {"1g.10gb": {"4", "5"}, "3g.40gb": {"6"}}


@functools.cache
def gpu_node() -> Node | None:
    """The dev cluster's GPU node, when it has the GPU forms' configuration."""
    for partition in SlurmScheduler().partitions():
        for node in partition.nodes:
            if node.gpus("1g.10gb") and node.gres_count("shard"):
                return node
    return None


@pytest.fixture
def gpu_forms() -> None:
    """Skips a test that needs the GPU forms' configuration where it is not active."""
    if gpu_node() is None:
        pytest.skip(
            "the dev cluster's GPU node has no MIG-like types or shards: its GPU forms' "
            f"configuration is not active (bring it up with {GPU_FORMS_VARIABLE}=1)"
        )


def batch_run(name: str, resources: str) -> str:
    command = "echo ${CUDA_VISIBLE_DEVICES-none} ${SLURM_SHARDS_ON_NODE-none} > {outputs.out.path}"
    return (
        f"kind: Run\nname: {name}\ncommand: '{command}'\nresources:\n  partition: gpu\n"
        f"  cpus: 1\n  memory: 100MiB\n{resources}outputs:\n  out: out.txt\n"
    )


def test_sinfo_shows_the_slices_and_shards_the_configuration_gives(gpu_forms: None) -> None:
    node = gpu_node()
    assert node is not None
    for kind in MIG_LIKE_SLICES:
        assert node.gpus(kind.type) == kind.count
    assert node.gres_count("shard") == SHARDS_PER_GPU * node.gpus("a100")


@pytest.mark.parametrize(("gpu_type", "devices"), sorted(SLICE_DEVICES.items()))
def test_a_run_asking_a_mig_like_slice_gets_a_device_of_that_type(
    project: Project, gpu_forms: None, gpu_type: str, devices: set[str]
) -> None:
    project.repo.commit({"specs/slice.yaml": batch_run("slice", f"  gpus: {gpu_type}:1\n")})
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    seen, _ = (project.root / "runs/slice/out.txt").read_text().split()
    assert seen in devices, seen


def test_a_run_asking_shards_is_given_them_on_one_gpu(project: Project, gpu_forms: None) -> None:
    project.repo.commit({"specs/shared.yaml": batch_run("shared", "  shards: 2\n")})
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    seen, shards = (project.root / "runs/shared/out.txt").read_text().split()
    assert seen in {"0", "1", "2", "3"}, seen  # a shard is of a whole GPU
    assert shards == "2"


def test_a_slice_no_node_has_is_refused_naming_what_the_nodes_have(
    project: Project, gpu_forms: None
) -> None:
    project.repo.commit({"specs/none.yaml": batch_run("none", "  gpus: 2g.20gb:1\n")})
    plan = project.recon("plan", ".")
    assert (
        "partition gpu: asks 1 GPU of type 2g.20gb per node; no node has that type "
        "(GPU types here: 1g.10gb, 3g.40gb, a100)"
    ) in plan.stdout, plan.stdout
    too_many = batch_run("none", f"  shards: {SHARDS_PER_GPU * 4 + 1}\n")
    project.repo.commit({"specs/none.yaml": too_many})
    plan = project.recon("plan", ".")
    assert (
        f"asks {SHARDS_PER_GPU * 4 + 1} GPU shards per node; the most any node has is "
        f"{SHARDS_PER_GPU * 4}"
    ) in plan.stdout, plan.stdout


def test_two_slice_steps_in_one_allocation_never_share_a_device(
    project: Project, gpu_forms: None
) -> None:
    slices = warm(partition="gpu").replace("  cpus: 2\n", "  cpus: 2\n  gpus: 1g.10gb:2\n")
    seen = "echo ${CUDA_VISIBLE_DEVICES-none} > {outputs.out.path}; sleep 10"

    def slice_run(name: str) -> str:
        return step_run(name, seen).replace("  cpus: 1\n", "  cpus: 1\n  gpus: 1g.10gb:1\n")

    runs = {f"specs/{name}.yaml": slice_run(name) for name in ("s1", "s2")}
    project.repo.commit({"specs/warm.yaml": slices, **runs})
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (allocation,) = held(project)
    given = gpu_indices(allocation["id"])
    assert set(given) == SLICE_DEVICES["1g.10gb"], given
    devices = [(project.root / f"runs/{name}/out.txt").read_text().strip() for name in ("s1", "s2")]
    assert sorted(devices) == sorted(given), devices


def test_shard_steps_never_exceed_the_allocations_shards(project: Project, gpu_forms: None) -> None:
    sharded = warm(partition="gpu").replace("  cpus: 2\n", "  cpus: 4\n  shards: 4\n")
    seen = "echo ${SLURM_SHARDS_ON_NODE-none} > {outputs.out.path}; sleep 20"

    def shard_run(name: str) -> str:
        return step_run(name, seen).replace("  cpus: 1\n", "  cpus: 1\n  shards: 2\n")

    project.repo.commit(
        {
            "specs/warm.yaml": sharded,
            "specs/cpu.yaml": step_run("cpu", seen),  # asks no shard: is given none
            **{f"specs/{n}.yaml": shard_run(n) for n in ("a", "b", "c")},
        }
    )
    apply_until(project, "the allocation to run", lambda: any(
        job["state"] == "RUNNING" for job in held(project)
    ))  # fmt: skip
    applied = project.apply()
    (allocation,) = held(project)
    waits = f"waits for 2 free GPU shards in allocation warm (job {allocation['id']}): 4 of 4"
    assert waits in applied.stdout, applied.stdout
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    for name in ("a", "b", "c"):
        assert (project.root / f"runs/{name}/out.txt").read_text().strip() == "2"
    assert (project.root / "runs/cpu/out.txt").read_text().strip() == "none"


def test_gpus_per_task_gives_each_task_its_own_device(project: Project) -> None:
    two = warm(partition="gpu").replace("  cpus: 2\n", "  cpus: 2\n  gpus: a100:2\n")
    seen = "echo ${SLURM_PROCID}:${CUDA_VISIBLE_DEVICES-none} >> {outputs.out.path}"
    per_task = step_run("pt", seen).replace(
        "  cpus: 1\n", "  cpus: 1\n  ntasks: 2\n  gpus_per_task: 1\n"
    )
    project.repo.commit({"specs/warm.yaml": two, "specs/pt.yaml": per_task})
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    (allocation,) = held(project)
    lines = sorted((project.root / "runs/pt/out.txt").read_text().split())
    tasks = dict(line.split(":") for line in lines)
    assert sorted(tasks) == ["0", "1"], lines
    # Each task sees one device of the allocation's, and not the other task's.
    assert sorted(tasks.values()) == sorted(gpu_indices(allocation["id"])), lines


def test_gpus_per_node_is_given_as_gpus_are(project: Project) -> None:
    project.repo.commit({"specs/pn.yaml": batch_run("pn", "  gpus_per_node: a100:1\n")})
    waited = project.recon("apply", ".", "--auto-approve", "--wait")
    assert waited.returncode == 0, waited.stdout + waited.stderr
    seen, _ = (project.root / "runs/pn/out.txt").read_text().split()
    assert seen in {"0", "1", "2", "3"}, seen


def test_an_unknown_gres_is_refused_naming_what_the_nodes_have(project: Project) -> None:
    project.repo.commit({"specs/tmp.yaml": batch_run("tmp", "  gres: {nvme: 1}\n")})
    plan = project.recon("plan", ".")
    assert (
        "partition gpu: asks gres nvme:1 per node; no node has nvme (the nodes have: gpu:a100:4"
        in (plan.stdout)
    ), plan.stdout


def test_shards_where_no_node_has_any_are_refused_naming_what_the_nodes_have(
    project: Project,
) -> None:
    if gpu_node() is not None:
        pytest.skip("the GPU forms' configuration is active: gpu1 has shards")
    project.repo.commit({"specs/sh.yaml": batch_run("sh", "  shards: 2\n")})
    plan = project.recon("plan", ".")
    assert (
        "partition gpu: asks 2 GPU shards per node; no node has shard (the nodes have: gpu:a100:4)"
    ) in plan.stdout, plan.stdout
