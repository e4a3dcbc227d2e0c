from __future__ import annotations

from collections.abc import Iterable

import networkx as nx
import pytest

from reconciler.desired import graph
from reconciler.desired.desired import Location
from reconciler.desired.models import Run
from reconciler.errors import UnknownTarget


def run(name: str, *upstreams: str) -> Run:
    return Run.model_validate(
        {
            "kind": "Run",
            "name": name,
            "command": "x",
            "inputs": {f"i{n}": f"{up}.out" for n, up in enumerate(upstreams)},
            "outputs": {"out": "o"},
        }
    )


def build(runs: dict[str, Run]) -> nx.DiGraph[str]:
    return graph.build(
        {
            name: [item.upstream[0] for item in spec.inputs.values() if item.upstream]
            for name, spec in runs.items()
        }
    )


def successors(edges: dict[str, Iterable[str]]) -> nx.DiGraph[str]:
    """A graph from each node's successors, as networkx reads a dict."""
    return nx.DiGraph(edges)


def test_edges_point_from_upstream_to_downstream() -> None:
    dag = build({"prep": run("prep"), "train": run("train", "prep")})
    assert list(dag.edges) == [("prep", "train")]


@pytest.mark.parametrize(
    ("targets", "downstream", "expected"),
    [
        (["train"], False, ["prep", "train"]),
        (["eval"], False, ["prep", "train", "eval"]),
        (["prep"], False, ["prep"]),
        (["prep"], True, ["other", "prep", "train", "eval"]),
        (["train"], True, ["prep", "train", "eval"]),
        (["other", "train"], False, ["other", "prep", "train"]),
    ],
)
def test_select(targets: list[str], downstream: bool, expected: list[str]) -> None:
    dag = successors({"prep": ["train", "other"], "train": ["eval"], "other": [], "eval": []})
    chosen = graph.select(dag, targets, downstream=downstream)
    assert sorted(chosen) == sorted(expected)
    for upstream, downstream_name in dag.edges:
        if upstream in chosen and downstream_name in chosen:
            assert chosen.index(upstream) < chosen.index(downstream_name)


def test_select_unknown_target() -> None:
    with pytest.raises(UnknownTarget, match="ghost"):
        graph.select(successors({"a": []}), ["ghost"])


def test_self_cycle_is_reported() -> None:
    dag = build({"a": run("a", "a")})
    (issue,) = graph.cycles(dag, {"a": Location("f.yaml", 3)})
    assert (issue.file, issue.line) == ("f.yaml", 3)
    assert "a -> a" in issue.message


def test_two_separate_cycles_are_two_issues() -> None:
    runs = {n: run(n, u) for n, u in [("a", "b"), ("b", "a"), ("c", "d"), ("d", "c"), ("e", "a")]}
    locations = {n: Location(f"{n}.yaml", 1) for n in runs}
    issues = graph.cycles(build(runs), locations)
    assert len(issues) == 2


def test_order_is_stable_and_topological() -> None:
    dag = successors({"z": ["b"], "a": ["b"], "b": []})
    assert graph.order(dag) == ["a", "z", "b"]


@pytest.mark.parametrize(
    ("upstreams", "expected"),
    [
        ({"a": [], "b": ["a"]}, False),
        ({"a": ["a"]}, True),
        ({"a": ["c"], "b": ["a"], "c": ["b"]}, True),
        ({"a": ["ghost"]}, False),  # a dangling name is reported elsewhere, not a cycle
    ],
)
def test_has_cycle_agrees_with_the_full_report(
    upstreams: dict[str, list[str]], expected: bool
) -> None:
    assert graph.has_cycle(upstreams) is expected
    locations = {name: Location("f.yaml", 1) for name in upstreams}
    assert bool(graph.cycles(graph.build(upstreams), locations)) is expected
