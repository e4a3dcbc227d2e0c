"""What GPU steps hold in an allocation's ready job, and whether a GPU run's share is free
there now. Pure.

A GPU run's step reserves its GPUs, and the memory it states, against the steps beside it
(it is started without ``--overlap``: scheduler/slurm/steps.py ``sharing``), and srun holds
back, unlisted, a step that finds too few free. So a GPU run starts only where its share
is free now (``InUse``: what recon's GPU steps hold in the ready job, those started but not
listed and those srun holds back included, plus the runs this plan starts there); else it
waits in the plan, naming the runs that hold the GPUs. srun's holding back is then left
for what the plan does not count (CPUs, a step of unknown share).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reconciler.desired.desired import DesiredAllocation
from reconciler.desired.models import RunResources
from reconciler.engine.plan.allocation_state import AllocationState, GpuShare, InUse
from reconciler.engine.plan.allocations.judging import held_back
from reconciler.engine.plan.inputs import PlanInputs
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.tag import Tag
from reconciler.state.records import SubmissionRecord, SubmissionStatus, within_grace
from reconciler.words import plural


def gpu_share(asks: RunResources) -> GpuShare:
    """A run's step's GPUs (``gpus``, ``gpus_per_node``, or ``gpus_per_task`` times its
    tasks on a node) or shards, over all its nodes, and its memory beside them."""
    per_node, shards = asks.step_gpus, asks.shards or 0
    if not per_node and not shards:
        return GpuShare()
    nodes = asks.step_nodes
    memory = asks.memory.mebibytes * nodes if asks.memory is not None else 0
    return GpuShare(gpus=per_node * nodes, memory_mb=memory, shards=shards * nodes)


def short_of(state: AllocationState, asks: RunResources, in_use: InUse) -> str | None:
    """Why a GPU run cannot have its share of the ready job now (None: it can): too few of
    its GPUs, or of its memory when both the run and the allocation state memory, are
    free of other GPU steps. Counted over the job's nodes together (a step spanning
    several needs its share on each, which srun checks). Not judged when the allocation
    states no GPUs (``--exclusive``): srun holds the step back if it must."""
    share = gpu_share(asks)
    holds = state.holds
    held = holds.node_gpus
    if not share or (held is None and holds.shards is None) or state.ready is None:
        return None
    where = f"allocation {state.name} (job {state.ready.job_id})"
    if not in_use.counted:
        return (
            f"waits for {where} to be fully observed: a GPU step the observation missed "
            "may hold its GPUs"
        )
    nodes = holds.nodes or 1
    total = held.count * nodes if held is not None else 0
    if share.gpus and share.gpus > total - in_use.gpus:
        return (
            f"waits for {plural(share.gpus, 'free GPU')} in {where}: {in_use.gpus} of "
            f"{total} in use by {_by(in_use.runs)}"
        )
    shards = (holds.shards or 0) * nodes
    if share.shards and share.shards > shards - in_use.shards:
        return (
            f"waits for {plural(share.shards, 'free GPU shard')} in {where}: "
            f"{in_use.shards} of {shards} in use by {_by(in_use.runs)}"
        )
    if share.memory_mb and holds.memory is not None:
        memory = holds.memory.mebibytes * nodes
        if share.memory_mb > memory - in_use.memory_mb:
            return (
                f"waits for {share.memory_mb} MiB free memory in {where}: "
                f"{in_use.memory_mb} of {memory} MiB reserved by GPU {_by(in_use.runs)}"
            )
    return None


def _by(runs: Sequence[str], shown: int = 5) -> str:
    named = ", ".join(runs[:shown])
    more = f" and {len(runs) - shown} more" if len(runs) > shown else ""
    return f"{'run' if len(runs) == 1 else 'runs'} {named}{more}"


def in_use(inputs: PlanInputs, allocation: DesiredAllocation, job: ObservedJob) -> InUse:
    """What recon's GPU steps reserve in the ready job: those Slurm lists running, those
    srun holds back, and those started but not listed yet (the journal's open intents of
    runs in this allocation, counted as long as ``unlisted_step`` waits for them: while
    their srun runs here, for ``UNSEEN_GRACE`` without, for ever when the launchers could
    not be looked at). A step whose share is not known (its spec is neither the current
    one nor in the journal) is not counted: srun holds back what that leaves too little
    room for."""
    if not inputs.observation.complete:
        return InUse(counted=False)
    launches = inputs.observation.launches
    holding: dict[Tag, str] = {}  # step's tag -> how it is named in the reason
    for row in job.live_steps:
        tag = row.step_tag
        if tag is not None and tag.kind == "run" and tag.project == inputs.project:
            holding[tag] = tag.name
    for launch in held_back(job, launches or ()):
        holding.setdefault(launch.tag, launch.tag.name)
    shown = {row.job_id for row in job.steps}
    for record in inputs.step_records(job.job_id):
        if record.job_id not in shown and record.final_health is None:
            holding.setdefault(_run_tag(job, record), record.name)
    launched = {launch.tag for launch in launches or ()}
    listed = {row.step_tag for row in job.steps}  # a listed step holds GPUs while it runs
    for record in inputs.records:
        if record.kind != "run" or record.status is not SubmissionStatus.INTENT:
            continue
        run = inputs.desired.runs.get(record.name)
        if (
            record.job_id is not None
            or run is None
            or run.spec_hash != record.spec_hash  # as unlisted_step: the current spec's
            or run.allocation != allocation.name
        ):
            continue
        tag = _run_tag(job, record)
        if tag in listed:
            continue
        if tag in launched or launches is None or within_grace(record.created_at, inputs.now):
            holding.setdefault(tag, record.name)
    used = InUse()
    for tag, name in sorted(holding.items(), key=lambda item: item[1]):
        share = _step_share(inputs, tag)
        if share is not None:
            used = used.plus(name, share)
    return used


def _run_tag(job: ObservedJob, record: SubmissionRecord) -> Tag:
    """The tag the run's step carries as its name (the allocation's deployment is the
    run's)."""
    return job.tag.model_copy(
        update={"kind": "run", "name": record.name, "spec_hash": record.spec_hash}
    )


def _step_share(inputs: PlanInputs, tag: Tag) -> GpuShare | None:
    """A run's step's share by its spec: the current one, else as the journal recorded the
    spec it was started with; None when neither is known."""
    run = inputs.desired.runs.get(tag.name)
    if run is not None and run.spec_hash == tag.spec_hash:
        return gpu_share(run.resources)
    recorded = inputs.recorded_spec(tag.name, tag.spec_hash)
    return _recorded_share(recorded) if recorded is not None else None


def _recorded_share(fields: Mapping[str, object]) -> GpuShare | None:
    """The share of a spec the journal recorded (flat fields, as written): rebuilt as the
    resources it had, so that every GPU form counts as ``gpu_share`` counts it."""
    resources = {
        key.removeprefix("resources."): value
        for key, value in fields.items()
        if key.startswith("resources.") and key.count(".") == 1 and value is not None
    }
    try:
        asks = RunResources.model_validate(
            {key: resources[key] for key in _SHARE_FIELDS if key in resources}
        )
    except ValueError:
        return None
    return gpu_share(asks)


# What a step's share is made from, as the journal's flat fields name them.
_SHARE_FIELDS = (
    "gpus", "gpus_per_node", "gpus_per_task", "shards", "memory", "nodes", "ntasks",
    "ntasks_per_node",
)  # fmt: skip
