"""The run graph as mermaid, Graphviz dot or JSON. Pure: nodes and edges in, text out.

Nodes are runs and allocations; an edge goes from a run to each run that reads one of its
outputs, and from an allocation to each run that runs inside it. A node may carry its
sync status and health (when a scheduler was looked at) and the action a plan takes on it;
every format colours it by one legend (``Node.colours``: by sync, red for a failure) and
names the action in its label. A graph larger than
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

from reconciler.desired.desired import Desired
from reconciler.desired.graph import build, order
from reconciler.desired.matrix import sweep_of
from reconciler.engine.ledger.status import RunStatus
from reconciler.engine.plan.actions import Plan
from reconciler.scheduler.states import Health, aggregate

NodeKind = Literal["run", "alloc"]

# One legend for every drawing (mermaid, dot, SVG, the web view; docs/web.md): the fill
# and border say how a run stands against the repo (its sync); a run whose latest job
# failed is red whatever its sync, as `recon status` colours "failed", and one blocked by a
# failure upstream gets a red border. Red says failure and nothing else. What a plan would
# do is in the label, not the colour.
_SYNC_COLOURS: Mapping[str, tuple[str, str]] = {
    "current": ("#ffffff", "#2e7d32"),
    "outdated": ("#fff1c2", "#b7791f"),
    "missing": ("#feebc8", "#c05621"),
    "never run": ("#ffffff", "#a0aec0"),
    "orphan": ("#e2e8f0", "#4a5568"),
}
FAILED_COLOURS = ("#fbd5d5", "#c53030")
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
        """Fill and border: by sync, red for a failed latest job, a red border for a run
        blocked by one; None (drawn plain) for what has no sync: an allocation, or a run
        drawn offline."""
        if self.health == "failed":
            return FAILED_COLOURS
        colours = _SYNC_COLOURS.get(self.sync or "")
        if self.health == "blocked":
            return (colours[0] if colours else "#ffffff", FAILED_COLOURS[1])
        return colours


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
            thick = ",stroke-width:3px" if node.health in ("failed", "blocked") else ""
            lines.append(f"  style {ids[node.name]} fill:{fill},stroke:{stroke}{thick}")
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
    # Jobs whose run left the repo (orphans) are nodes too, after the declared runs.
    nodes += [
        Node(
            row.name,
            "run",
            sync=row.sync.value,
            health=row.health.value if row.health else None,
            action=actions.get(("run", row.name)),
        )
        for row in statuses
        if row.name not in desired.runs
    ]
    edges = [
        (upstream, name)
        for name in desired.runs
        for upstream in sorted(set(desired.upstreams.get(name, ())))
        if upstream in desired.runs
    ]
    edges += [
        (where, name)
        for name in desired.runs
        if (where := desired.runs[name].allocation) is not None and where in desired.allocations
    ]
    notes = tuple(plan.notes) if plan is not None else ()
    return _by_sweep(Graph(nodes, edges, notes=notes))


# Health as a dot in the node's corner: the fill says how the run stands against the repo,
# the dot how its latest job is doing.
_HEALTH_COLOURS: Mapping[str, str] = {
    "succeeded": "#2e7d32",
    "running": "#2b6cb0",
    "pending": "#a0aec0",
    "failed": "#c53030",
    "cancelled": "#b7791f",
    "blocked": "#4a5568",
}
_BOX_WIDTH, _BOX_HEIGHT, _COLUMN_GAP, _ROW_GAP, _MARGIN = 230, 46, 60, 18, 12


def layers(graph: Graph) -> dict[str, int]:
    """Each node's column: the longest path to it from a node nothing points at, so every
    edge goes left to right. Nodes come in DAG order (allocations first), so one sweep
    over them sees each node's sources first."""
    sources: dict[str, list[str]] = {}
    for source, target in graph.edges:
        sources.setdefault(target, []).append(source)
    column: dict[str, int] = {}
    for node in graph.nodes:
        column[node.name] = 1 + max(
            (column[s] for s in sources.get(node.name, ()) if s in column), default=-1
        )
    return column


