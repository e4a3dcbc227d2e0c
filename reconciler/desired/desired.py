"""The desired state at one commit: effective specs (defaults applied) and their hashes.

The spec hash is a run's identity for "has it changed?". It covers what changes a
result: the effective resources, command or script content, environment, inputs,
outputs and directory. It leaves out what does not: description, labels, the retry
count, the update and teardown policies, coupling and the allocation a run runs in
(changing how many retries a run gets must not rerun a 12-hour job), an allocation's
min_remaining, and everything about the YAML text itself (comments,
key order, quoting).
Values are hashed in canonical form, so `32GiB` and `32768MiB` are the same spec.
"""

from __future__ import annotations

import enum
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, NamedTuple, TypeVar

from pydantic import BaseModel

from reconciler.desired.checkpoint import NOT_HASHED as CHECKPOINT_NOT_HASHED
from reconciler.desired.matrix import Member
from reconciler.desired.models import (
    Allocation,
    Defaults,
    Environment,
    HashKind,
    NodeShape,
    Project,
    Run,
    RunResources,
    upstream_of,
)

S = TypeVar("S", bound=NodeShape)
M = TypeVar("M", bound=BaseModel)
T = TypeVar("T")

# `allocation` says where a run runs, not what it computes; `min_remaining` is when an
# allocation is renewed, `setup_retries` how often its setup is tried and `idle_release`
# when it is given back, not what it is.
NOT_HASHED = {
    "description",
    "labels",
    "retries",
    # what a retry raises goes with the retry, never into the spec
    "on_oom",
    "on_timeout",
    "update",
    "teardown",
    "coupled_with",
    "allocation",
    # A name the run had before: the move judges it by the hash it had then
    # (``former_identity``), and once moved it may stay or go, so it changes nothing.
    "renamed_from",
    # Which files are the run's code: their versions are compared job by job instead
    # (``DesiredRun.code``), so adding a glob reruns only what changed.
    "code",
    "min_remaining",
    "setup_retries",
    "idle_release",
    # A member's values are in its name and directory; the axes as a whole are not any
    # member's identity, and how many run at once changes no result.
    "matrix",
    "max_parallel",
    # Whether passes act on it, not what it computes: un-suspended, it goes on where it was.
    "suspend",
}


_NO_CODE: Mapping[str, str] = MappingProxyType({})


@dataclass(frozen=True)
class Location:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


class DeclaredOutput(NamedTuple):
    """An output as the run declares it (``Output``), in the run's shape."""

    path: str
    marker: str | None
    hash: HashKind


class DeclaredInput(NamedTuple):
    """An input as the run declares it (``Input``): another run's output or a path."""

    from_: str | None
    path: str | None

    @property
    def upstream(self) -> tuple[str, str] | None:
        """(run, output) when this input is another run's output (``upstream_of``)."""
        return upstream_of(self.from_)


class EnvironmentKind(enum.Enum):
    """How a run's job gets its environment (``scheduler/jobenv``)."""

    NONE = "none"  # nothing declared: the clean base alone
    DECLARED = "declared"  # the clean base and what it declares
    INHERIT = "inherit"  # whoever applies: `environment: {inherit: true}`

    @classmethod
    def of(cls, environment: Environment | None) -> EnvironmentKind:
        if environment is None:
            return cls.NONE
        if environment.inherit:
            return cls.INHERIT
        return cls.DECLARED


@dataclass(frozen=True, slots=True)
class RunShape:
    """What a pass reads of every run, current or not: where it runs and writes, what it
    reads and what it is coupled with. The loader knows it from the document's summary,
    so a plan of 10,000 current runs builds none of their models."""

    name: str
    workdir: str  # effective: relative to the project folder unless absolute
    allocation: str | None
    coupled_with: tuple[str, ...]
    outputs: Mapping[str, DeclaredOutput]
    inputs: Mapping[str, DeclaredInput]
    # Its effective environment's kind: what a plan warns of, read for every run.
    environment: EnvironmentKind = EnvironmentKind.NONE
    suspended: bool = False  # its own `suspend: true` (a sweep's member: its sweep's)

    @classmethod
    def of(cls, run: Run) -> RunShape:
        """The shape of an effective run (its workdir filled in)."""
        assert run.workdir is not None, "an effective run has its workdir"
        outputs = {
            name: DeclaredOutput(output.path, output.marker, output.hash)
            for name, output in run.outputs.items()
        }
        inputs = {name: DeclaredInput(item.from_, item.path) for name, item in run.inputs.items()}
        return cls(
            run.name,
            run.workdir,
            run.allocation,
            run.coupled_with,
            outputs,
            inputs,
            EnvironmentKind.of(run.environment),
            run.suspend,
        )


