"""The run graph as mermaid, Graphviz dot or JSON. Pure: nodes and edges in, text out.

Nodes are runs and allocations; an edge goes from a run to each run that reads one of its
outputs, and from an allocation to each run that runs inside it. A node may carry its
sync status and health (when a scheduler was looked at) and the action a plan takes on it;
mermaid and dot colour it by the action if there is one, else by sync. A graph larger than
``limit`` nodes keeps the first ones in DAG order and says how many more there are, so a
10,000-run project still renders.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Literal

from reconciler.engine.actions import Plan
from reconciler.engine.status import RunStatus
from reconciler.graph import build, order
from reconciler.spec.desired import Desired
from reconciler.spec.matrix import sweep_of

NodeKind = Literal["run", "alloc"]

# Colours by action (what a plan does) and by sync (how a run stands): fill, then stroke.
_ACTION_COLOURS: Mapping[str, tuple[str, str]] = {
    "submit": ("#d4f7d4", "#2e7d32"),
    "retry": ("#d4f7d4", "#2e7d32"),
    "replace": ("#fff1c2", "#b7791f"),
    "cancel": ("#fbd5d5", "#c53030"),
    "teardown": ("#fbd5d5", "#c53030"),
    "adopt": ("#dbeafe", "#2b6cb0"),
    "setup": ("#dbeafe", "#2b6cb0"),
    "blocked": ("#e2e8f0", "#4a5568"),
}
_SYNC_COLOURS: Mapping[str, tuple[str, str]] = {
    "current": ("#ffffff", "#2e7d32"),
    "outdated": ("#fff1c2", "#b7791f"),
    "missing": ("#fbd5d5", "#c53030"),
    "never run": ("#ffffff", "#a0aec0"),
    "orphan": ("#e2e8f0", "#4a5568"),
}
_SAFE_ID = re.compile(r"[^A-Za-z0-9_]")


@dataclass(frozen=True)
class Node:
    name: str
    kind: NodeKind = "run"
    sync: str | None = None
    health: str | None = None
    action: str | None = None  # a changing action a plan takes on it, e.g. "submit"
    members: int = 0  # a sweep drawn as one node: how many members it stands for

    @property
    def label(self) -> str:
        facts = [fact for fact in (self.action, self.sync, self.health) if fact]
        if self.members:
            facts.insert(0, f"{self.members} members")
        prefix = "allocation " if self.kind == "alloc" else ""
        return prefix + self.name + (f" ({', '.join(facts)})" if facts else "")

    @property
    def colours(self) -> tuple[str, str] | None:
        if self.action is not None and self.action in _ACTION_COLOURS:
            return _ACTION_COLOURS[self.action]
        return _SYNC_COLOURS.get(self.sync or "")


@dataclass(frozen=True)
class Graph:
    nodes: Sequence[Node]  # in DAG order: upstreams first
    edges: Sequence[tuple[str, str]]  # (from, to) by node name
    left_out: int = 0  # nodes beyond the limit
    notes: Sequence[str] = field(default_factory=tuple)

    def around_actions(self, limit: int) -> Graph:
        """The nodes a plan acts on and their direct neighbours, the rest collapsed into
        a count: a PR comment shows what changes and what it touches, not the project."""
        touched = {node.name for node in self.nodes if node.action is not None}
        near = set(touched)
        for source, target in self.edges:
            if source in touched or target in touched:
                near |= {source, target}
        kept = [node for node in self.nodes if node.name in near]
        edges = [(a, b) for a, b in self.edges if a in near and b in near]
        return Graph(kept, edges, len(self.nodes) - len(kept), self.notes).limited(limit)

    def limited(self, limit: int) -> Graph:
        """At most ``limit`` nodes (the first in DAG order), the rest counted."""
        if len(self.nodes) <= limit:
            return self
        kept = list(self.nodes[:limit])
        names = {node.name for node in kept}
        edges = [(a, b) for a, b in self.edges if a in names and b in names]
        return Graph(kept, edges, self.left_out + len(self.nodes) - limit, self.notes)


def _node_id(node: Node) -> str:
    """A mermaid/dot identifier: names may hold `-` and `.`, identifiers may not."""
    return f"{node.kind}_{_SAFE_ID.sub('_', node.name)}"


def as_mermaid(graph: Graph) -> str:
    ids = {node.name: _node_id(node) for node in graph.nodes}
    lines = ["flowchart LR"]
    for node in graph.nodes:
        shape = ("[(", ")]") if node.kind == "alloc" else ("[", "]")
        lines.append(f'  {ids[node.name]}{shape[0]}"{_mermaid_text(node.label)}"{shape[1]}')
    for source, target in graph.edges:
        lines.append(f"  {ids[source]} --> {ids[target]}")
    if graph.left_out:
        lines.append(f'  more["and {graph.left_out} more"]')
    for node in graph.nodes:
        if node.colours is not None:
            fill, stroke = node.colours
            lines.append(f"  style {ids[node.name]} fill:{fill},stroke:{stroke}")
    return "\n".join(lines) + "\n"


def _mermaid_text(text: str) -> str:
    # Quotes end a label in mermaid; #quot; is its own escape for one.
    return text.replace('"', "#quot;")


def mermaid_block(graph: Graph) -> str:
    """A fenced mermaid block for markdown (a PR comment); empty for a graph of nothing."""
    if not graph.nodes:
        return ""
    return "```mermaid\n" + as_mermaid(graph) + "```\n"


def as_dot(graph: Graph) -> str:
    ids = {node.name: _node_id(node) for node in graph.nodes}
    lines = ["digraph runs {", "  rankdir=LR;", '  node [shape=box, style="rounded,filled"];']
    for node in graph.nodes:
        fill, stroke = node.colours or ("#ffffff", "#4a5568")
        shape = ", shape=cylinder" if node.kind == "alloc" else ""
        lines.append(
            f'  {ids[node.name]} [label={json.dumps(node.label)}, fillcolor="{fill}", '
            f'color="{stroke}"{shape}];'
        )
    for source, target in graph.edges:
        lines.append(f"  {ids[source]} -> {ids[target]};")
    if graph.left_out:
        lines.append(f'  more [label="and {graph.left_out} more", shape=plaintext];')
    lines.append("}")
    return "\n".join(lines) + "\n"


def as_json(graph: Graph) -> str:
    data = {
        "nodes": [asdict(node) for node in graph.nodes],
        "edges": [{"from": source, "to": target} for source, target in graph.edges],
        "left_out": graph.left_out,
        "notes": list(graph.notes),
    }
    return json.dumps(data, indent=2) + "\n"


RENDERERS = {"mermaid": as_mermaid, "dot": as_dot, "json": as_json}


def graph_of(
    desired: Desired,
    plan: Plan | None = None,
    statuses: Sequence[RunStatus] = (),
) -> Graph:
    """The project's graph; with a plan, each node's action; with statuses, each run's
    sync and health. Allocations come first, then runs in DAG order."""
    planned = plan.actions if plan is not None else ()
    actions = {
        (action.target_kind, action.target): action.kind.value
        for action in planned
        if action.changes_cluster or action.kind.value == "blocked"
    }
    # How each run stands: from status rows when given, else as the plan judged it.
    syncs = {a.target: a.sync.value for a in planned if a.target_kind == "run" and a.sync}
    by_run = {row.name: row for row in statuses}
    nodes = [
        Node(name, "alloc", action=actions.get(("alloc", name))) for name in desired.allocations
    ]
    for name in order(build(desired.upstreams)):
        row = by_run.get(name)
        nodes.append(
            Node(
                name,
                "run",
                sync=row.sync.value if row is not None else syncs.get(name),
                health=row.health.value if row is not None and row.health else None,
                action=actions.get(("run", name)),
            )
        )
    edges = [
        (upstream, name)
        for name in desired.runs
        for upstream in sorted(set(desired.upstreams.get(name, ())))
        if upstream in desired.runs
    ]
    edges += [
        (spec.allocation, name)
        for name, spec in ((name, desired.runs[name].spec) for name in desired.runs)
        if spec.allocation is not None and spec.allocation in desired.allocations
    ]
    notes = tuple(plan.notes) if plan is not None else ()
    return _by_sweep(Graph(nodes, edges, notes=notes))


def _by_sweep(graph: Graph) -> Graph:
    """Each sweep's members as one node, where its first member stands: a 10,000-member
    sweep is one box. Its action, sync and health are the commonest among its members'."""
    groups: dict[str, list[Node]] = {}
    for node in graph.nodes:
        sweep = sweep_of(node.name) if node.kind == "run" else None
        if sweep is not None:
            groups.setdefault(sweep, []).append(node)
    if not groups:
        return graph
    nodes: list[Node] = []
    for node in graph.nodes:
        sweep = sweep_of(node.name) if node.kind == "run" else None
        if sweep is None:
            nodes.append(node)
        elif groups[sweep][0] is node:
            members = groups[sweep]
            nodes.append(
                Node(
                    sweep,
                    "run",
                    sync=_commonest(member.sync for member in members),
                    health=_commonest(member.health for member in members),
                    action=_commonest(member.action for member in members),
                    members=len(members),
                )
            )
    edges = list(
        dict.fromkeys(
            (sweep_of(a) or a, sweep_of(b) or b)
            for a, b in graph.edges
            if (sweep_of(a) or a) != (sweep_of(b) or b)
        )
    )
    return Graph(nodes, edges, graph.left_out, graph.notes)


def _commonest(values: Iterable[str | None]) -> str | None:
    counts = Counter(value for value in values if value is not None)
    return counts.most_common(1)[0][0] if counts else None
