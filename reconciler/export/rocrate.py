"""Export runs' provenance as a Workflow Run RO-Crate (the Process Run Crate profile).

A crate made from the manifests of a project's runs, built with the ``rocrate`` library:

    <out_dir>/ro-crate-metadata.json     the description below
    <out_dir>/manifests/<run>.json       each run's recon manifest, as recorded

- the root dataset: named after the project, ``about`` the project's source code at the
  commit exported, ``conformsTo`` Process Run Crate 0.6 (on RO-Crate 1.3), and
  ``mentions`` one ``CreateAction`` per run;
- each action: the run's Slurm job with its times, status (completed, failed, active or
  potential), the user who ran recon as ``agent``, the batch script recon rendered as
  ``instrument`` (a ``SoftwareSourceCode`` at the manifest's commit), the inputs it read
  as ``object`` and the outputs it left as ``result``;
- each input or output: a ``File`` or ``Dataset`` at its ``file://`` location, with its
  recon version as ``identifier`` (and ``sha256`` where it is a single file hashed by
  content). Output data stays where it is, never copied: outputs can be terabytes.

One entity stands for one location. An upstream's output and the downstream input that
read it are the same entity, so the crate shows the chain between the runs (the
profile's implicit workflow). An entity carries the version its producing run left; a
run that read an older version says so in its action's description, and its manifest
holds the exact version it read.

Why Process Run Crate and not Workflow Run Crate: the latter needs the workflow itself as
a ``ComputationalWorkflow`` main entity in a workflow language, and a recon project is a
set of specs, not such a file.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from io import StringIO
from pathlib import Path
from typing import Any
from urllib.parse import quote

from rocrate.model.contextentity import ContextEntity
from rocrate.model.entity import Entity
from rocrate.rocrate import ROCrate

from reconciler.scheduler.states import Health
from reconciler.state.outputs import OutputVersion
from reconciler.state.provenance import Manifest

PROCESS_RUN_CRATE = "https://w3id.org/ro/wfrun/process/0.6"
# The profile's JSON-LD context; among others it defines the `sha256` term.
WORKFLOW_RUN_CONTEXT = "https://w3id.org/ro/terms/workflow-run/context"
MANIFESTS = "manifests"

_STATUS = {
    Health.SUCCEEDED: "http://schema.org/CompletedActionStatus",
    Health.FAILED: "http://schema.org/FailedActionStatus",
    Health.CANCELLED: "http://schema.org/FailedActionStatus",
    Health.RUNNING: "http://schema.org/ActiveActionStatus",
    Health.PENDING: "http://schema.org/PotentialActionStatus",
    Health.BLOCKED: "http://schema.org/PotentialActionStatus",
}


def export_ro_crate(
    manifests: Mapping[str, Manifest], project: str, commit: str | None, out_dir: Path
) -> Path:
    """Write the crate of ``manifests`` (run name -> manifest) into ``out_dir`` (made if
    needed; the files named above are overwritten, nothing else is touched) and return
    ``out_dir``."""
    runs = sorted(manifests.items())
    crate = ROCrate(version="1.3")  # what Process Run Crate 0.6 extends
    crate.metadata.extra_contexts.append(WORKFLOW_RUN_CONTEXT)
    root = crate.root_dataset
    root["name"] = project
    root["description"] = (
        f"Runs of the recon project {project}"
        + (f" at commit {commit}" if commit else "")
        + ": each run's Slurm job, the inputs it read and the outputs it made."
    )
    root["conformsTo"] = crate.add(
        ContextEntity(
            crate,
            PROCESS_RUN_CRATE,
            properties={"@type": "CreativeWork", "name": "Process Run Crate", "version": "0.6"},
        )
    )
    source = _project_source(crate, project, commit, (m for _, m in runs))
    root["about"] = source
    if runs:  # the newest record, so that the same manifests always make the same crate
        root["datePublished"] = max(m.created_at for _, m in runs).isoformat()
    data = _DataEntities(crate)
    for _, manifest in runs:  # producers first: an entity carries its producer's version
        for name, output in manifest.outputs.items():
            if output.version is not None:
                data.get(output.path, output.version, f"{manifest.run}.{name}")
    root["mentions"] = [_action(crate, data, name, m, source) for name, m in runs]
    out_dir.mkdir(parents=True, exist_ok=True)
    crate.write(out_dir)
    return out_dir


class _DataEntities:
    """One File or Dataset entity per location, the first version given for it kept."""

    def __init__(self, crate: ROCrate) -> None:
        self.crate = crate
        self.by_uri: dict[str, tuple[Entity, OutputVersion | None]] = {}

    def get(self, path: str, version: OutputVersion | None, name: str) -> Entity:
        directory = version.directory if version is not None else path.endswith("/")
        uri = Path(path).as_uri() + ("/" if directory else "")
        if uri not in self.by_uri:
            properties: dict[str, Any] = {"name": name, "alternateName": path}
            if version is not None:
                properties.update(_version_properties(version))
            add = self.crate.add_dataset if directory else self.crate.add_file
            self.by_uri[uri] = (add(uri, properties=properties), version)
        return self.by_uri[uri][0]

    def version(self, entity: Entity) -> OutputVersion | None:
        return self.by_uri[entity.id][1]


def _version_properties(version: OutputVersion) -> dict[str, Any]:
    properties: dict[str, Any] = {"identifier": f"{version.kind}:{version.digest}"}
    if version.directory:
        properties["description"] = f"{version.files} files, {version.bytes} bytes"
    else:
        properties["contentSize"] = str(version.bytes)
        if version.kind == "content":  # then the digest is the file's own sha256
            properties["sha256"] = version.digest
    return properties


def _project_source(
    crate: ROCrate, project: str, commit: str | None, manifests: Iterable[Manifest]
) -> Entity:
    remote = next((m.remote for m in manifests if m.remote), None)
    properties: dict[str, Any] = {"@type": "SoftwareSourceCode", "name": project}
    if commit:
        properties["version"] = commit
    if remote:
        properties["codeRepository"] = remote
    return crate.add(ContextEntity(crate, f"#project-{quote(project)}", properties=properties))


def _action(crate: ROCrate, data: _DataEntities, name: str, m: Manifest, source: Entity) -> Entity:
    inputs = [data.get(i.path, i.version, i.from_ or i.path) for i in m.inputs.values()]
    outputs = [
        data.get(o.path, o.version, f"{m.run}.{output}")
        for output, o in m.outputs.items()
        if o.version is not None
    ]
    properties: dict[str, Any] = {
        "name": f"{m.run}: Slurm job {m.job_id}",
        "description": _description(m, data, inputs),
        "identifier": m.job_id,
        "agent": _person(crate, m.user),
        "actionStatus": {"@id": _STATUS[m.health]},
    }
    if m.health in (Health.FAILED, Health.CANCELLED):
        properties["error"] = _outcome(m)
    if m.start is not None:
        properties["startTime"] = m.start.isoformat()
    if m.end is not None:
        properties["endTime"] = m.end.isoformat()
    action_id = f"#run-{quote(name)}-job-{m.job_id}"
    action = crate.add_action(
        _instrument(crate, name, m, source),
        identifier=action_id,
        object=inputs,
        result=outputs,
        properties=properties,
    )
    crate.add_file(
        StringIO(m.as_json()),
        dest_path=f"{MANIFESTS}/{name}.json",
        properties={
            "name": f"recon manifest of {m.run}",
            "encodingFormat": "application/json",
            "about": action,
        },
    )
    return action


def _instrument(crate: ROCrate, name: str, m: Manifest, source: Entity) -> Entity:
    # The entity is the batch script recon rendered and submitted (its sha256 is that
    # script's); the spec's command or script file is what it runs.
    runs = f"the command {m.command!r}" if m.command is not None else f"the script {m.script}"
    properties: dict[str, Any] = {
        "@type": "SoftwareSourceCode",
        "name": f"batch script of {m.run}",
        "description": f"Rendered by recon from the spec of {m.run} (spec hash {m.spec_hash}); "
        f"runs {runs}.",
        "identifier": f"spec:{m.spec_hash}",
        "sha256": m.script_sha256,
        "isPartOf": source,
    }
    if m.commit is not None:
        properties["version"] = m.commit
    if m.remote is not None:
        properties["codeRepository"] = m.remote
    script_id = f"#script-{quote(name)}-{m.spec_hash}"
    return crate.add(ContextEntity(crate, script_id, properties=properties))


def _person(crate: ROCrate, user: str) -> Entity:
    # Adding the same person again replaces the entity with an equal one: no duplicates.
    person_id = f"#user-{quote(user, safe='')}"
    return crate.add(ContextEntity(crate, person_id, properties={"@type": "Person", "name": user}))


def _description(m: Manifest, data: _DataEntities, inputs: list[Entity]) -> str:
    parts = [
        f"{c.job_id} on {c.partition or '?'} ({c.nodes or 'no nodes yet'})" for c in m.components
    ]
    lines = [
        f"Slurm job {m.job_id}: {'; '.join(parts)}. {_outcome(m)}.",
        f"Recorded by recon {m.recon_version} on {m.host} at {m.created_at.isoformat()}.",
    ]
    for (name, used), entity in zip(m.inputs.items(), inputs, strict=True):
        if used.version is not None and used.version != data.version(entity):
            lines.append(
                f"Input {name} was read at {used.version.kind}:{used.version.digest}, "
                "a version since rewritten."
            )
    return "\n".join(lines)


def _outcome(m: Manifest) -> str:
    states = ", ".join(str(c.state) for c in m.components)
    codes = ", ".join("-" if c.exit_code is None else str(c.exit_code) for c in m.components)
    return f"{m.health}: Slurm state {states}, exit code {codes}"