class DesiredRun:
    """One run as desired at a commit. Its model (`spec`: effective, project defaults
    applied, workdir filled in) is built on first use; its shape and, for most runs, its
    hash are known before."""

    __slots__ = (
        "_build",
        "_hash",
        "_resources",
        "_spec",
        "code",
        "environment_blobs",
        "gathers",
        "location",
        "member",
        "script_text",
        "shape",
    )

    def __init__(
        self,
        spec: Run | Callable[[], Run],
        *,  # a wide record: every other field by name
        location: Location,
        spec_hash: str | Callable[[], str],
        script_text: str | None = None,  # the content of `script:` at the same commit
        member: Member | None = None,  # for a sweep's member: its sweep and values
        # input -> the sweep members whose output it gathers (an input reading one run: absent)
        gathers: Mapping[str, tuple[str, ...]] | None = None,
        shape: RunShape | None = None,  # required with a `spec` still to be built
        # its effective resources before its model is built (default: the model's)
        resources: RunResources | Callable[[], RunResources] | None = None,
        # every file an `environment:` of the load declares -> its blob id at the commit
        environment_blobs: Mapping[str, str] | None = None,
        # its code: each committed file its command names or `code:` lists -> git blob id
        code: Mapping[str, str] | None = None,
    ) -> None:
        self._spec = spec if isinstance(spec, Run) else None
        self._build = None if isinstance(spec, Run) else spec
        self._hash = spec_hash
        self._resources = resources
        if shape is None:
            assert isinstance(spec, Run), "a run built later needs its shape now"
            shape = RunShape.of(spec)
        self.shape = shape
        self.location = location
        self.script_text = script_text
        self.member = member
        self.gathers: Mapping[str, tuple[str, ...]] = gathers or {}
        self.environment_blobs: Mapping[str, str] = environment_blobs or {}
        self.code: Mapping[str, str] = code or _NO_CODE

    def with_resources(self, resources: RunResources) -> DesiredRun:
        """The same run (its hash kept) asking for other resources: a retry's raised
        memory or time (``engine/plan/raises``), which is no new spec."""
        return DesiredRun(
            self.spec.model_copy(update={"resources": resources}),
            location=self.location,
            spec_hash=self.spec_hash,
            script_text=self.script_text,
            member=self.member,
            gathers=self.gathers,
            shape=self.shape,
            environment_blobs=self.environment_blobs,
            code=self.code,
        )

    @property
    def spec(self) -> Run:
        if self._spec is None:
            assert self._build is not None
            self._spec = self._build()
            self._build = None
        return self._spec

    @property
    def resources(self) -> RunResources:
        """Its effective resources (``spec.resources``), known without building its model
        where the loader can tell them: deciding whether 10,000 new runs fit the cluster
        needs only the few distinct resources they ask for."""
        if self._spec is not None or self._resources is None:
            return self.spec.resources
        if not isinstance(self._resources, RunResources):
            self._resources = self._resources()
        return self._resources

    @property
    def spec_hash(self) -> str:
        if not isinstance(self._hash, str):
            self._hash = self._hash()
        return self._hash

    @property
    def environment_files(self) -> dict[str, str]:
        """Each file its environment declares -> its blob id at the commit."""
        environment = self.spec.environment
        if environment is None:
            return {}
        return {path: self.environment_blobs[path] for path in environment.files}

    @property
    def built(self) -> bool:
        """Whether the model has been built (a pass over current runs builds none)."""
        return self._spec is not None

    @property
    def name(self) -> str:
        return self.shape.name

    @property
    def workdir(self) -> str:
        return self.shape.workdir

    @property
    def allocation(self) -> str | None:
        return self.shape.allocation

    @property
    def coupled_with(self) -> tuple[str, ...]:
        return self.shape.coupled_with

    @property
    def outputs(self) -> Mapping[str, DeclaredOutput]:
        return self.shape.outputs

    @property
    def inputs(self) -> Mapping[str, DeclaredInput]:
        return self.shape.inputs

    @property
    def sweep(self) -> str | None:
        return self.member.sweep if self.member is not None else None

    def __repr__(self) -> str:
        return f"DesiredRun({self.name!r}, {self.location}, {self.spec_hash[:12]})"


@dataclass(frozen=True)
class DesiredAllocation:
    spec: Allocation
    location: Location
    spec_hash: str

    @property
    def name(self) -> str:
        return self.spec.name


