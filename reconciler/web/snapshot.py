"""What the web view shows, made from one look at the cluster.

A ``Snapshot`` is built once per poll from the read-only pipeline's ``Look`` (the one
`recon status` and `recon graph` use); every page and every browser reads the same one.
A run's details are made from it on request, reading only the run's own files: its
spec as committed, its log tails, its provenance manifest and its outputs' versions.

Nothing of a job's environment is shown: the spec's ``env`` values are masked, and the
journal's flat copy of a spec (which holds them) is never sent.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML

from reconciler.desired.desired import Desired, DesiredRun, spec_hash_of
from reconciler.desired.loader import open_source
from reconciler.desired.matrix import member_order, sweep_of
from reconciler.engine.ledger.cost import ledger, running_usage
from reconciler.engine.ledger.status import (
    AllocationStatus,
    RunStatus,
    allocation_statuses,
    run_statuses,
)
from reconciler.engine.observe.journal import read_cancel_causes
from reconciler.engine.plan.inputs import coupled_partners
from reconciler.engine.reconcile import Look
from reconciler.report.cost import ledger_data
from reconciler.report.graph import as_svg, graph_of
from reconciler.report.plan import as_text, banner
from reconciler.report.status import by_sweep, counts, health_words, next_words
from reconciler.scheduler.base import ObservedJob
from reconciler.scheduler.runfolder import log_files
from reconciler.scheduler.states import Health, ending
from reconciler.state.outputs import observe_outputs
from reconciler.state.provenance import Manifest, manifest_path
from reconciler.state.records import EndingKind, SubmissionRecord, SubmissionStatus
from reconciler.web.files import confined, tail

HIDDEN = "(hidden)"


@dataclass(frozen=True)
class Snapshot:
    """One poll's view: the look it was made from and what the page shows of it."""

    look: Look
    runs: Sequence[RunStatus]
    allocations: Sequence[AllocationStatus]
    graph_svg: str
    plan_text: str
    observed_at: datetime
    cost: dict[str, Any] = field(default_factory=dict)  # `recon cost --format json`'s data

    @property
    def desired(self) -> Desired:
        return self.look.desired

    def summary(self) -> dict[str, Any]:
        """The page's whole state but a run's details, as JSON."""
        plan = self.look.plan
        return {
            "project": self.desired.project.project,
            "commit": self.desired.commit,
            "scheduler": plan.scheduler,
            "observed_at": self.observed_at.isoformat(),
            "observation_complete": plan.observation_complete,
            "notes": list(plan.notes),
            # a guard that holds the plan, what is suspended: shown above everything
            "banner": banner(plan),
            # every run, a sweep's members under it (a row each: the page's table)
            "runs": table(self.runs),
            "allocations": [_allocation(row) for row in self.allocations],
            "plan": self.plan_text,
            "graph_svg": self.graph_svg,
            # the project's cost (a run's is in its details: 10,000 runs' are not sent)
            "cost": {
                key: self.cost.get(key)
                for key in ("total", "saved", "jobs_running", "jobs_running_counted")
            },
        }


def snapshot_of(look: Look, observed_at: datetime, graph_limit: int) -> Snapshot:
    """The view of one look; the graph drawn with at most `graph_limit` nodes (the rest
    counted), as `recon graph --limit` draws it: the table lists every run."""
    runs = run_statuses(look.desired, look.plan, look.observation, look.records)
    held = allocation_statuses(look.desired, look.plan, look.observation, look.records)
    # Coloured by sync, with health as a dot: the plan is shown beside it, not on it.
    svg = as_svg(graph_of(look.desired, None, runs).limited(graph_limit))
    # The changes only, as `recon plan` shows them by default: not a line per current run.
    plan_text = as_text(look.plan, show_noop=False)
    return Snapshot(look, runs, held, svg, plan_text, observed_at, _cost(look))


