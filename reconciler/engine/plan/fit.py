"""Whether a run's node shapes can ever be placed on the cluster's nodes. Pure.

Slurm accepts a job that asks more than any node of its partition has and leaves it
pending for good (or refuses it only at submission, one job at a time). Checking every
run against the partitions up front turns that into one clear reason per run, before
anything is submitted.

The check is about what could ever fit, not what is free now: busy nodes count, and so do
drained and down ones (``Node.unavailable``), since they usually come back. A run meant
only for nodes that are out today is therefore not refused; it waits, as it would in Slurm.

What it judges, per component: the partition it names (or the default one) exists; enough
nodes of it (``nodes``, default one) each offer the CPUs, memory, GPUs of the type asked
(types match in any case; an untyped request takes any type) and the features of the
constraint. Constraints beyond plain ``a&b`` or ``a|b`` (counts, brackets, negation) are
not judged: such a component may fit. A het job's components are placed on distinct nodes:
on the dev cluster, components that both had to fit on one node never started.

``FitChecker`` reads the partitions once and remembers each distinct request's answer, so
a sweep of thousands of runs with a handful of shapes costs a handful of checks.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol

from reconciler.desired.models import NodeShape, RunResources
from reconciler.scheduler.partitions import Node, Partition
from reconciler.words import listed, plural

Shapes = RunResources | NodeShape | Sequence[NodeShape]

_FEATURE = r"[A-Za-z0-9_.:-]+"
_ALL_OF = re.compile(rf"^{_FEATURE}(?:&{_FEATURE})*$")
_ANY_OF = re.compile(rf"^{_FEATURE}(?:\|{_FEATURE})+$")


@dataclass(frozen=True)
class _Constraint:
    """``a&b`` (every feature) or ``a|b`` (at least one)."""

    features: frozenset[str]
    any_of: bool
    text: str

    def met_by(self, features: frozenset[str]) -> bool:
        if self.any_of:
            return bool(self.features & features)
        return self.features <= features


@functools.lru_cache(maxsize=1024)
def _constraint(text: str | None) -> _Constraint | None:
    """The features a constraint asks for; None when there is none or it is too fancy to
    judge here (so it asks nothing of the check)."""
    if text is None:
        return None
    if _ALL_OF.match(text):
        return _Constraint(frozenset(text.split("&")), any_of=False, text=text)
    if _ANY_OF.match(text):
        return _Constraint(frozenset(text.split("|")), any_of=True, text=text)
    return None


@dataclass(frozen=True)
class _Need:
    """What one component asks of each of its nodes, in plain numbers; hashable, so each
    distinct request is judged once."""

    partition: str
    cpus: int
    memory_mb: int
    gpu_type: str | None
    gpus: int
    constraint: _Constraint | None
    nodes: int
    shards: int = 0
    gres: tuple[tuple[str, str | None, int, str], ...] = ()  # name, type, count, as written

    @classmethod
    def of(cls, shape: NodeShape, partition: str) -> _Need:
        if isinstance(shape, RunResources):  # a run's step: its tasks' GPUs together
            gpus, gpu_type = shape.step_gpus, shape.step_gpu_type
        else:
            asked = shape.node_gpus
            gpus, gpu_type = (asked.count, asked.type) if asked else (0, None)
        gres = []
        for key, count in sorted(shape.gres.items()):
            name, _, kind = key.partition(":")
            gres.append((name, kind.lower() or None, count.count, f"{key}:{count.text}"))
        return cls(
            partition=partition,
            cpus=shape.cpus.count if shape.cpus else 0,
            memory_mb=shape.memory.mebibytes if shape.memory else 0,
            gpu_type=gpu_type.lower() if gpu_type else None,
            gpus=gpus,
            constraint=_constraint(shape.constraint),
            nodes=shape.nodes or 1,
            shards=shape.shards or 0,
            gres=tuple(gres),
        )

    def describe(self) -> str:
        parts = []
        if self.cpus:
            parts.append(f"{self.cpus} CPUs")
        if self.memory_mb:
            parts.append(f"{self.memory_mb} MiB memory")
        if self.gpus:
            parts.append(_gpus(self.gpus, self.gpu_type))
        if self.shards:
            parts.append(plural(self.shards, "GPU shard"))
        parts.extend(f"gres {written}" for *_, written in self.gres)
        if self.constraint:
            parts.append(f"features {self.constraint.text}")
        return ", ".join(parts)


@dataclass(frozen=True)
class _Kind:
    """Nodes alike in everything the check looks at, partitions included, and how many."""

    node: Node
    partitions: frozenset[str]
    features: frozenset[str]
    count: int

    def offers(self, need: _Need) -> bool:
        return (
            need.partition in self.partitions
            and self.node.cpus >= need.cpus
            and self.node.memory_mb >= need.memory_mb
            and (not need.gpus or self.node.gpus(need.gpu_type) >= need.gpus)
            and self.node.gres_count("shard") >= need.shards
            and all(self.node.gres_count(n, t) >= count for n, t, count, _ in need.gres)
            and (need.constraint is None or need.constraint.met_by(self.features))
        )


@dataclass(frozen=True)
class _Limits:
    """The most any node of one partition offers, dimension by dimension."""

    nodes: int
    cpus: int
    memory_mb: int
    gpus: int
    gpus_by_type: dict[str, int]
    features: frozenset[str]
    nodes_in: tuple[Node, ...] = ()  # for what the other GRES ask: rarely asked, read there

    @classmethod
    def of(cls, partition: Partition) -> _Limits:
        nodes = partition.nodes
        by_type: dict[str, int] = {}
        for node in nodes:
            for gres in node.gres:
                if gres.name == "gpu" and gres.type is not None:
                    kind = gres.type.lower()
                    by_type[kind] = max(by_type.get(kind, 0), node.gpus(kind))
        return cls(
            nodes=len(nodes),
            cpus=max((node.cpus for node in nodes), default=0),
            memory_mb=max((node.memory_mb for node in nodes), default=0),
            gpus=max((node.gpus() for node in nodes), default=0),
            gpus_by_type=by_type,
            features=frozenset(feature for node in nodes for feature in node.features),
            nodes_in=nodes,
        )

    def shortfalls(self, need: _Need) -> list[str]:
        """Each dimension in which even the best node of the partition falls short."""
        short = []
        if need.nodes > self.nodes:
            short.append(f"asks {need.nodes} nodes; it has {self.nodes}")
        if need.cpus > self.cpus:
            short.append(f"asks {need.cpus} CPUs per node; the most any node has is {self.cpus}")
        if need.memory_mb > self.memory_mb:
            short.append(
                f"asks {need.memory_mb} MiB memory per node; "
                f"the most any node has is {self.memory_mb} MiB"
            )
        if need.gpus:
            short.extend(self._gpu_shortfall(need))
        if need.shards:
            asks = f"asks {plural(need.shards, 'GPU shard')} per node"
            short.extend(self._gres_shortfall(asks, "shard", None, need.shards))
        for name, kind, count, written in need.gres:
            short.extend(self._gres_shortfall(f"asks gres {written} per node", name, kind, count))
        if need.constraint is not None:
            short.extend(self._feature_shortfall(need.constraint))
        return short

    def _gpu_shortfall(self, need: _Need) -> list[str]:
        most = self.gpus if need.gpu_type is None else self.gpus_by_type.get(need.gpu_type, 0)
        if need.gpus <= most:
            return []
        asks = f"asks {_gpus(need.gpus, need.gpu_type)} per node"
        if most:
            return [f"{asks}; the most any node has is {most}"]
        if need.gpu_type is None or not self.gpus_by_type:
            return [f"{asks}; no node has any GPU"]
        types = ", ".join(sorted(self.gpus_by_type))
        return [f"{asks}; no node has that type (GPU types here: {types})"]

    def _gres_shortfall(self, asks: str, name: str, kind: str | None, count: int) -> list[str]:
        """A shard or other GRES even the best node lacks, and what the nodes have."""
        most = max((node.gres_count(name, kind) for node in self.nodes_in), default=0)
        if count <= most:
            return []
        if most:
            return [f"{asks}; the most any node has is {most}"]
        offered = sorted({g for node in self.nodes_in if (g := node.gres_text)})
        have = f"the nodes have: {'; '.join(offered)}" if offered else "no node has any GRES"
        what = f"{name}:{kind}" if kind else name
        return [f"{asks}; no node has {what} ({have})"]

    def _feature_shortfall(self, constraint: _Constraint) -> list[str]:
        missing = sorted(constraint.features - self.features)
        if constraint.any_of and len(missing) == len(constraint.features):
            return [f"asks one of the features {constraint.text}; no node has any of them"]
        if not constraint.any_of and missing:
            noun = "feature" if len(missing) == 1 else "features"
            return [f"asks features {constraint.text}; no node has the {noun} {', '.join(missing)}"]
        return []


class Fit(Protocol):
    """The cluster's shapes, as the planner asks them: why a run cannot be held, or None.
    ``FitChecker`` (a Slurm cluster's partitions) and ``MachineFit`` (this machine)."""

    def why_not(self, resources: RunResources) -> str | None: ...


class FitChecker:
    """The cluster's partitions, read once, against which many runs are checked."""

    def __init__(self, partitions: Iterable[Partition]) -> None:
        listed = tuple(partitions)
        self._limits = {partition.name: _Limits.of(partition) for partition in listed}
        self._default = next((p.name for p in listed if p.default), None)
        self._kinds = _kinds(listed)
        self._judged: dict[_Need, tuple[str | None, tuple[int, ...]]] = {}
        # id -> (the resources, their verdict): runs written alike share one resources
        # object (``DesiredRun.resources``); kept, so that no id is reused while here.
        self._verdicts: dict[int, tuple[Shapes, str | None]] = {}

    def why_not(self, resources: Shapes) -> str | None:
        """None when the run can be placed; else why not, naming the component (in a het
        job), the partition, and what is short."""
        known = self._verdicts.get(id(resources))
        if known is not None and known[0] is resources:
            return known[1]
        verdict = self._why_not(resources)
        self._verdicts[id(resources)] = (resources, verdict)
        return verdict

    def _why_not(self, resources: Shapes) -> str | None:
        shapes = _shapes(resources)
        het = len(shapes) > 1
        needs: list[_Need] = []
        eligible: list[tuple[int, ...]] = []
        for index, shape in enumerate(shapes):
            partition = shape.partition or self._default
            if partition is None:
                who = f"component {index}" if het else "the run"
                return f"{who} names no partition and the cluster has no default partition"
            where = f"{'partition' if shape.partition else 'default partition'} {partition}"
            label = f"component {index} ({where})" if het else where
            if partition not in self._limits:
                known = ", ".join(sorted(self._limits)) or "none"
                return f"{label}: the cluster has no such partition (it has: {known})"
            need = _Need.of(shape, partition)
            reason, kinds = self._judge(need)
            if reason is not None:
                return f"{label}: {reason}"
            needs.append(need)
            eligible.append(kinds)
        return self._distinct_nodes(needs, eligible) if het else None

    def _judge(self, need: _Need) -> tuple[str | None, tuple[int, ...]]:
        """Why one component alone cannot fit (or None), and the kinds of node that can
        take it; remembered per distinct request."""
        if need not in self._judged:
            kinds = tuple(i for i, kind in enumerate(self._kinds) if kind.offers(need))
            self._judged[need] = (self._reason(need, kinds), kinds)
        return self._judged[need]

    def _reason(self, need: _Need, kinds: tuple[int, ...]) -> str | None:
        short = self._limits[need.partition].shortfalls(need)
        if short:
            return "; ".join(short)
        fitting = sum(self._kinds[i].count for i in kinds)
        if fitting >= need.nodes:
            return None
        # Every dimension is met by some node, but not all of them by the same nodes.
        if not fitting:
            return f"no single node has {need.describe()} together"
        verb = "has" if fitting == 1 else "have"
        return f"asks {need.nodes} nodes with {need.describe()}; only {fitting} {verb} that"

    def _distinct_nodes(self, needs: list[_Need], eligible: list[tuple[int, ...]]) -> str | None:
        """A het job's components on distinct nodes, or why they cannot be."""
        placement = _Placement([kind.count for kind in self._kinds], eligible)
        for component, need in enumerate(needs):
            for _ in range(need.nodes):
                contested = placement.add(component)
                if contested is not None:
                    return self._crowded(component, contested, needs, placement)
        return None

    def _crowded(
        self, short: int, contested: set[int], needs: list[_Need], placement: _Placement
    ) -> str:
        """Why components cannot all have nodes of their own: the components competing for
        the same nodes (all of them taken), how many they want and how many there are."""
        group = sorted({short} | placement.holders(contested))
        wanted = sum(needs[c].nodes for c in group)
        nodes = sum(self._kinds[k].count for k in contested)
        partitions = sorted({needs[c].partition for c in group})
        where = f"partition{'s' if len(partitions) > 1 else ''} {', '.join(partitions)}"
        return (
            f"components {listed([str(c) for c in group])} ({where}) need {wanted} distinct "
            f"nodes between them, and only {nodes} can take them; "
            "het components do not share a node"
        )


class _Placement:
    """Nodes handed to components, kind by kind, each kind at most as often as it has nodes.

    ``add`` is one step of bipartite matching (Kuhn's augmenting paths, with kinds of node
    standing for their interchangeable nodes): when every node a component could take is
    held, a holder that can move to another node is moved. Het jobs have few components,
    and clusters few kinds of node, so this stays small.
    """

    def __init__(self, free: list[int], eligible: list[tuple[int, ...]]) -> None:
        self._free = free
        self._eligible = eligible
        self._taken = [Counter[int]() for _ in eligible]

    def add(self, component: int) -> set[int] | None:
        """One more node for ``component``: None when placed, else the kinds of node that
        were tried (all taken, by components that cannot move)."""
        tried: set[int] = set()
        return None if self._place(component, tried) else tried

    def holders(self, kinds: set[int]) -> set[int]:
        return {c for c, taken in enumerate(self._taken) if any(taken[k] for k in kinds)}

    def _place(self, component: int, tried: set[int]) -> bool:
        for kind in self._eligible[component]:
            if kind in tried:
                continue
            tried.add(kind)
            if self._free[kind]:
                self._free[kind] -= 1
            elif not self._move_a_holder(kind, tried):
                continue
            self._taken[component][kind] += 1
            return True
        return False

    def _move_a_holder(self, kind: int, tried: set[int]) -> bool:
        """Free one node of ``kind`` by giving its holder a node of another kind."""
        for holder, taken in enumerate(self._taken):
            # `kind` is in `tried`, so the holder's new node is never of this kind.
            if taken[kind] and self._place(holder, tried):
                taken[kind] -= 1
                return True
        return False


def why_not_fit(resources: Shapes, partitions: Iterable[Partition]) -> str | None:
    """One run against the partitions; for many runs, keep one ``FitChecker``."""
    return FitChecker(partitions).why_not(resources)


def _kinds(partitions: Sequence[Partition]) -> list[_Kind]:
    """Every node once, with all the partitions it is in, folded into kinds of alike nodes."""
    homes: dict[str, tuple[Node, set[str]]] = {}
    for partition in partitions:
        for node in partition.nodes:
            homes.setdefault(node.name, (node, set()))[1].add(partition.name)
    alike: dict[tuple[object, ...], _Kind] = {}
    for node, names in homes.values():
        features, where = frozenset(node.features), frozenset(names)
        key = (node.cpus, node.memory_mb, node.gres, features, where)
        seen = alike.get(key)
        count = seen.count + 1 if seen else 1
        alike[key] = _Kind(node=node, partitions=where, features=features, count=count)
    return list(alike.values())


def _gpus(count: int, gpu_type: str | None) -> str:
    gpus = plural(count, "GPU")
    return f"{gpus} of type {gpu_type}" if gpu_type else gpus


def _shapes(resources: Shapes) -> Sequence[NodeShape]:
    # A plain run's resources are its one node shape already (``RunResources.shapes``
    # would build a copy, the dearest step of a check).
    if isinstance(resources, RunResources) and resources.components:
        return resources.components
    if isinstance(resources, NodeShape):
        return (resources,)
    return resources


@dataclass(frozen=True)
class MachineFit:
    """The fit check for the local backend, which ignores partitions, memory and GPU
    types: only CPUs and GPUs can keep a job waiting for ever there, and a het job's
    components run as one local job, so their CPUs and GPUs add up."""

    cpus: int
    gpus: int = 0

    @classmethod
    def of(cls, partitions: Iterable[Partition]) -> MachineFit:
        nodes = [node for p in partitions for node in p.nodes]
        return cls(
            cpus=max((node.cpus for node in nodes), default=0),
            gpus=max((node.gpus() for node in nodes), default=0),
        )

    def why_not(self, resources: Shapes) -> str | None:
        shapes = _shapes(resources)
        asked = sum((s.cpus.count if s.cpus else 1) * (s.nodes or 1) for s in shapes)
        if asked > self.cpus:
            return (
                f"asks {asked} CPUs in all; this machine has {self.cpus} "
                "(the local backend runs a job on this one machine)"
            )
        gpus = sum(s.gpus.count * (s.nodes or 1) for s in shapes if s.gpus)
        if gpus > self.gpus:
            has = "none" if not self.gpus else str(self.gpus)
            return (
                f"asks {plural(gpus, 'GPU')} in all; this machine has {has} (the local "
                "backend hands out only the GPUs that RECON_LOCAL_GPUS or recon.yaml's "
                "local.gpus declares or, where neither does, that nvidia-smi -L lists)"
            )
        return None
