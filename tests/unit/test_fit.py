"""The up-front fit check: tables of runs against literal partitions, a brute-force
cross-check of het placement, and a sweep of 10,000 runs through one FitChecker."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reconciler.desired.models import NodeShape, RunResources
from reconciler.engine.plan.fit import FitChecker, why_not_fit
from reconciler.scheduler.partitions import Node, Partition
from tests.planning import DEV, node

# A cluster with more variety: mixed GPU types, untyped GPUs, features, a fat node,
# drained and down nodes, and a node in two partitions.
SHARED = node("c1", cpus=48, memory_mb=192000, features=("ib", "haswell"))
MIXED = (
    Partition(
        name="batch",
        default=True,
        nodes=(SHARED, node("c2", cpus=48, memory_mb=192000, features=("skylake",))),
    ),
    Partition(name="long", nodes=(SHARED,)),
    Partition(
        name="gpu",
        nodes=(
            node("g1", cpus=16, gpus="A100:2,v100:2", features=("ib",)),
            node("g2", cpus=64, memory_mb=512000, gpus="4", state="drained"),
        ),
    ),
    Partition(name="fat", nodes=(node("f1", cpus=128, memory_mb=2048000, state="down*"),)),
)


def run(**resources: Any) -> RunResources:
    return RunResources.model_validate(resources)


def het(*components: dict[str, Any]) -> RunResources:
    return RunResources.model_validate({"components": list(components)})


@pytest.mark.parametrize(
    ("resources", "reason"),
    [
        (run(), None),
        (run(cpus=8, memory="16000MiB"), None),
        (run(cpus="8+"), None),
        (run(partition="gpu", gpus="a100:4"), None),
        (run(partition="gpu", gpus="A100:4"), None),
        (run(nodes=2, cpus=8), None),
        (
            run(cpus=9),
            "default partition cpu: asks 9 CPUs per node; the most any node has is 8",
        ),
        (
            run(memory="16GiB"),
            "default partition cpu: asks 16384 MiB memory per node; "
            "the most any node has is 16000 MiB",
        ),
        (
            run(partition="gpu", gpus="a100:8"),
            "partition gpu: asks 8 GPUs of type a100 per node; the most any node has is 4",
        ),
        (
            run(partition="gpu", gpus="h100:1"),
            "partition gpu: asks 1 GPU of type h100 per node; "
            "no node has that type (GPU types here: a100)",
        ),
        (run(gpus=1), "default partition cpu: asks 1 GPU per node; no node has any GPU"),
        (run(nodes=3), "default partition cpu: asks 3 nodes; it has 2"),
        (
            run(partition="gpu", nodes=2, cpus=16, gpus=8),
            "partition gpu: asks 2 nodes; it has 1; "
            "asks 16 CPUs per node; the most any node has is 8; "
            "asks 8 GPUs per node; the most any node has is 4",
        ),
        (
            run(partition="debug"),
            "partition debug: the cluster has no such partition (it has: cpu, gpu)",
        ),
        (
            run(constraint="ib"),
            "default partition cpu: asks features ib; no node has the feature ib",
        ),
        # Anything beyond a&b or a|b is not judged: it may fit.
        (run(constraint="[ib|eth]"), None),
        (run(constraint="ib*2"), None),
        (run(constraint="(ib&eth)|opa"), None),
    ],
    ids=lambda value: str(value)[:60] if isinstance(value, str) else None,
)
def test_one_component_on_the_dev_cluster(resources: RunResources, reason: str | None) -> None:
    assert why_not_fit(resources, DEV) == reason


@pytest.mark.parametrize(
    ("resources", "reason"),
    [
        # GPU types in any case; an untyped request counts every type on the node.
        (run(partition="gpu", gpus="v100:2"), None),
        (run(partition="gpu", gpus="a100:2"), None),
        (
            run(partition="gpu", gpus="a100:3"),
            "partition gpu: asks 3 GPUs of type a100 per node; the most any node has is 2",
        ),
        (run(partition="gpu", gpus=4), None),
        # g2's four GPUs are untyped: a typed request cannot use them.
        (
            run(partition="gpu", gpus="a100:4"),
            "partition gpu: asks 4 GPUs of type a100 per node; the most any node has is 2",
        ),
        # Every dimension is met by some node of gpu, but not all by one.
        (
            run(partition="gpu", cpus=32, gpus="v100:1"),
            "partition gpu: no single node has 32 CPUs, 1 GPU of type v100 together",
        ),
        (
            run(partition="gpu", nodes=2, gpus="a100:1"),
            "partition gpu: asks 2 nodes with 1 GPU of type a100; only 1 has that",
        ),
        # Drained and down nodes count: they may come back.
        (run(partition="gpu", cpus=64, memory="500000MiB", gpus=4), None),
        (run(partition="fat", cpus=128), None),
        # Features: every one of a&b on one node; at least one of a|b.
        (run(constraint="ib&haswell"), None),
        (run(constraint="haswell|skylake", nodes=2), None),
        (
            run(constraint="ib&skylake"),
            "default partition batch: no single node has features ib&skylake together",
        ),
        (
            run(constraint="knl|opa"),
            "default partition batch: asks one of the features knl|opa; no node has any of them",
        ),
        (
            run(constraint="ib&knl&opa"),
            "default partition batch: asks features ib&knl&opa; no node has the features knl, opa",
        ),
        (run(partition="long", constraint="ib"), None),
        # Memory unset asks nothing of it.
        (run(partition="fat"), None),
    ],
    ids=lambda value: str(value)[:60] if isinstance(value, str) else None,
)
def test_one_component_on_a_mixed_cluster(resources: RunResources, reason: str | None) -> None:
    assert why_not_fit(resources, MIXED) == reason


@pytest.mark.parametrize(
    ("resources", "reason"),
    [
        # The example het run: a CPU component and a GPU component.
        (
            het(
                {"partition": "cpu", "cpus": 2, "memory": "1GiB"},
                {"partition": "gpu", "cpus": 2, "memory": "2GiB", "gpus": "a100:2"},
            ),
            None,
        ),
        (
            het({"partition": "cpu"}, {"partition": "gpu", "gpus": "a100:8"}),
            "component 1 (partition gpu): asks 8 GPUs of type a100 per node; "
            "the most any node has is 4",
        ),
        (
            het({"cpus": 16}, {"partition": "gpu"}),
            "component 0 (default partition cpu): asks 16 CPUs per node; "
            "the most any node has is 8",
        ),
        # Two components fit the cpu partition's two nodes, one each; a third does not.
        (het({"cpus": 8}, {"cpus": 8}), None),
        (
            het({"cpus": 1}, {"cpus": 1}, {"cpus": 1}),
            "components 0, 1 and 2 (partition cpu) need 3 distinct nodes between them, "
            "and only 2 can take them; het components do not share a node",
        ),
        (
            het({"nodes": 2}, {"partition": "cpu"}),
            "components 0 and 1 (partition cpu) need 3 distinct nodes between them, "
            "and only 2 can take them; het components do not share a node",
        ),
        # Both components would fit on gpu1 together, but not on distinct nodes.
        (
            het({"partition": "gpu", "gpus": "a100:2"}, {"partition": "gpu", "gpus": "a100:2"}),
            "components 0 and 1 (partition gpu) need 2 distinct nodes between them, "
            "and only 1 can take them; het components do not share a node",
        ),
        # Only the components competing for the same nodes are named.
        (
            het({"partition": "gpu"}, {"cpus": 1}, {"partition": "gpu"}),
            "components 0 and 2 (partition gpu) need 2 distinct nodes between them, "
            "and only 1 can take them; het components do not share a node",
        ),
    ],
    ids=lambda value: str(value)[:60] if isinstance(value, str) else None,
)
def test_het_runs_on_the_dev_cluster(resources: RunResources, reason: str | None) -> None:
    assert why_not_fit(resources, DEV) == reason


def test_a_component_is_moved_to_make_room_for_a_pickier_one() -> None:
    """Component 0 could take either node and is tried on the GPU node first; component 1
    can only have the GPU node, so component 0 must give it up."""
    partitions = (Partition(name="p", default=True, nodes=(node("g", gpus="a100:1"), node("c"))),)
    assert why_not_fit(het({"cpus": 1}, {"gpus": 1}), partitions) is None
    assert why_not_fit(het({"cpus": 1}, {"gpus": 1}, {"cpus": 1}), partitions) is not None


def test_a_node_in_two_partitions_is_still_one_node() -> None:
    both = node("n1")
    partitions = (
        Partition(name="a", default=True, nodes=(both,)),
        Partition(name="b", nodes=(both,)),
    )
    assert why_not_fit(het({"partition": "a"}, {"partition": "b"}), partitions) == (
        "components 0 and 1 (partitions a, b) need 2 distinct nodes between them, "
        "and only 1 can take them; het components do not share a node"
    )
    more = (partitions[0], Partition(name="b", nodes=(both, node("n2"))))
    assert why_not_fit(het({"partition": "a"}, {"partition": "b"}), more) is None


def test_without_a_default_partition_a_run_must_name_one() -> None:
    partitions = (Partition(name="gpu", nodes=(node("gpu1"),)),)
    assert why_not_fit(run(cpus=1), partitions) == (
        "the run names no partition and the cluster has no default partition"
    )
    assert why_not_fit(het({"partition": "gpu"}, {"cpus": 1}), partitions) == (
        "component 1 names no partition and the cluster has no default partition"
    )


def test_shapes_of_any_origin() -> None:
    """An allocation's NodeShape, or a bare list of shapes, is checked like a run."""
    assert why_not_fit(NodeShape(partition="gpu", cpus=2), DEV) is None
    assert why_not_fit(NodeShape.model_validate({"cpus": 9}), DEV) is not None
    two = [NodeShape(partition="gpu"), NodeShape(partition="gpu")]
    assert why_not_fit(two, DEV) is not None