def _cost(look: Look) -> dict[str, Any]:
    """What `recon cost` says of the project, from the look's journal records, and its
    jobs still running as held so far, from the look's observation (no call of its own)."""
    desired = look.desired
    specs = {name: spec_hash_of(desired.runs, name) for name in desired.runs}
    live = running_usage(look.observation, look.records)
    book = ledger(
        look.records,
        specs,
        cancel_causes=read_cancel_causes(desired),
        live=live,
        partners=coupled_partners(desired),
        now=look.observation.taken_at,
    )
    book.looked_at = look.observation.taken_at
    return ledger_data(book, desired.project.project)


def table(runs: Sequence[RunStatus]) -> list[dict[str, Any]]:
    """The page's run table, as `recon status` lays it out: a row per run, and a sweep's
    members gathered under one row of their sweep (counted by sync, health and what the
    next apply does), where its first member stands, as the graph draws it."""
    rows: list[dict[str, Any]] = []
    for item in by_sweep(runs, ()):
        if not isinstance(item, list):
            rows.append(_row(item))
            continue
        members = sorted(item, key=lambda row: member_order(row.name))
        arrays = dict.fromkeys(row.job_id.partition("_")[0] for row in members if row.job_id)
        rows.append(
            {
                "kind": "sweep",
                "name": sweep_of(members[0].name),
                "sync": counts(Counter(row.sync.value for row in members)),
                "health": counts(Counter(row.health or "no job" for row in members)),
                "job_id": ", ".join(arrays) or None,
                "next": counts(Counter(row.next.value for row in members)),
                "members": [_row(row) for row in members],
            }
        )
    return rows


def _row(row: RunStatus) -> dict[str, Any]:
    return {
        "kind": "run",
        "name": row.name,
        "sync": row.sync.value,
        "health": health_words(row) if row.health else None,
        "failed": row.health is Health.FAILED,
        "job_id": row.job_id,
        "next": next_words(row),
    }


def why_words(row: RunStatus) -> str:
    """Why a run is in its state, said once: what `recon status` says of it (its NEXT
    column), with its sync and health in front only where that does not say them."""
    said = next_words(row) + (f" (last: {row.note})" if row.note else "")
    unsaid = [row.sync.value] if row.sync.value not in said else []
    if row.health is not None and not any(
        words in said for words in (row.health.value, row.how) if words
    ):
        unsaid.append(health_words(row))
    return f"{', '.join(unsaid)}. {said}" if unsaid else said


def ended_words(record: SubmissionRecord) -> str | None:
    """How a job of the history ended, in words, as `recon status` says it ("failed
    (exit 1)", "timed out"), from the record's typed fields, not Slurm's reason code
    (``NonZeroExitCode``); recon's own words where it judged beyond Slurm (no outputs,
    skipped); None while it has not ended."""
    if record.status is SubmissionStatus.REFUSED:
        return f"refused by the scheduler: {record.reason}" if record.reason else "refused"
    health = record.final_health
    if health is None:
        return None
    kind = record.ending
    if kind is EndingKind.NO_OUTPUTS:  # recon's own judgement, in its own words
        return f"{health.value}: {record.reason}" if record.reason else health.value
    if health is Health.SUCCEEDED:  # beyond it, what recon recorded: skipped
        return f"{health.value}: {record.reason}" if record.reason else health.value
    if kind is EndingKind.DEPENDENCY:
        return f"{health.value} while it waited for its dependency: never ran"
    return ending(health, record.exit_code, kind.in_words if kind is not None else None)


def _allocation(row: AllocationStatus) -> dict[str, Any]:
    data = row.model_dump(mode="json", exclude={"history"})
    data["steps_running"] = [str(step) for step in row.steps_running]
    return data


def run_root(desired: Desired, run: DesiredRun) -> Path:
    """The one directory a run's page reads from: its `workdir` as declared, under the
    project folder (itself resolved). Lexical, not resolved: a run directory, or a
    `logs` or `.recon-run` inside it, that is a symlink to elsewhere leads outside it, and
    what is there is not shown."""
    return Path(os.path.normpath(os.path.join(desired.root.resolve(), run.workdir)))


