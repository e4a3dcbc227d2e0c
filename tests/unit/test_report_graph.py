"""`recon graph`: the run graph as mermaid, dot and JSON, with states and actions."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from reconciler.desired.desired import Desired
from reconciler.engine.ledger.status import RunStatus
from reconciler.engine.plan.actions import Action, ActionKind, Plan, SyncStatus
from reconciler.engine.plan.causes import Cause
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


def test_mermaid_shows_every_run_its_edges_and_colours_by_sync_with_the_action_in_words() -> None:
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
        "  style run_train_v2 fill:#fff1c2,stroke:#b7791f\n"
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


@pytest.mark.parametrize(
    ("sync", "health", "action", "colours"),
    [
        ("current", "succeeded", None, ("#ffffff", "#2e7d32")),
        ("current", "succeeded", "may rerun", ("#ffffff", "#2e7d32")),  # no colour by action
        ("outdated", "succeeded", "submit", ("#fff1c2", "#b7791f")),
        ("missing", None, "submit", ("#feebc8", "#c05621")),
        ("never run", None, "submit", ("#ffffff", "#a0aec0")),
        ("never run", "failed", "retry", ("#fbd5d5", "#c53030")),  # red, whatever its sync
        ("current", "failed", None, ("#fbd5d5", "#c53030")),
        ("never run", "blocked", "blocked", ("#ffffff", "#c53030")),  # a red border
        (None, None, "setup", None),  # an allocation: plain
    ],
)
def test_one_legend_colours_every_drawing_by_sync_and_a_failure_red(
    sync: str | None, health: str | None, action: str | None, colours: tuple[str, str] | None
) -> None:
    node = Node("a", sync=sync, health=health, action=action)
    assert node.colours == colours
    # Red says failure and nothing else.
    red = colours is not None and "#c53030" in colours
    assert red == (health in ("failed", "blocked"))


def test_a_sweep_with_one_failed_member_is_drawn_failed() -> None:
    one = desired(run("s"))
    names = [f"s[i={i}]" for i in range(4)]
    state = Desired(
        one.project, one.root, one.commit, dict.fromkeys(names, one.runs["s"]), {},
        dict.fromkeys(names, ()),
    )  # fmt: skip
    rows = [status(f"s[i={i}]", SyncStatus.CURRENT, Health.SUCCEEDED) for i in range(3)]
    rows.append(status("s[i=3]", SyncStatus.CURRENT, Health.FAILED))
    (sweep,) = graph_of(state, None, rows).nodes
    assert (sweep.name, sweep.members, sweep.sync, sweep.health) == ("s", 4, "current", "failed")
    assert sweep.colours == ("#fbd5d5", "#c53030")
    assert "style run_s fill:#fbd5d5,stroke:#c53030,stroke-width:3px" in as_mermaid(
        graph_of(state, None, rows)
    )
