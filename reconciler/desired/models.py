"""The desired state as typed, frozen models: `recon.yaml`, `kind: Run`, `kind: Allocation`.

Models validate one document each; what needs the whole project (unique names, inputs
that point at real outputs, template tokens, cycles) is checked by `spec.checks` and
`graph`. Unknown fields are errors everywhere (`extra="forbid"`), so a typo never
silently means "use the default".
"""

from __future__ import annotations

import posixpath
import re
from typing import Annotated, Any, Literal, Self

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    field_validator,
    model_validator,
)
from pydantic.json_schema import SkipJsonSchema

from reconciler.desired.checkpoint import Checkpoint
from reconciler.desired.fields import EnvKey, ModuleName, Name, SafeText, SbatchFlag, env_suffix
from reconciler.desired.matrix import parse_reference
from reconciler.desired.raises import OnOom, OnTimeout
from reconciler.desired.resources import CpuCount, Duration, Gpus, GresCount, Memory, gres_key
from reconciler.desired.retries import Retries

GresKey = Annotated[str, AfterValidator(gres_key)]


class Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


# Settings Slurm applies to the whole job. In a heterogeneous job they sit in the first
# component's block, so recon takes them once, under `resources`, or in components[0].
JOB_WIDE_SETTINGS = ("time", "account", "qos", "dependencies", "output", "error")


class NodeShape(Model):
    """What one node of a job (or of one het component) must offer."""

    cpus: CpuCount | None = Field(None, description="CPUs per task: `8` or `8+`.")
    memory: Memory | None = Field(
        None,
        description="Memory per node. Left out, the cluster's default applies "
        "(DefMemPerCPU), never the whole node.",
    )
    gpus: Gpus | None = Field(
        None,
        description="GPUs per node (`--gres=gpu:`): `4`, `A100:4`, a MIG profile "
        "`1g.10gb:2`, `{A100: 4}`.",
    )
    gpus_per_node: Gpus | None = Field(
        None,
        description="GPUs per node as `--gpus-per-node` asks them (Slurm counts it as "
        "`gpus`); give one of the two.",
    )
    shards: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="GPU shards per node (`--gres=shard:N`, gres.conf's Name=shard): a "
        "share of a GPU that other jobs share too. Not with gpus.",
    )
    gres: dict[GresKey, GresCount] = Field(
        default_factory=dict,
        description="Other generic resources per node, by name (or name:type), e.g. "
        "`{localtmp: 100G}`; rendered into `--gres`.",
    )
    nodes: Annotated[int, Field(ge=1)] | None = None
    partition: Name | None = None
    constraint: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.,&|\[\]*:()!-]+$")] | None = Field(
        None, description="Slurm node features, e.g. `ib&haswell`."
    )
    sbatch_extra: tuple[SbatchFlag, ...] = Field(
        (), description="Bare sbatch long flags recon does not manage, e.g. `--exclusive`."
    )

    @model_validator(mode="after")
    def _one_gpu_form(self) -> Self:
        # Slurm counts --gres=gpu and --gpus-per-node alike: two spellings of one request
        # would add up or override each other. A shard is part of a GPU Slurm picks
        # (gres/shard, like gres/mps): a job asks shards or GPUs, not both.
        if self.gpus is not None and self.gpus_per_node is not None:
            raise ValueError(
                "gpus and gpus_per_node ask for the same thing (GPUs on each node): give one"
            )
        if self.shards is not None and self.node_gpus is not None:
            raise ValueError(
                "shards is a share of a GPU, asked instead of whole GPUs or MIG slices: "
                "give shards or gpus, not both"
            )
        return self

    @property
    def node_gpus(self) -> Gpus | None:
        """The GPUs each node gives, however they are written (``gpus`` or ``gpus_per_node``)."""
        return self.gpus if self.gpus is not None else self.gpus_per_node