def run_details(snapshot: Snapshot, name: str) -> dict[str, Any] | None:
    """Everything the page shows about one run; None for a name the project does not
    have at this commit."""
    desired, look = snapshot.desired, snapshot.look
    if name not in desired.runs:
        return None
    run = desired.runs[name]
    directory = run_root(desired, run)
    roots = [directory]
    row = next((row for row in snapshot.runs if row.name == name), None)
    history = [r for r in look.records if r.kind == "run" and r.name == name]
    jobs = [j for j in look.observation.find(desired.project.project, name) if j.tag.kind == "run"]
    latest = row.job_id if row is not None else None
    manifest = _manifest(directory, roots)
    versions = observe_outputs(desired, [name])
    return {
        "kind": "run",
        "name": name,
        "why": why_words(row) if row is not None else "not in the plan",
        "location": str(run.location),
        "commit": desired.commit,
        "spec_hash": run.spec_hash,
        "spec": committed_spec(desired, name),
        "status": row.model_dump(mode="json") if row is not None else None,
        "cost": snapshot.cost.get("runs", {}).get(name),
        "jobs": _jobs(jobs),
        "history": _history(history),
        "outputs": [
            {
                "name": output,
                "path": spec.path,
                "version": version.model_dump(mode="json") if version else None,
            }
            for output, spec in run.outputs.items()
            for version in [versions.get((name, output))]
        ],
        "manifest": manifest.model_dump(mode="json", by_alias=True) if manifest else None,
        "log": _logs(directory, latest, roots),
    }


def _jobs(jobs: Sequence[ObservedJob]) -> list[dict[str, Any]]:
    return [
        {
            "job_id": component.job_id,
            "state": component.state.value,
            "health": component.health.value,
            "exit_code": component.exit_code,
            "signal": component.signal,
            "nodes": component.nodes,
            "start": _when(component.start),
            "end": _when(component.end),
        }
        for job in jobs
        for component in job.components
    ]


def _history(records: Sequence[SubmissionRecord]) -> list[dict[str, Any]]:
    """The journal's jobs of a run, newest first."""
    return [
        {
            "commit": record.commit,
            "spec_hash": record.spec_hash[:12],
            "job_id": record.job_id,
            "status": record.status.value,
            "health": record.final_health.value if record.final_health else None,
            "exit_code": record.exit_code,
            "reason": record.reason,  # as recorded: Slurm's own code, e.g. NonZeroExitCode
            "ended": ended_words(record),
            "created_at": record.created_at.isoformat(),
        }
        for record in reversed(records)
    ]


def details(snapshot: Snapshot, name: str) -> dict[str, Any] | None:
    """What the page shows when a name is clicked: a run's details, a sweep's members, or
    what is known of an orphan (a run that left the repo, its jobs still known); None for
    a name that is none of these."""
    if name in snapshot.desired.runs:
        return run_details(snapshot, name)
    return sweep_details(snapshot, name) or orphan_details(snapshot, name)


def orphan_details(snapshot: Snapshot, name: str) -> dict[str, Any] | None:
    """A run the repo no longer declares but whose jobs recon still sees or remembers: why,
    its jobs and its history; no spec, folder, outputs or log (nothing says where)."""
    row = next((row for row in snapshot.runs if row.name == name), None)
    if row is None:
        return None
    look = snapshot.look
    project = snapshot.desired.project.project
    return {
        "kind": "run",
        "name": name,
        "why": why_words(row),
        "location": None,
        "commit": snapshot.desired.commit,
        "spec_hash": None,
        "spec": None,
        "status": row.model_dump(mode="json"),
        "jobs": _jobs([j for j in look.observation.find(project, name) if j.tag.kind == "run"]),
        "history": _history([r for r in look.records if r.kind == "run" and r.name == name]),
        "outputs": [],
        "manifest": None,
        "log": {"job_id": row.job_id, "stdout": None, "stderr": None},
    }