@dataclass(frozen=True)
class Sweep:
    """A run with a matrix: its members' names in a stable order, and how many may run at once."""

    name: str
    members: tuple[str, ...]
    max_parallel: int | None
    axes: tuple[str, ...]


class LoadMemo:
    """What the loader keeps of one load for a later one (desired/loader.Loaded, its one
    kind): opaque here, so the desired state needs nothing of the loader that makes it."""


@dataclass(frozen=True)
class Desired:
    project: Project
    root: Path
    commit: str | None  # None when read from the work tree
    runs: Mapping[str, DesiredRun]
    allocations: Mapping[str, DesiredAllocation]
    upstreams: Mapping[str, tuple[str, ...]]  # run -> the runs whose outputs it reads
    warnings: tuple[str, ...] = ()  # what is valid but likely not what the author meant
    sweeps: Mapping[str, Sweep] = field(default_factory=dict)  # runs with a matrix
    # what the loader made it from, for a load of a later commit that changes a few runs
    # (``loader.reload``); None where it was not loaded from a commit
    loaded: LoadMemo | None = field(default=None, compare=False, repr=False)
    # a run (a sweep, by its own name) -> the name it says it had (`renamed_from`)
    renamed: Mapping[str, str] = field(default_factory=dict)


class LazyMapping(Mapping[str, T]):
    """A mapping whose values are built on first access, then kept.

    A sweep's Desired holds thousands of runs; a validation or a plan that finds them
    current never needs their models, only their names and hashes.
    """

    def __init__(
        self,
        keys: Iterable[str],
        build: Callable[[str], T],
        known_hash: Callable[[str], str | None] = lambda _key: None,
        known_code: Callable[[str], Mapping[str, str]] | None = None,
    ) -> None:
        """`known_hash`: a value's spec hash when it is known without building the value
        (``spec_hash_of``); `known_code`: a run's code files, likewise (``code_of``)."""
        self._keys = list(keys)
        self._known = set(self._keys)
        self._build = build
        self._built: dict[str, T] = {}
        self.known_hash = known_hash
        self.known_code = known_code

    def __getitem__(self, key: str) -> T:
        if key not in self._built:
            if key not in self._known:
                raise KeyError(key)
            self._built[key] = self._build(key)
        return self._built[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._keys)

    def __len__(self) -> int:
        return len(self._keys)

    def __contains__(self, key: object) -> bool:
        return key in self._known


def spec_hash_of(
    entries: Mapping[str, DesiredRun] | Mapping[str, DesiredAllocation], name: str
) -> str:
    """The spec hash of one run or allocation, without building its model where the loader
    knows it already: comparing two commits of 10,000 runs needs only their hashes."""
    if isinstance(entries, LazyMapping) and (known := entries.known_hash(name)) is not None:
        return known
    return entries[name].spec_hash


def code_of(runs: Mapping[str, DesiredRun], name: str) -> Mapping[str, str]:
    """A run's code files -> blob id (``DesiredRun.code``), without building the run where
    the loader knows them: comparing two commits of 10,000 runs builds only those that
    differ."""
    if isinstance(runs, LazyMapping) and runs.known_code is not None:
        return runs.known_code(name)
    return runs[name].code


def former_identity(desired: Desired, name: str) -> tuple[str, str] | None:
    """The name and spec hash run ``name`` had before the renames its commit declares
    (`renamed_from`): its own, and those of the runs whose outputs it reads, which its
    inputs named by their old names. None when neither applies.

    The hash covers the name, the default directory (`<runs_dir>/<name>`) and each
    input's reference as written, so a renamed run, and a run that reads one, hash
    differently from before; "otherwise unchanged" is this hash equal to the hash of the
    jobs of the old name (``engine/plan/moves``)."""
    renamed = desired.renamed
    if not renamed:
        return None
    run = desired.runs[name]
    document = run.member.sweep if run.member is not None else name
    old = renamed.get(document)
    reads = {
        key: item.from_
        for key, item in run.inputs.items()
        if item.from_ is not None and _document_of(item.from_) in renamed
    }
    if old is None and not reads:
        return None
    spec = run.spec
    update: dict[str, Any] = {}
    former = name
    if old is not None:
        former = old + name[len(document) :]
        update["name"] = former
        runs_dir = desired.project.runs_dir
        default = run_workdir(None, runs_dir, document)
        assert spec.workdir is not None, "an effective run has its workdir"
        if spec.workdir == default or spec.workdir.startswith(default + "/"):
            update["workdir"] = run_workdir(None, runs_dir, old) + spec.workdir[len(default) :]
    if reads:
        inputs = dict(spec.inputs)
        for key, reference in reads.items():
            upstream = _document_of(reference)
            inputs[key] = inputs[key].model_copy(
                update={"from_": renamed[upstream] + reference[len(upstream) :]}
            )
        update["inputs"] = inputs
    before = spec.model_copy(update=update)
    return former, spec_hash(before, run.script_text, run.environment_blobs)