def test_one_checker_answers_each_run_as_a_fresh_one_would() -> None:
    """Answers are remembered per request: a remembered answer must never leak to another."""
    runs = [
        run(cpus=8),
        run(cpus=9),
        run(partition="gpu", gpus="a100:4"),
        run(partition="gpu", gpus="a100:5"),
        het({"cpus": 8}, {"cpus": 8}),
        het({"cpus": 8}, {"cpus": 8}, {"cpus": 8}),
        run(cpus=8),
        run(cpus=9),
    ]
    checker = FitChecker(DEV)
    assert [checker.why_not(r) for r in runs] == [why_not_fit(r, DEV) for r in runs]


def test_ten_thousand_runs_through_one_checker(capsys: pytest.CaptureFixture[str]) -> None:
    """A sweep: 10,000 runs over 40 distinct shapes, a tenth of them het. The time is
    printed (pytest -s) for the record, not asserted: machines differ."""
    cluster = tuple(
        Partition(
            name=f"p{p}",
            default=p == 0,
            nodes=tuple(
                node(f"p{p}n{i}", cpus=32 * (1 + i % 4), gpus=f"a100:{i % 5}" if p else None)
                for i in range(250)
            ),
        )
        for p in range(4)
    )
    runs = []
    for i in range(10_000):
        if i % 10 == 0:
            runs.append(
                het({"cpus": 1 + i % 4}, {"partition": "p1", "gpus": f"a100:{1 + i // 10 % 6}"})
            )
        else:
            runs.append(run(partition=f"p{i % 4}", cpus=1 + (i % 10) * 16))
    start = time.perf_counter()
    checker = FitChecker(cluster)
    reasons = [checker.why_not(r) for r in runs]
    elapsed = time.perf_counter() - start
    with capsys.disabled():
        print(f"\n10,000 runs against 1,000 nodes: {elapsed * 1000:.0f} ms")
    # 1 + 16k CPUs fit the 128-CPU nodes up to k=7; k=8, 9 do not. 5 or 6 a100s do not fit.
    too_many_cpus = sum(1 for i in range(10_000) if i % 10 in (8, 9))
    too_many_gpus = sum(1 for i in range(0, 10_000, 10) if i // 10 % 6 + 1 > 4)
    assert sum(reason is not None for reason in reasons) == too_many_cpus + too_many_gpus


# Small clusters and het runs, judged again by trying every assignment of distinct nodes.
CPUS = st.sampled_from([1, 4, 8])
GPUS = st.sampled_from([0, 2])
SMALL_NODE = st.tuples(CPUS, GPUS, st.frozensets(st.sampled_from(["a", "b"]), max_size=2))
COMPONENT = st.fixed_dictionaries(
    {
        "partition": st.sampled_from(["p", "q"]),
        "cpus": CPUS,
        "gpus": GPUS,
        "nodes": st.sampled_from([1, 2]),
        "features": st.sampled_from(["", "a", "a&b", "a|b"]),
    }
)


@settings(max_examples=300, deadline=None)
@given(
    nodes=st.lists(
        st.tuples(SMALL_NODE, st.sampled_from([("p",), ("q",), ("p", "q")])), max_size=5
    ),
    components=st.lists(COMPONENT, min_size=2, max_size=3),
)
def test_het_placement_agrees_with_trying_every_assignment(
    nodes: list[tuple[tuple[int, int, frozenset[str]], tuple[str, ...]]],
    components: list[dict[str, Any]],
) -> None:
    made = [
        (
            node(f"n{i}", cpus=cpus, gpus=f"x:{gpus}" if gpus else None, features=tuple(sorted(f))),
            homes,
        )
        for i, ((cpus, gpus, f), homes) in enumerate(nodes)
    ]
    partitions = tuple(
        Partition(
            name=name, default=name == "p", nodes=tuple(n for n, homes in made if name in homes)
        )
        for name in ("p", "q")
    )
    shapes = het(
        *(
            {
                "partition": c["partition"],
                "cpus": c["cpus"],
                "nodes": c["nodes"],
                **({"gpus": c["gpus"]} if c["gpus"] else {}),
                **({"constraint": c["features"]} if c["features"] else {}),
            }
            for c in components
        )
    )

    def takes(n: Node, homes: tuple[str, ...], c: dict[str, Any]) -> bool:
        wanted = set(c["features"].replace("|", "&").split("&")) - {""}
        has = set(n.features)
        features_ok = (
            not wanted
            or ("|" in c["features"] and bool(wanted & has))
            or ("|" not in c["features"] and wanted <= has)
        )
        return (
            c["partition"] in homes
            and n.cpus >= c["cpus"]
            and n.gpus() >= c["gpus"]
            and features_ok
        )

    def placeable(rest: list[dict[str, Any]], used: frozenset[str]) -> bool:
        if not rest:
            return True
        first, *others = rest
        free = [n.name for n, homes in made if n.name not in used and takes(n, homes, first)]
        return any(
            placeable(others, used | set(chosen))
            for chosen in itertools.combinations(free, first["nodes"])
        )

    assert (why_not_fit(shapes, partitions) is None) == placeable(components, frozenset())


def test_the_holder_that_can_move_is_the_one_moved() -> None:
    """Components 0 and 1 each hold one of the two big nodes; component 2 needs a big node
    too, and only component 1 can move to the small one. Components 0 and 1 hold the same
    number of the same kind of node: telling them apart must not depend on that."""
    partitions = (
        Partition(
            name="p",
            default=True,
            nodes=(node("big1", cpus=16), node("big2", cpus=16), node("small", cpus=4)),
        ),
    )
    assert why_not_fit(het({"cpus": 16}, {"cpus": 1}, {"cpus": 16}), partitions) is None
    assert why_not_fit(het({"cpus": 16}, {"cpus": 16}, {"cpus": 16}), partitions) is not None


def test_the_local_machine_fit_adds_up_cpus_and_ignores_partitions() -> None:
    from reconciler.desired.models import RunResources
    from reconciler.engine.plan.fit import MachineFit

    machine = MachineFit(cpus=2)
    assert machine.why_not(RunResources.model_validate({"cpus": 2, "partition": "gpu"})) is None
    het = RunResources.model_validate({"components": [{"cpus": 2}, {"cpus": 1, "gpus": 2}]})
    assert machine.why_not(het) == (
        "asks 3 CPUs in all; this machine has 2 (the local backend runs a job on this one machine)"
    )


def test_the_local_machine_fit_adds_up_gpus_whatever_their_type() -> None:
    from reconciler.desired.models import RunResources
    from reconciler.engine.plan.fit import MachineFit
    from reconciler.scheduler.partitions import Gres, Node, Partition

    two = MachineFit.of(
        (
            Partition(
                name="local",
                default=True,
                nodes=(
                    Node(
                        name="here",
                        cpus=8,
                        memory_mb=0,
                        gres=(Gres(name="gpu", count=2),),
                        state="idle",
                    ),
                ),
            ),
        )
    )
    assert two == MachineFit(cpus=8, gpus=2)
    assert two.why_not(RunResources.model_validate({"gpus": "h100:2"})) is None
    het = RunResources.model_validate({"components": [{"gpus": 1}, {"gpus": 1, "nodes": 2}]})
    assert two.why_not(het) == (
        "asks 3 GPUs in all; this machine has 2 (the local backend hands out only the GPUs "
        "that RECON_LOCAL_GPUS or recon.yaml's local.gpus declares or, where neither does, "
        "that nvidia-smi -L lists)"
    )
    assert MachineFit(cpus=8).why_not(RunResources.model_validate({"gpus": 1})) == (
        "asks 1 GPU in all; this machine has none (the local backend hands out only the GPUs "
        "that RECON_LOCAL_GPUS or recon.yaml's local.gpus declares or, where neither does, "
        "that nvidia-smi -L lists)"
    )