def sweep_details(snapshot: Snapshot, name: str) -> dict[str, Any] | None:
    """A sweep: its members by value, each with its sync, health and why, and them
    counted; its document as committed. None when no run is a member of `name`."""
    members = sorted(
        (row for row in snapshot.runs if sweep_of(row.name) == name),
        key=lambda row: member_order(row.name),
    )
    if not members:
        return None
    declared = next((row.name for row in members if row.name in snapshot.desired.runs), None)
    run = snapshot.desired.runs[declared] if declared is not None else None
    return {
        "kind": "sweep",
        "name": name,
        "location": str(run.location) if run is not None else None,
        "commit": snapshot.desired.commit,
        "spec": committed_spec(snapshot.desired, declared) if declared is not None else None,
        "sync": counts(Counter(row.sync.value for row in members)),
        "health": counts(Counter(row.health or "no job" for row in members)),
        "members": [
            _row(row) | {"values": row.name.removeprefix(name), "why": why_words(row)}
            for row in members
        ],
    }


def _manifest(directory: Path, roots: list[Path]) -> Manifest | None:
    """The run's provenance manifest, read from where it resolves to, if that is inside."""
    real = confined(manifest_path(directory), roots)
    if real is None:
        return None
    try:
        return Manifest.model_validate_json(real.read_bytes())
    except (OSError, ValueError):  # damaged or newer: as read_manifest, shown as none
        return None


def _logs(directory: Path, job_id: str | None, roots: list[Path]) -> dict[str, Any]:
    if job_id is None:
        return {"job_id": None, "stdout": None, "stderr": None}
    out, err = log_files(directory, job_id)  # a step of an allocation: slurm-12.3.out
    return {"job_id": job_id, "stdout": tail(out, roots), "stderr": tail(err, roots)}


def _when(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment is not None else None


def committed_spec(desired: Desired, name: str) -> str:
    """The YAML document declaring the run, as committed (or as on disk with
    --worktree), with its ``env`` values masked."""
    run = desired.runs[name]
    source = open_source(desired.root, desired.commit, worktree=desired.commit is None)
    try:
        text = source.read(run.location.file).decode("utf-8", errors="replace")
    except Exception:  # moved since: the page still shows the rest
        return f"# {run.location}: not readable"
    return _masked(_document_at(text, run.location.line))


def _document_at(text: str, line: int) -> str:
    """The YAML document of a multi-document file that holds ``line`` (1-based)."""
    documents: list[list[str]] = [[]]
    starts = [1]
    for number, content in enumerate(text.splitlines(), start=1):
        if content.rstrip() == "---" or content.startswith("--- "):
            documents.append([])
            starts.append(number + 1)
            continue
        documents[-1].append(content)
    index = max(i for i, start in enumerate(starts) if start <= line)
    return "\n".join(documents[index]).strip("\n") + "\n"


def _masked(document: str) -> str:
    """The document with every value under an ``env`` mapping replaced; comments and
    order kept. A document that does not parse (it loaded, so rare) is shown masked
    wholesale rather than risk a value."""
    yaml = YAML()
    yaml.preserve_quotes = True
    try:
        data = yaml.load(document)
    except Exception:
        return "# the spec could not be shown\n"
    if not _mask_env(data):
        return document
    buffer = io.StringIO()
    yaml.dump(data, buffer)
    return buffer.getvalue()


def _mask_env(data: Any) -> bool:
    masked = False
    if isinstance(data, dict):
        for key, value in data.items():
            if key == "env" and isinstance(value, dict):
                for env_key in value:
                    value[env_key] = HIDDEN
                masked = True
            else:
                masked = _mask_env(value) or masked
    elif isinstance(data, list):
        for item in data:
            masked = _mask_env(item) or masked
    return masked