class Component(NodeShape):
    """One component of a heterogeneous job. Job-wide settings are refused here."""

    time: SkipJsonSchema[Any] = None
    account: SkipJsonSchema[Any] = None
    qos: SkipJsonSchema[Any] = None
    dependencies: SkipJsonSchema[Any] = None
    output: SkipJsonSchema[Any] = None
    error: SkipJsonSchema[Any] = None

    @field_validator(*JOB_WIDE_SETTINGS, mode="before")
    @classmethod
    def _job_wide(cls, value: object) -> None:
        if value is not None:
            raise ValueError(
                "is a job-wide setting: Slurm takes it from component 0 only; "
                "set it once under resources"
            )
        return None


class Billing(Model):
    """Whom a job is charged to and under which quality of service: a run's and an
    allocation's alike."""

    account: Name | None = Field(None, description="Slurm account the job is charged to.")
    qos: Name | None = Field(None, description="Slurm quality of service.")


class JobSettings(Billing):
    """Settings for the whole job: the same for every component."""

    time: Duration | None = Field(None, description="Time limit: `12:00:00`, `1-00:00:00`, `90m`.")


class RunResources(NodeShape, JobSettings):
    """A run's resources: one node shape, or `components` for a heterogeneous job."""

    components: tuple[Component, ...] = Field(
        (),
        description="Heterogeneous job components, each with its own node shape. "
        "Component 0 carries the job-wide settings.",
    )
    ntasks: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="For a run inside an allocation: how many tasks its step has, each "
        "running the run's script (an MPI launch). Default: one per node.",
    )
    ntasks_per_node: Annotated[int, Field(ge=1)] | None = Field(
        None, description="For a run inside an allocation: its step's tasks on each node."
    )
    gpus_per_task: Gpus | None = Field(
        None,
        description="For a run inside an allocation: GPUs for each task of its step "
        "(`--gpus-per-task`): `1`, `A100:1`, `1g.10gb:1`. Not with gpus or shards.",
    )

    @model_validator(mode="after")
    def _per_task_alone(self) -> RunResources:
        if self.gpus_per_task is not None and (
            self.node_gpus is not None or self.shards is not None
        ):
            raise ValueError(
                "gpus_per_task gives each task its own GPUs: leave gpus, gpus_per_node and "
                "shards out (the step's GPUs are its tasks' together)"
            )
        return self

    @property
    def step_gpus(self) -> int:
        """The GPUs (or MIG slices) a step of this run holds on each of its nodes."""
        if self.gpus_per_task is not None:
            return self.gpus_per_task.count * self.tasks_per_node
        return self.node_gpus.count if self.node_gpus is not None else 0

    @property
    def step_gpu_type(self) -> str | None:
        gpus = self.gpus_per_task or self.node_gpus
        return gpus.type if gpus is not None else None

    @model_validator(mode="after")
    def _tasks_cover_the_nodes(self) -> RunResources:
        nodes = self.nodes or 1
        if self.ntasks is not None and self.ntasks < nodes:
            raise ValueError(
                f"ntasks ({self.ntasks}) is fewer than nodes ({nodes}): each node runs at "
                "least one task; ask for fewer nodes or more tasks"
            )
        per_node = self.ntasks_per_node
        if self.ntasks is not None and per_node is not None and self.ntasks > nodes * per_node:
            raise ValueError(
                f"ntasks ({self.ntasks}) is more than nodes ({nodes}) x ntasks_per_node "
                f"({per_node}); give one of them, or numbers that agree"
            )
        return self

    @property
    def step_nodes(self) -> int:
        """The nodes a step of this run spans inside its allocation."""
        return self.nodes or 1

    @property
    def tasks_per_node(self) -> int:
        """The most tasks a step of this run puts on one node (Slurm spreads ``ntasks``
        over the nodes as evenly as it can)."""
        if self.ntasks_per_node is not None:
            return self.ntasks_per_node
        if self.ntasks is not None:
            return -(-self.ntasks // self.step_nodes)
        return 1

    @model_validator(mode="after")
    def _shape_in_one_place(self) -> RunResources:
        if self.components:
            beside = [f for f in NodeShape.model_fields if f in self.model_fields_set]
            if beside:
                raise ValueError(
                    f"{', '.join(beside)} set beside components: with components, "
                    "give every node shape inside its component"
                )
            if len(self.components) < 2:
                raise ValueError("components needs at least two entries (a het job)")
        return self

    @property
    def shapes(self) -> tuple[NodeShape, ...]:
        """The node shape of every component; a plain run has exactly one."""
        if self.components:
            return self.components
        return (NodeShape.model_validate({f: getattr(self, f) for f in NodeShape.model_fields}),)


# How an output's version is taken: its paths, sizes and mtimes, or sha256 of its content.
HashKind = Literal["fingerprint", "content"]


class Output(Model):
    path: SafeText = Field(description="Relative to the run's directory, or absolute.")
    marker: SafeText | None = Field(
        None, description="A file whose existence says the output is complete."
    )
    hash: HashKind = Field(
        "fingerprint",
        description="How the output's version is taken: paths, sizes and mtimes, or sha256.",
    )
    staged: bool = Field(
        True,
        description="The job writes the output to a staging path that replaces the "
        "published one only when the job succeeds (false: the job writes the published "
        "output in place, for a command that appends to or updates its previous output). "
        "Not part of the spec hash.",
    )

    @model_validator(mode="before")
    @classmethod
    def _from_path(cls, data: object) -> object:
        return {"path": data} if isinstance(data, str) else data

    @field_validator("path")
    @classmethod
    def _non_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must not be empty")
        normal = posixpath.normpath(value)
        if not posixpath.isabs(normal) and (normal == ".." or normal.startswith("../")):
            raise ValueError(
                f"{value!r} leaves the run's directory with '..': recon keeps each run's "
                "outputs in its own directory; write a path inside it, or an absolute path"
            )
        return value


class Input(Model):
    """Another run's output (`from: prepare.dataset`) or an external `path`."""

    from_: str | None = Field(None, alias="from", description="`run.output` of another run.")
    path: SafeText | None = Field(None, description="An absolute path outside recon's runs.")

    @model_validator(mode="before")
    @classmethod
    def _from_reference(cls, data: object) -> object:
        return {"from": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _exactly_one(self) -> Input:
        if (self.from_ is None) == (self.path is None):
            raise ValueError("an input takes exactly one of `from` (run.output) or `path`")
        if self.from_ is not None:
            reference = parse_reference(self.from_)
            if isinstance(reference, str):
                raise ValueError(reference)
        return self

    @property
    def upstream(self) -> tuple[str, str] | None:
        """(run, output) when this input is another run's output (``upstream_of``)."""
        return upstream_of(self.from_)


def upstream_of(reference: str | None) -> tuple[str, str] | None:
    """(run, output) of an input's `from: run.output`; None for a `path:` input. The run
    is a member's name for a member (`train[seed=0]`): output names hold no dot."""
    if reference is None:
        return None
    run, _, output = reference.rpartition(".")
    return run, output


# A path as written in a batch script: no shell character needs quoting beyond shlex's,
# but a line break or NUL could not be carried through `set -u` exports and logs.
_PLAIN_PATH = r"^[^\x00-\x1f\x7f]+$"


class Environment(Model):
    """What a job starts from: a clean base, then these modules, this venv or conda
    environment, and these variables passed by name from whoever applies."""

    modules: tuple[ModuleName, ...] = Field(
        (), description="Modules to `module load`, in this order, before the command."
    )
    venv: Annotated[str, Field(pattern=_PLAIN_PATH)] | None = Field(
        None,
        description="A Python virtual environment to activate: an absolute path, or one "
        "relative to the project folder.",
    )
    conda: Annotated[str, Field(pattern=_PLAIN_PATH)] | None = Field(
        None,
        description="A conda environment to activate: its name, or the absolute path of "
        "its prefix.",
    )
    files: tuple[Annotated[str, Field(pattern=_PLAIN_PATH)], ...] = Field(
        (),
        description="Files of the commit that define the environment (`environment.yml`, "
        "`requirements.lock`, `uv.lock`), from the repo root: a change to their content "
        "reruns the runs that declare them.",
    )
    pass_: tuple[EnvKey, ...] = Field(
        (),
        alias="pass",
        description="Variables passed to the job by name from the environment of whoever "
        "applies (an API token): their values are never written to a spec, hash, log, "
        "manifest or the journal.",
    )
    inherit: bool = Field(
        False,
        description="Pass the whole environment of whoever applies, as sbatch does by "
        "default: results then depend on who applies. Not part of the spec hash.",
    )

    @model_validator(mode="after")
    def _one_python(self) -> Environment:
        if self.venv is not None and self.conda is not None:
            raise ValueError(
                "takes a venv or a conda environment, not both: a job activates one; "
                "keep the one its command runs in"
            )
        for field, names in (
            ("files", self.files),
            ("pass", self.pass_),
            ("modules", self.modules),
        ):
            repeated = sorted({name for name in names if names.count(name) > 1})
            if repeated:
                raise ValueError(f"{field} names {repeated[0]!r} twice; name it once")
        for path in self.files:
            normal = posixpath.normpath(path)
            if posixpath.isabs(path) or normal == ".." or normal.startswith("../"):
                raise ValueError(
                    f"files: {path!r} is not inside the repo: name a file of the commit, "
                    "from the repo root (environment.yml, requirements.lock, uv.lock)"
                )
        return self

    @property
    def declared(self) -> bool:
        """Whether it says more than `inherit`: what the spec hash covers."""
        return bool(self.modules or self.venv or self.conda or self.files or self.pass_)


class Document(Model):
    """Fields every kind of document shares."""

    name: Name
    description: str | None = Field(None, description="Free text; not part of the spec hash.")
    labels: dict[Name, str] = Field(default_factory=dict, description="Not part of the hash.")
    renamed_from: Name | None = Field(
        None,
        description="The name it had before a rename: recon carries the old name's journal "
        "records, outputs, manifest and live job over to this name, with no job, when the "
        "spec is otherwise unchanged. Not part of the spec hash; may stay or go once moved.",
    )
    suspend: bool = Field(
        False,
        description="Paused by commit: every pass plans and shows it but submits and cancels "
        "nothing for it (a run's downstream and the runs of an allocation wait with it); "
        "false again, it goes on where it was. Not part of the spec hash.",
    )


class Run(Document):
    kind: Literal["Run"]
    command: SafeText | None = Field(
        None,
        description="Shell commands, with {inputs.X.path}, {outputs.Y.path}, {run.name}, "
        "{run.dir} filled in. `{{` and `}}` stand for literal braces.",
    )
    script: SafeText | None = Field(
        None,
        description="A script file in the repo (relative to the repo root), instead of command.",
    )
    workdir: SafeText | None = Field(
        None, description="The run's directory; default <runs_dir>/<name>."
    )
    env: dict[EnvKey, SafeText] = Field(default_factory=dict)
    environment: Environment | None = Field(
        None,
        description="What the job starts from: modules, a venv or conda environment, "
        "variables passed by name. Unset: recon.yaml's defaults.environment, else a clean "
        "base environment.",
    )
    resources: RunResources = Field(default_factory=lambda: RunResources())
    inputs: dict[Name, Input] = Field(default_factory=dict)
    outputs: dict[Name, Output] = Field(default_factory=dict)
    # the default as written in the schema: the dataclass itself would show as its fields
    retries: Retries = Field(Retries(0), json_schema_extra={"default": 0})
    checkpoint: Checkpoint | None = Field(
        None,
        description="The command saves its progress in a folder of the run's when warned "
        "before its time limit or preempted, and the run's next job resumes from it: "
        "`{path: ckpt/, signal: USR1, before_end: 2m, max_requeues: 20}`. Such an ending "
        "is a requeue, drawing from no retry budget.",
    )
    on_oom: OnOom | None = Field(
        None,
        description="A retry after OUT_OF_MEMORY asks for more memory: `{memory: x2, max: "
        "64GiB}`, multiplied once per such attempt since the last success. Not part of the "
        "spec hash.",
    )
    on_timeout: OnTimeout | None = Field(
        None,
        description="A retry after TIMEOUT asks for a longer time limit: `{time: x1.5, max: "
        "24:00:00}`. Not part of the spec hash.",
    )
    teardown: Literal["coupled", "none"] = Field(
        "coupled",
        description="For a heterogeneous run: when a component's step fails while the job "
        "still holds the other components, cancel the whole job (`coupled`), or leave it "
        "(`none`).",
    )
    coupled_with: tuple[Name, ...] = Field(
        (),
        description="Runs that must live together with this one: when one of them ends "
        "abnormally, the others' jobs are cancelled too.",
    )
    update: Literal["defer", "replace"] = Field(
        "defer",
        description="When the spec changes while the job runs: `defer` lets it finish and "
        "reruns after; `replace` cancels it and submits the new spec.",
    )
    allocation: Name | None = Field(
        None,
        description="Run as a step inside this Allocation of the project instead of as a "
        "batch job of its own. Where it runs, not what: not part of the spec hash.",
    )
    code: tuple[SafeText, ...] | Literal["none"] | None = Field(
        None,
        description="More of the run's code besides the committed files its command names "
        "(found by themselves): globs over the project's committed files, e.g. "
        "`[src/**/*.py, pyproject.toml]`. A change to any of these files reruns the run. "
        "`none` turns the detection off. Not part of the spec hash: code is compared file "
        "by file with what each job ran.",
    )
    matrix: dict[str, Any] | None = Field(
        None,
        description="Makes the run a sweep: axes (`seed: [0, 1, 2]`), each a list of "
        "numbers, true/false or strings, plus optional `exclude:` (partial combinations to "
        "drop) and `include:` (whole extra combinations). Each member is a run of its own, "
        "named by its values; values reach the command as {matrix.AXIS} and "
        "RECON_MATRIX_<AXIS>.",
    )
    max_parallel: Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="For a sweep: at most this many members run at once (a job array's %N). "
        "Not part of the spec hash.",
    )

    @model_validator(mode="after")
    def _command_or_script(self) -> Run:
        if (self.command is None) == (self.script is None):
            raise ValueError("a run takes exactly one of `command` or `script`")
        return self

    @field_validator("code", mode="before")
    @classmethod
    def _code_globs(cls, value: object) -> object:
        # Checked here in full, so a bad value gets one message, not one per union branch.
        if value is None or value == "none":
            return value
        if not isinstance(value, (list, tuple)):
            shown = f"[{value}]" if isinstance(value, str) else "[src/**/*.py]"
            raise ValueError(
                f"takes a list of globs over the project's committed files ({shown}) or "
                "`none` (no code detection)"
            )
        for glob in value:
            if not isinstance(glob, str):
                raise ValueError(f"expected text for each glob, got {glob!r}: quote it")
            if not glob.strip() or glob.startswith("/") or ".." in glob.split("/"):
                raise ValueError(
                    f"{glob!r} is not a glob inside the project: write it relative to the "
                    "project folder (the one holding recon.yaml), with no leading / or .."
                )
        return value

    @model_validator(mode="after")
    def _fits_a_step(self) -> Run:
        # A step takes its place from the allocation: only what srun can ask of a step
        # inside it (its nodes and tasks, a task's CPUs, memory, GPUs and time limit)
        # means anything there.
        if self.allocation is None:
            return self  # ntasks without an allocation: checks.check_step_layout
        allowed = {
            "cpus", "memory", "gpus", "gpus_per_node", "gpus_per_task", "shards", "gres",
            "time", "nodes", "ntasks", "ntasks_per_node",
        }  # fmt: skip
        refused = sorted(self.resources.model_fields_set - allowed)
        if refused:
            raise ValueError(
                f"resources.{', resources.'.join(refused)} cannot be set on a run inside "
                f"allocation {self.allocation!r}: it runs as a step on the allocation's "
                "nodes; set them on the Allocation (a run there takes cpus, memory, gpus, "
                "gpus_per_node, gpus_per_task, shards, gres, time, nodes, ntasks, "
                "ntasks_per_node)"
            )
        return self

    @model_validator(mode="after")
    def _checkpoint_apart(self) -> Run:
        # The checkpoint outlives every attempt: an output holding it would be staged
        # away, replaced or hashed with it.
        checkpoint = self.checkpoint
        if checkpoint is None:
            return self
        if self.allocation is not None:
            raise ValueError(
                f"checkpoint cannot be set on a run inside allocation {self.allocation!r}: "
                "its steps get no warning before their end; run it as a batch job of its own"
            )
        for name, output in self.outputs.items():
            if checkpoint.overlaps(output.path, "/run"):
                raise ValueError(
                    f"checkpoint.path {checkpoint.path!r} overlaps output {name!r} "
                    f"({output.path}): a checkpoint is kept across attempts and never "
                    "published; give them separate folders"
                )
        return self

    @model_validator(mode="after")
    def _raises_have_a_base(self) -> Run:
        # A raise multiplies what the run asks for: the cluster's default is no number.
        resources = self.resources
        for field, asked, resource in (
            ("on_oom", self.on_oom, "memory"),
            ("on_timeout", self.on_timeout, "time"),
        ):
            if asked is None:
                continue
            if resources.components:
                raise ValueError(
                    f"{field} cannot be set on a heterogeneous run: set it on a run of one "
                    "component"
                )
            if getattr(resources, resource) is None:
                raise ValueError(
                    f"{field} raises resources.{resource}, which the run does not set: "
                    f"declare resources.{resource} (what the first attempt asks for)"
                )
        return self

    @model_validator(mode="after")
    def _sweep_fits_an_array(self) -> Run:
        # A sweep's members go to Slurm as one job array: Slurm runs no heterogeneous job
        # as an array, and steps in an allocation or coupled teardown have no array form.
        if self.matrix is None:
            if self.max_parallel is not None:
                raise ValueError("max_parallel limits a sweep's members: it needs a matrix")
            return self
        for field, refused in (
            ("resources.components", bool(self.resources.components)),
            ("allocation", self.allocation is not None),
            ("coupled_with", bool(self.coupled_with)),
        ):
            if refused:
                raise ValueError(
                    f"a run with a matrix cannot set {field}: its members are submitted as "
                    "one Slurm job array, which has no such form; declare separate runs"
                )
        return self

    @model_validator(mode="after")
    def _distinct_env_names(self) -> Run:
        # The job finds each input and output in RECON_INPUT_<NAME> / RECON_OUTPUT_<NAME>;
        # two names that make the same variable would silently hide one of them.
        for field, prefix, names in (
            ("inputs", "RECON_INPUT_", self.inputs),
            ("outputs", "RECON_OUTPUT_", self.outputs),
        ):
            seen: dict[str, str] = {}
            for name in names:
                first = seen.setdefault(env_suffix(name), name)
                if first != name:
                    raise ValueError(
                        f"{field} {first!r} and {name!r} would both be "
                        f"{prefix}{env_suffix(name)} in the job's environment; rename one"
                    )
        return self


class Container(Model):
    image: SafeText
    name: Name | None = None
    mounts: tuple[SafeText, ...] = ()
    writable: bool = Field(
        False,
        description="Steps may write to the container's filesystem (pyxis "
        "`--container-writable`), so what `setup` installs stays for later steps.",
    )
    workdir: SafeText | None = Field(
        None, description="The working directory inside the container (an absolute path)."
    )

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith("/"):
            raise ValueError(
                f"{value!r} is not an absolute path: the working directory inside the "
                "container starts with /, as in /workspace"
            )
        return value

    @property
    def features(self) -> frozenset[str]:
        """What the cluster's container runtime must offer for it (a scheduler's
        ``containers()`` says what it does): the image, and each option set."""
        wanted = {"image"}
        if self.writable:
            wanted.add("writable")
        if self.workdir is not None:
            wanted.add("workdir")
        return frozenset(wanted)


class AllocationResources(NodeShape, Billing):
    """What an allocation holds: one node shape, and whom it is charged to."""


class Allocation(Document):
    kind: Literal["Allocation"]
    resources: AllocationResources = Field(default_factory=lambda: AllocationResources())
    time_limit: Duration = Field(description="How long the allocation lives.")
    min_remaining: Duration = Field(
        Duration(300), description="Reused only while more than this much time is left."
    )
    container: Container | None = None
    setup: tuple[SafeText, ...] = Field(
        (), description="Commands run once in each new allocation, before any run starts in it."
    )
    setup_retries: Annotated[int, Field(ge=0, le=100)] = Field(
        1,
        description="How many times a failed setup is tried again, each in a new job of the "
        "allocation, before the allocation is blocked. Not part of the spec hash.",
    )
    idle_release: Duration | None = Field(
        None,
        description="Release the allocation once no step has run in it for this long, and "
        "allocate it again when a run needs it. Left out, it is held while declared. Not "
        "part of the spec hash.",
    )

    @model_validator(mode="after")
    def _time_to_reuse(self) -> Allocation:
        if self.min_remaining.seconds >= self.time_limit.seconds:
            raise ValueError(
                f"min_remaining ({self.min_remaining}) must be shorter than time_limit "
                f"({self.time_limit}), or the allocation could never be reused"
            )
        return self


class Defaults(JobSettings):
    partition: Name | None = None
    environment: Environment | None = Field(
        None, description="The environment of every run that declares none of its own."
    )
    memory: Memory | None = Field(
        None, description="Memory per node for runs that set none (else the cluster default)."
    )


# `50%` (a share of the project's live jobs) or `20` (a number of jobs).
PruneLimit = Annotated[str, Field(pattern=r"^(100|[1-9]?[0-9])%$")] | Annotated[int, Field(ge=0)]
_PRUNE_SHARE = re.compile(r"^(100|[1-9]?[0-9])%$")


def prune_allowance(limit: str | int, live: int) -> int:
    """How many of `live` jobs one pass may cancel by pruning under `limit`."""
    if isinstance(limit, int):
        return limit
    return live * int(limit.removesuffix("%")) // 100


class Budget(Model):
    """recon.yaml's GPU-hour budget: a plan whose forecast passes it is held."""

    gpu_hours: Annotated[float, Field(gt=0)] = Field(
        description="The most GPU-hours the runs a plan submits may be forecast to take "
        "(each run's last successful duration times its GPUs; a run never run: its time "
        "limit)."
    )
    per: Literal["commit", "day"] = Field(
        "commit",
        description="`commit`: the plan's forecast alone; `day`: with the GPU-hours the "
        "project's jobs that ended today (UTC) held.",
    )


# A GPU as CUDA_VISIBLE_DEVICES names it: its index, or its UUID as nvidia-smi -L shows it.
_GPU_DEVICE = re.compile(r"^(?:\d+|(?:GPU|MIG)-[A-Za-z0-9/-]+)$")


class LocalMachine(Model):
    """recon.yaml's `local`: what the local backend may hand out on the machine it runs on."""

    gpus: tuple[str, ...] | None = Field(
        None,
        description="The GPUs jobs may be handed: a number of them (`2`: devices 0 and 1) "
        "or their devices (`[0, 1]`, a `GPU-<uuid>`). Left out, those `nvidia-smi -L` "
        "lists. `RECON_LOCAL_GPUS` on the machine overrides it.",
        # What may be written: the count is turned into its devices when read.
        json_schema_extra={
            "anyOf": [
                {"type": "integer", "minimum": 0},
                {"type": "array", "items": {"type": ["string", "integer"]}, "uniqueItems": True},
                {"type": "null"},
            ]
        },
    )

    @field_validator("gpus", mode="before")
    @classmethod
    def _count_or_devices(cls, value: Any) -> Any:
        """A count stands for the devices 0 to count - 1; each device is named once."""
        if value is None:
            return value
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return tuple(str(index) for index in range(value))
        if not isinstance(value, list):
            raise ValueError(
                f"{value!r} is not GPUs: give a number of them (2) or their devices ([0, 1])"
            )
        devices = [str(d) if isinstance(d, int) and not isinstance(d, bool) else d for d in value]
        for device in devices:
            if not isinstance(device, str) or not _GPU_DEVICE.match(device):
                raise ValueError(
                    f"{device!r} is not a GPU device: give its index (0) or its UUID as "
                    "nvidia-smi -L shows it (GPU-...)"
                )
        if len(set(devices)) < len(devices):
            raise ValueError(f"{', '.join(devices)}: a device is listed twice")
        return tuple(devices)


class Project(Model):
    """`recon.yaml` at the repo root."""

    project: Name
    scheduler: Literal["auto", "slurm", "local"] = "auto"
    local: LocalMachine = Field(
        default_factory=lambda: LocalMachine(),
        description="What the local backend may hand out on this machine (its GPUs).",
    )
    defaults: Defaults = Field(default_factory=lambda: Defaults())
    specs: tuple[str, ...] = Field(
        ("specs/**/*.yaml", "specs/**/*.yml"), description="Globs of spec files, from the root."
    )
    state_dir: str = Field(".recon", description="Journal and lock; relative to the repo root.")
    runs_dir: str = Field("runs", description="Where runs' directories live, from the root.")
    prune: bool = Field(
        True, description="Cancel jobs of runs that left the repo (their outputs stay)."
    )
    prune_limit: PruneLimit = Field(
        "50%",
        description="The most live jobs one pass may cancel by pruning without "
        "`--allow-prune-all`: a share of the project's live jobs (`50%`) or a number of "
        "jobs (`20`). A single job is never held by it (a rename or a replacement); a commit "
        "that declares no run or allocation while jobs live is held whatever the limit.",
    )

    suspend: bool = Field(
        False,
        description="Pause the whole project by commit: every pass plans and shows, but "
        "submits and cancels nothing; false again, it goes on where it was.",
    )
    budget: Budget | None = Field(
        None,
        description="A GPU-hour budget: a plan whose forecast would pass it is held (nothing "
        "submitted) until `--allow-over-budget` confirms it. Running jobs are never cancelled "
        "by it.",
    )

    @field_validator("prune_limit", mode="before")
    @classmethod
    def _limit_form(cls, value: Any) -> Any:
        share = isinstance(value, str) and _PRUNE_SHARE.match(value)
        count = isinstance(value, int) and not isinstance(value, bool) and value >= 0
        if not (share or count):
            raise ValueError(
                f"{value!r} is not a limit: write a share of the project's live jobs, "
                "from 0% to 100% (`50%`), or a number of jobs (`20`)"
            )
        return value


SpecDocument = Run | Allocation
KINDS: dict[str, type[Run] | type[Allocation]] = {"Run": Run, "Allocation": Allocation}