def as_svg(graph: Graph) -> str:
    """The graph as a standalone SVG, laid out in columns by depth. Each node is a
    ``<g class="node">`` carrying ``data-name``, ``data-kind``, ``data-sync`` and
    ``data-health``, so a page can find and click it; the text is escaped."""
    column = layers(graph)
    rows: dict[int, int] = {}
    where: dict[str, tuple[int, int]] = {}
    for node in graph.nodes:
        depth = column[node.name]
        x = _MARGIN + depth * (_BOX_WIDTH + _COLUMN_GAP)
        y = _MARGIN + rows.get(depth, 0) * (_BOX_HEIGHT + _ROW_GAP)
        rows[depth] = rows.get(depth, 0) + 1
        where[node.name] = (x, y)
    extra = _BOX_HEIGHT if graph.left_out else 0
    width = _MARGIN * 2 + (max(column.values(), default=0) + 1) * (_BOX_WIDTH + _COLUMN_GAP)
    height = _MARGIN * 2 + max(rows.values(), default=1) * (_BOX_HEIGHT + _ROW_GAP) + extra
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="run-graph" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
        'font-size="13" role="img" aria-label="run graph">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#718096"/>'
        "</marker></defs>",
    ]
    for source, target in graph.edges:
        (x1, y1), (x2, y2) = where[source], where[target]
        x1, y1, y2 = x1 + _BOX_WIDTH, y1 + _BOX_HEIGHT // 2, y2 + _BOX_HEIGHT // 2
        bend = (x2 - x1) // 2
        parts.append(
            f'<path class="edge" d="M{x1},{y1} C{x1 + bend},{y1} {x2 - bend},{y2} {x2},{y2}" '
            'fill="none" stroke="#718096" stroke-width="1.5" marker-end="url(#arrow)"/>'
        )
    for node in graph.nodes:
        parts.append(_svg_node(node, *where[node.name]))
    if graph.left_out:
        parts.append(
            f'<text class="more" x="{_MARGIN}" y="{height - _MARGIN - 8}">'
            f"and {graph.left_out} more</text>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _svg_node(node: Node, x: int, y: int) -> str:
    fill, stroke = node.colours or ("#ffffff", "#4a5568")
    facts = " · ".join(fact for fact in (node.action, node.sync, node.health) if fact)
    title = ("allocation " if node.kind == "alloc" else "") + node.name
    title += f" ({node.members} members)" if node.members else ""
    radius = 14 if node.kind == "alloc" else 6
    # A failure drawn thick as well as red: seen at a glance among a hundred nodes.
    stroke_width = 4 if node.health in ("failed", "blocked") else 2
    dash = ' stroke-dasharray="6 3"' if node.health == "blocked" else ""
    attributes = " ".join(
        f'data-{key}="{_xml(value)}"'
        for key, value in (
            ("name", node.name),
            ("kind", node.kind),
            ("sync", node.sync or ""),
            ("health", node.health or ""),
            ("action", node.action or ""),
            ("members", str(node.members) if node.members else ""),
        )
    )
    dot = ""
    if node.health is not None and node.health in _HEALTH_COLOURS:
        dot = (
            f'<circle class="health" cx="{x + _BOX_WIDTH - 12}" cy="{y + 12}" r="6" '
            f'fill="{_HEALTH_COLOURS[node.health]}"><title>{_xml(node.health)}</title></circle>'
        )
    return (
        f'<g class="node" {attributes} tabindex="0" role="button">'
        f"<title>{_xml(node.label)}</title>"
        f'<rect x="{x}" y="{y}" width="{_BOX_WIDTH}" height="{_BOX_HEIGHT}" rx="{radius}" '
        f'fill="{fill}" stroke="{stroke}" stroke-width="{stroke_width}"{dash}/>'
        f'<text x="{x + 10}" y="{y + 19}" font-weight="bold">{_xml(_clip(title, 28))}</text>'
        f'<text class="facts" x="{x + 10}" y="{y + 36}" fill="#4a5568">{_xml(facts)}</text>'
        f"{dot}</g>"
    )


def _clip(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _xml(text: str) -> str:
    return (
        text.replace("&", "&amp;")
        .replace("<", "&lt;")
        .replace(">", "&gt;")
        .replace('"', "&quot;")
        .replace("'", "&#39;")
    )


RENDERERS = {"mermaid": as_mermaid, "dot": as_dot, "json": as_json, "svg": as_svg}


def _by_sweep(graph: Graph) -> Graph:
    """Each sweep's members as one node, where its first member stands: a 10,000-member
    sweep is one box. Its action and sync are the commonest among its members', its health
    the worst (``states.aggregate``): one failed member makes the sweep's node red."""
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
                    health=_worst(member.health for member in members),
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


def _worst(healths: Iterable[str | None]) -> str | None:
    known = [Health(health) for health in healths if health is not None]
    return aggregate(known).value if known else None


def _commonest(values: Iterable[str | None]) -> str | None:
    counts = Counter(value for value in values if value is not None)
    return counts.most_common(1)[0][0] if counts else None
