"""The batch script a job is sent is journalled with its intent, before sbatch: its sha256
and its #SBATCH options. The manifest names that digest; a record an earlier release
wrote (none journalled) has its script rendered again."""

from __future__ import annotations

import dataclasses
import hashlib
from pathlib import Path

from reconciler.engine.apply import settle
from reconciler.engine.apply.applier import Applier
from reconciler.engine.apply.scripts import script_sent, script_sha256
from reconciler.engine.observe.endings import judge
from reconciler.engine.plan.actions import Action, ActionKind, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.scheduler.base import SubmitRequest
from reconciler.scheduler.states import SlurmState as S
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.state.journal import Intent, Journal
from reconciler.state.provenance import read_manifest
from reconciler.state.records import ScriptSent, SubmissionRecord
from tests.planning import NOW, PROJECT, desired, hash_of, job, observed, run


def test_the_options_are_the_scripts_sbatch_lines_before_its_first_command() -> None:
    script = (
        "#!/bin/bash\n#SBATCH --job-name=a\n#SBATCH --mem=1G\n#SBATCH hetjob\n#SBATCH --gpus=1\n"
        "set -euo pipefail\n#SBATCH --not-read\n"
    )
    sent = script_sent(script)
    assert sent.options == ("--job-name=a", "--mem=1G", "hetjob", "--gpus=1")
    assert sent.sha256 == hashlib.sha256(script.encode()).hexdigest()
    assert script_sent(script, sbatch=False) == (sent.sha256, None)  # a step: srun's


def test_each_intent_is_journalled_with_the_script_it_is_sent(tmp_path: Path) -> None:
    state = dataclasses.replace(desired(run("a"), run("b", "a")), root=tmp_path)
    actions = tuple(
        Action(kind=ActionKind.SUBMIT, cause=Cause.NEVER_RUN, target=name, reason="not yet run",
               spec_hash=hash_of(state, name), after=after)
        for name, after in (("a", ()), ("b", ("a",)))
    )  # fmt: skip
    plan = Plan(
        project=PROJECT, root=str(tmp_path), commit=state.commit, scheduler="slurm",
        created_at=NOW, observation_complete=True, fingerprint="0" * 16, actions=actions,
    )  # fmt: skip
    journal = Journal(tmp_path / "journal.sqlite")
    seen: list[list[SubmissionRecord]] = []

    def submit(request: SubmitRequest) -> str:
        seen.append(journal.records(PROJECT))  # what the journal held as sbatch was called
        return str(10 + len(seen))

    scheduler = ScriptedScheduler(submit=submit)
    Applier(plan, state, scheduler, journal, tmp_path / "code", lambda: NOW).run()
    requests = [call.argument for call in scheduler.calls]
    scripts = [request.script for request in requests if isinstance(request, SubmitRequest)]
    records = journal.records(PROJECT)
    assert [r.name for r in records] == ["a", "b"]
    sent = [journal.script_sent(record_.id) for record_ in records]
    assert sent == [script_sent(script) for script in scripts]
    assert all(made is not None and "--ignore-pbs" in (made.options or ()) for made in sent)
    # both durable before the first sbatch, in the one transaction written ahead
    assert [record_.id for record_ in seen[0]] == [record_.id for record_ in records]
    journal.close()


def _settled_manifest_digest(tmp_path: Path, journalled: str | None) -> tuple[str, str]:
    """The digest the manifest of a succeeded job names, and that of its script rendered
    again, for a record with ``journalled`` as its script's digest."""
    state = dataclasses.replace(desired(run("a", outputs={"out": "out.txt"})), root=tmp_path)
    digest = hash_of(state, "a")
    (tmp_path / "runs" / "a").mkdir(parents=True)
    (tmp_path / "runs" / "a" / "out.txt").write_text("made")
    with Journal(tmp_path / "journal.sqlite") as journal:
        sent = None if journalled is None else ScriptSent(journalled, ())
        intent = Intent(PROJECT, "run", "a", digest, None, {}, script=sent)
        (record_id,) = journal.record_intents([intent], NOW)
        journal.record_submitted(record_id, "10", NOW)
        records = journal.records(PROJECT)
        endings = judge(state, observed(job("a", digest, S.COMPLETED, "10")), records)
        code = tmp_path / "code"
        settle.record(journal, state, endings, NOW, lambda _commit: code)
    manifest = read_manifest(tmp_path / "runs" / "a")
    assert manifest is not None
    return manifest.script_sha256, script_sha256(state, state.runs["a"], code)


def test_the_manifest_names_the_digest_journalled_with_the_intent(tmp_path: Path) -> None:
    named, rendered = _settled_manifest_digest(tmp_path, "e" * 64)
    assert named == "e" * 64 != rendered  # journalled, not rendered after the fact


def test_a_job_an_earlier_release_submitted_has_its_script_rendered_again(tmp_path: Path) -> None:
    named, rendered = _settled_manifest_digest(tmp_path, None)
    assert named == rendered