def former_allocation(desired: Desired, name: str) -> tuple[str, str] | None:
    """The name and spec hash allocation ``name`` had before its `renamed_from`; None
    when it says none. Its hash covers its name, as a run's does."""
    old = desired.renamed.get(name)
    if old is None:
        return None
    spec = desired.allocations[name].spec
    return old, spec_hash(spec.model_copy(update={"name": old}))


def _document_of(reference: str) -> str:
    """The run or sweep an input's `from:` names: `seeds` of `seeds[seed=0].model`."""
    return reference.partition(".")[0].partition("[")[0]


def run_workdir(workdir: str | None, runs_dir: str, name: str) -> str:
    """A run's directory, relative to the project folder unless absolute: its own
    `workdir`, or `<runs_dir>/<name>`."""
    return workdir or f"{runs_dir.rstrip('/')}/{name}"


def effective_run(run: Run, project: Project) -> Run:
    """The run as it will be submitted: project defaults fill what the run leaves out."""
    resources = effective_resources(run.resources, project)
    workdir = run_workdir(run.workdir, project.runs_dir, run.name)
    environment = effective_environment(run.environment, project)
    return run.model_copy(
        update={"resources": resources, "workdir": workdir, "environment": environment}
    )


def effective_environment(own: Environment | None, project: Project) -> Environment | None:
    """A run's environment: each field it sets, and `defaults.environment`'s for the rest.
    A run that names its venv or conda env takes neither from the defaults: a job
    activates one."""
    default = project.defaults.environment
    if default is None:
        return own
    if own is None:
        return default
    taken = set(own.model_fields_set)
    if taken & {"venv", "conda"}:
        taken |= {"venv", "conda"}
    update = {
        name: getattr(default, name)
        for name in Environment.model_fields
        if name not in taken and name in default.model_fields_set
    }
    return own.model_copy(update=update) if update else own


def effective_resources(resources: RunResources, project: Project) -> RunResources:
    """A run's resources as they will be asked for: project defaults fill what it leaves out."""
    resources = _with_job_defaults(resources, project.defaults)
    if resources.components:
        components = tuple(_with_shape_defaults(c, project.defaults) for c in resources.components)
        return resources.model_copy(update={"components": components})
    return _with_shape_defaults(resources, project.defaults)


def effective_allocation(allocation: Allocation, project: Project) -> Allocation:
    resources = _with_shape_defaults(allocation.resources, project.defaults)
    resources = _with_defaults(resources, project.defaults, ("account", "qos"))
    return allocation.model_copy(update={"resources": resources})


def _with_job_defaults(resources: RunResources, defaults: Defaults) -> RunResources:
    return _with_defaults(resources, defaults, ("time", "account", "qos"))


def _with_defaults(model: M, defaults: Defaults, names: tuple[str, ...]) -> M:
    update = {
        name: getattr(defaults, name)
        for name in names
        if getattr(model, name) is None and getattr(defaults, name) is not None
    }
    return model.model_copy(update=update) if update else model


def _with_shape_defaults(shape: S, defaults: Defaults) -> S:
    return _with_defaults(shape, defaults, ("partition", "memory"))


_GPU_FORMS_ADDED: tuple[tuple[str, object], ...] = (
    ("gpus_per_node", None),
    ("gpus_per_task", None),
    ("shards", None),
    ("gres", {}),
)


def _without_unset_gpu_forms(data: dict[str, Any]) -> None:
    """The GPU forms added after whole GPUs by type (a MIG type is a `gpus` value) stay
    out of the hash and the shown fields while unset, so a run that uses none of them
    keeps the hash it had."""
    resources = data["resources"]
    for shape in (resources, *resources.get("components", ())):
        for name, unset in _GPU_FORMS_ADDED:
            if name in shape and shape[name] == unset:
                del shape[name]


