"""`recon graph`: the run graph as mermaid, dot and JSON, with states and actions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.engine.plan.actions import Action, ActionKind, Cause, Plan, SyncStatus
from reconciler.engine.plan.status import RunStatus
from reconciler.report.graph import Graph, Node, as_dot, as_json, as_mermaid, graph_of
from reconciler.scheduler.states import Health
from tests.cli import recon
from tests.gitrepo import GitRepo
from tests.planning import NOW, desired, run


def pipeline_plan() -> Plan:
    submit = Action(
        kind=ActionKind.SUBMIT, cause=Cause.NEVER_RUN, target="train-v2", reason="spec changed"
    )
    noop = Action(kind=ActionKind.NOOP, cause=Cause.CURRENT, target="prep", reason="current")
    return Plan(
        project="p", root="/repo", commit=None, scheduler="local", created_at=NOW,
        observation_complete=True, fingerprint="f", actions=(noop, submit),
    )  # fmt: skip


def status(name: str, sync: SyncStatus, health: Health | None) -> RunStatus:
    return RunStatus(
        name=name, sync=sync, health=health, job_id=None, finished_at=None,
        last_success_commit=None, outputs={}, reason="", next=ActionKind.NOOP,
    )  # fmt: skip


def test_mermaid_shows_every_run_its_edges_and_colours_by_action_then_sync() -> None:
    state = desired(run("prep"), run("train-v2", "prep"), run("eval", "prep", "train-v2"))
    rows = [
        status("prep", SyncStatus.CURRENT, Health.SUCCEEDED),
        status("train-v2", SyncStatus.OUTDATED, Health.SUCCEEDED),
        status("eval", SyncStatus.NEVER_RUN, None),
    ]
    text = as_mermaid(graph_of(state, pipeline_plan(), rows))
    assert text == (
        "flowchart LR\n"
        '  run_prep["prep (current, succeeded)"]\n'
        '  run_train_v2["train-v2 (submit, outdated, succeeded)"]\n'
        '  run_eval["eval (never run)"]\n'
        "  run_prep --> run_train_v2\n"
        "  run_prep --> run_eval\n"
        "  run_train_v2 --> run_eval\n"
        "  style run_prep fill:#ffffff,stroke:#2e7d32\n"
        "  style run_train_v2 fill:#d4f7d4,stroke:#2e7d32\n"
        "  style run_eval fill:#ffffff,stroke:#a0aec0\n"
    )


def test_dot_and_json_carry_the_same_graph() -> None:
    state = desired(run("a"), run("b", "a"))
    drawn = graph_of(state)
    dot = as_dot(drawn)
    assert dot.startswith("digraph runs {") and "run_a -> run_b;" in dot
    data = json.loads(as_json(drawn))
    assert [node["name"] for node in data["nodes"]] == ["a", "b"]
    assert data["edges"] == [{"from": "a", "to": "b"}] and data["left_out"] == 0


def test_a_large_graph_keeps_the_first_nodes_and_counts_the_rest() -> None:
    nodes = [Node(f"r{i}") for i in range(10)]
    edges = [(f"r{i}", f"r{i + 1}") for i in range(9)]
    limited = Graph(nodes, edges).limited(3)
    assert [node.name for node in limited.nodes] == ["r0", "r1", "r2"]
    assert limited.edges == [("r0", "r1"), ("r1", "r2")] and limited.left_out == 7
    assert 'more["and 7 more"]' in as_mermaid(limited)


def test_a_quote_in_a_label_cannot_end_it() -> None:
    assert '"a #quot;b#quot; (blocked)"' in as_mermaid(Graph([Node('a "b"', action="blocked")], []))


@pytest.fixture
def project(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    spec = (
        "kind: Run\nname: {n}\ncommand: 'true'\nresources: {{cpus: 1}}\n{i}outputs:\n  o: o.txt\n"
    )
    repo.commit(
        {
            "recon.yaml": "project: drawn\nscheduler: local\n",
            "specs/a.yaml": spec.format(n="a", i=""),
            "specs/b.yaml": spec.format(n="b", i="inputs:\n  x: a.o\n"),
        }
    )
    return repo


def test_recon_graph_offline_and_with_states(
    project: GitRepo, capsys: pytest.CaptureFixture[str]
) -> None:
    offline = recon(capsys, "graph", str(project.root), "--offline")
    assert offline.code == 0, offline.err
    assert offline.out.splitlines()[:4] == [
        "flowchart LR",
        '  run_a["a"]',
        '  run_b["b"]',
        "  run_a --> run_b",
    ]
    live = recon(capsys, "graph", str(project.root), "--format", "json")
    assert live.code == 0, live.err
    nodes = {node["name"]: node for node in json.loads(live.out)["nodes"]}
    assert (nodes["a"]["action"], nodes["a"]["sync"]) == ("submit", "never run")
    assert not (project.root / ".recon" / "journal.sqlite").exists()  # it looked only


def test_a_plan_diagram_keeps_what_it_acts_on_and_the_neighbours_and_counts_the_rest() -> None:
    names = ["a", "b", "c", "d", "e"]
    nodes = [Node(name, action="submit" if name == "c" else None) for name in names]
    edges = [("a", "b"), ("b", "c"), ("c", "d"), ("d", "e")]
    focused = Graph(nodes, edges).around_actions(limit=50)
    assert [node.name for node in focused.nodes] == ["b", "c", "d"]
    assert focused.edges == [("b", "c"), ("c", "d")] and focused.left_out == 2
    assert Graph([Node("x")], []).around_actions(limit=50).nodes == []
