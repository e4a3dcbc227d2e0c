"""SlurmScheduler.partitions() and the fit check on the real dev cluster."""

from __future__ import annotations

from pathlib import Path

import pytest
from ruamel.yaml import YAML

from reconciler.desired.models import RunResources
from reconciler.engine.plan.fit import FitChecker
from reconciler.scheduler.partitions import Gres
from reconciler.scheduler.slurm import SlurmScheduler
from reconciler.scheduler.slurm.testing import RecordingRunner

pytestmark = pytest.mark.slurm

EXAMPLE = Path(__file__).parents[2] / "examples" / "repo" / "specs" / "actor-learner.yaml"


def example_het_resources() -> RunResources:
    documents = YAML(typ="safe").load_all(EXAMPLE.read_text())
    (spec,) = [doc for doc in documents if doc["kind"] == "Run" and doc["name"] == "actor-learner"]
    return RunResources.model_validate(spec["resources"])


def test_partitions_of_the_dev_cluster_in_one_command() -> None:
    runner = RecordingRunner()
    partitions = {p.name: p for p in SlurmScheduler(runner).partitions()}

    assert runner.commands() == ["sinfo"]
    assert set(partitions) == {"cpu", "gpu", "preempt"}
    cpu, gpu = partitions["cpu"], partitions["gpu"]
    assert cpu.default and not gpu.default
    # The preemptible partition holds the GPU node too: its jobs make way for gpu's.
    assert [node.name for node in partitions["preempt"].nodes] == ["gpu1"]
    assert sorted(node.name for node in cpu.nodes) == ["cpu1", "cpu2"]
    assert [node.cpus for node in cpu.nodes] == [8, 8]
    assert all(node.gres == () and node.memory_mb > 0 for node in cpu.nodes)
    (gpu1,) = gpu.nodes
    assert gpu1.name == "gpu1"
    assert gpu1.gres == (Gres(name="gpu", type="a100", count=4),)
    assert gpu1.gpus("A100") == 4


def test_fit_check_against_the_dev_cluster() -> None:
    checker = FitChecker(SlurmScheduler().partitions())

    too_many = RunResources.model_validate({"partition": "gpu", "gpus": "a100:8"})
    assert checker.why_not(too_many) == (
        "partition gpu: asks 8 GPUs of type a100 per node; the most any node has is 4"
    )
    example = example_het_resources()
    assert len(example.components) == 2
    assert checker.why_not(example) is None
    # The same two components, both sent to gpu1, have no distinct nodes to run on.
    both_on_gpu = RunResources.model_validate(
        {
            "components": [
                {**c.model_dump(exclude_none=True), "partition": "gpu"} for c in example.components
            ]
        }
    )
    assert checker.why_not(both_on_gpu) == (
        "components 0 and 1 (partition gpu) need 2 distinct nodes between them, "
        "and only 1 can take them; het components do not share a node"
    )