def canonical_fields(
    spec: Run | Allocation, environment_files: Mapping[str, str] | None = None
) -> dict[str, Any]:
    """What the hash covers, as plain JSON data. `environment_files`: the blob id of
    each file the run's environment declares, at the commit."""
    data: dict[str, Any] = spec.model_dump(
        mode="json", by_alias=True, exclude=NOT_HASHED, context={"canonical": True}
    )
    # Fields added later stay out of the hash while unset, so a job made by an older recon
    # is still its spec's current job: allocations took no account or qos before, nor
    # container options, and runs no step layout.
    added = ("account", "qos") if isinstance(spec, Allocation) else ("ntasks", "ntasks_per_node")
    for name in added:
        if data["resources"][name] is None:
            del data["resources"][name]
    _without_unset_gpu_forms(data)
    if isinstance(spec, Run):  # nor an environment, unless one is declared
        _without_staged(data)
        _checkpoint_hashed(data)
        data["environment"] = _canonical_environment(spec.environment, environment_files or {})
        if data["environment"] is None:
            del data["environment"]
    container = data.get("container")
    if container is not None:  # nor container options
        for name, unset in (("writable", False), ("workdir", None)):
            if container[name] == unset:
                del container[name]
    return data


def _checkpoint_hashed(data: dict[str, Any]) -> None:
    """A checkpoint's folder, signal and warning are in the hash, how many requeues it
    may take is not (as `retries`); a run without one keeps the hash it had before
    checkpoints existed."""
    if data.get("checkpoint") is None:
        data.pop("checkpoint", None)
        return
    for name in CHECKPOINT_NOT_HASHED:
        data["checkpoint"].pop(name, None)


def _without_staged(data: dict[str, Any]) -> None:
    """Whether an output is staged says how the job publishes it, not what it computes:
    declaring it reruns nothing, and a spec written before it existed keeps its hash."""
    for output in data["outputs"].values():
        del output["staged"]


def _canonical_environment(
    environment: Environment | None, files: Mapping[str, str]
) -> dict[str, Any] | None:
    """What a job's declared environment adds to its identity: modules in load order, the
    venv or conda environment, the names passed (never their values), and each declared
    file's content by blob id. `inherit` is not: the applier's environment has no version,
    and declaring it must not rerun what ran with it."""
    if environment is None or not environment.declared:
        return None
    data: dict[str, Any] = {}
    if environment.modules:
        data["modules"] = list(environment.modules)
    if environment.venv is not None:
        data["venv"] = environment.venv
    if environment.conda is not None:
        data["conda"] = environment.conda
    if environment.pass_:
        data["pass"] = sorted(environment.pass_)
    if environment.files:
        data["files"] = {path: files[path] for path in sorted(environment.files)}
    return data


def spec_hash(
    spec: Run | Allocation,
    script_text: str | None = None,
    environment_files: Mapping[str, str] | None = None,
) -> str:
    return hash_of_fields(canonical_fields(spec, environment_files), script_text)


def hash_of_fields(fields: dict[str, Any], script_text: str | None = None) -> str:
    """``spec_hash`` from fields already in canonical form: a sweep's members share all
    but their name, directory and inputs, so their fields are built from the sweep's once."""
    material = {"fields": fields, "script": script_text}
    encoded = json.dumps(material, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(encoded).hexdigest()[:16]


def flat_fields(
    spec: Run | Allocation,
    script_text: str | None = None,
    environment_files: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The hashed fields as `dotted.path -> value` in the user's notation, for showing
    what changed between two versions of a spec (`resources.gpus: A100:2 -> A100:4`)."""
    data = spec.model_dump(mode="json", by_alias=True, exclude=NOT_HASHED)
    _without_unset_gpu_forms(data)
    if isinstance(spec, Run):
        _without_staged(data)
        _checkpoint_hashed(data)
        data["environment"] = _canonical_environment(spec.environment, environment_files or {})
        if data["environment"] is not None and "files" in data["environment"]:
            # A file's content by its blob id, under its path as one key.
            files = data["environment"].pop("files")
            data["environment"].update({f"files[{p}] (content)": b[:12] for p, b in files.items()})
    flat: dict[str, Any] = {}
    _flatten(data, "", flat)
    if script_text is not None:
        flat["script (content)"] = "sha256:" + hashlib.sha256(script_text.encode()).hexdigest()[:12]
    return flat


def _flatten(value: Any, prefix: str, into: dict[str, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, item in value.items():
            _flatten(item, f"{prefix}.{key}" if prefix else str(key), into)
    elif isinstance(value, list) and value:
        for index, item in enumerate(value):
            _flatten(item, f"{prefix}[{index}]", into)
    elif value not in (None, {}, []):
        into[prefix] = value


def changed_fields(old: dict[str, Any], new: dict[str, Any]) -> list[tuple[str, Any, Any]]:
    """(field, old, new) for every field that differs, in field order."""
    return [
        (path, old.get(path), new.get(path))
        for path in sorted(old.keys() | new.keys())
        if old.get(path) != new.get(path)
    ]
