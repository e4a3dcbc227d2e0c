"""Saved plan files: written atomically, read back equal, refused with a message if bad or stale."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from reconciler.engine.apply.planfile import check_fresh, load, save
from reconciler.engine.plan.actions import Action, ActionKind, FieldChange, Plan
from reconciler.engine.plan.causes import Cause
from reconciler.errors import PlanFileError, ReconError, StalePlanError

SAVED = Plan(
    project="cartpole",
    root="/home/ana/cartpole",
    commit="1a2b3c4d5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b",
    scheduler="slurm",
    created_at=datetime(2024, 5, 1, 12, 0, tzinfo=UTC),
    targets=("train",),
    observation_complete=True,
    fingerprint="5f0c1e",
    actions=(
        Action(
            kind=ActionKind.SUBMIT,
            cause=Cause.NEVER_RUN,
            target="prepare",
            reason="not yet run",
            spec_hash="a1",
        ),
        Action(
            kind=ActionKind.REPLACE,
            cause=Cause.SPEC_CHANGED,
            target="train",
            reason="spec changed",
            spec_hash="b2",
            job_ids=("1234",),
            after=("prepare",),
            changes=(
                FieldChange(field="resources.gpus", old="a100:2", new="a100:4"),
                FieldChange(field="env.SEED", old=None, new=7),
                FieldChange(field="env.LR", old=0.5, new=[1, "two"]),
            ),
        ),
        Action(
            kind=ActionKind.ADOPT,
            cause=Cause.ADOPT,
            target="ws",
            target_kind="alloc",
            reason="tagged",
        ),
    ),
)


def now(plan: Plan = SAVED, **changes: Any) -> Plan:
    """The plan made at apply time: by default one minute later, about the same world."""
    update = {"created_at": plan.created_at + timedelta(minutes=1), **changes}
    return plan.model_copy(update=update)


# --- save and load ---------------------------------------------------------------------


def test_save_then_load_reads_back_the_same_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    save(SAVED, path)
    assert load(path) == SAVED
    assert json.loads(path.read_text())["format_version"] == 2
    assert os.listdir(tmp_path) == ["plan.json"]  # no temporary file left behind


def test_save_replaces_an_older_plan(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    save(SAVED, path)
    newer = now(fingerprint="77aa")
    save(newer, str(path))
    assert load(str(path)) == newer


def test_a_failed_save_keeps_the_old_file_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "plan.json"
    save(SAVED, path)
    before = path.read_bytes()

    def refuse(source: str, target: Path) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PlanFileError, match=r"cannot write plan file .*No space left on device"):
        save(now(fingerprint="77aa"), path)
    assert path.read_bytes() == before
    assert os.listdir(tmp_path) == ["plan.json"]


def test_save_into_a_missing_folder_says_so(tmp_path: Path) -> None:
    with pytest.raises(PlanFileError, match=r"cannot write plan file .*No such file or directory"):
        save(SAVED, tmp_path / "nowhere" / "plan.json")


def test_a_missing_file_says_how_to_make_one(tmp_path: Path) -> None:
    path = tmp_path / "plan.json"
    with pytest.raises(PlanFileError) as caught:
        load(path)
    assert str(caught.value) == f"no plan file at {path}: make one with `recon plan -out {path}`"
    assert isinstance(caught.value, ReconError)


def write(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "plan.json"
    if isinstance(content, str):
        path.write_text(content)
    else:
        path.write_bytes(content)
    return path


def saved_document(**changes: Any) -> str:
    document = json.loads(SAVED.model_dump_json())
    document.update(changes)
    return json.dumps(document)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"format_version": 1,', r"is not a plan file: invalid JSON at line 1, column 22"),
        (b"\xff\xfe\x00\xd8garbage", r"is not a plan file: it is not text"),
        ("[1, 2]", r"it holds a JSON list, where `recon plan -out` writes an object"),
        ('"plan"', r"it holds a JSON str"),
        (
            '{"kind": "Run", "name": "train"}',
            r"not a plan file saved by `recon plan -out`: "
            r"it has no actions, fingerprint, format_version, project",
        ),
        (
            saved_document(format_version=1),  # a plan an earlier recon saved: no causes
            r"is a plan of format version 1; this recon applies version 2 only\. "
            r"Run `recon plan -out FILE` again with this recon\.",
        ),
        (
            saved_document(created_at="yesterday", summary={"submit": 1}),
            r"is not a valid plan: created_at: Input should be a valid datetime.*; "
            r"summary: Extra inputs are not permitted",
        ),
        (
            saved_document(actions=[{"kind": "explode"}, {}]),
            r"is not a valid plan: actions\.0\.kind: Input should be 'submit'.*; "
            r"actions\.0\.cause: Field required; and 5 more$",
        ),
    ],
    ids=["json", "binary", "list", "string", "spec", "version", "fields", "actions"],
)
def test_a_bad_file_is_refused_with_a_message(
    tmp_path: Path, content: str | bytes, message: str
) -> None:
    path = write(tmp_path, content)
    with pytest.raises(PlanFileError, match=message) as caught:
        load(path)
    assert str(caught.value).startswith(str(path))


def test_a_folder_is_not_a_plan_file(tmp_path: Path) -> None:
    with pytest.raises(PlanFileError, match=r"cannot read plan file .*: Is a directory"):
        load(tmp_path)


# --- freshness -------------------------------------------------------------------------


def test_a_plan_of_the_same_world_is_fresh() -> None:
    check_fresh(SAVED, now())
    check_fresh(SAVED, now(), max_age=timedelta(minutes=1))


@pytest.mark.parametrize(
    ("current", "reason"),
    [
        (
            now(project="acrobot"),
            "it was made for project cartpole in /home/ana/cartpole, "
            "not project acrobot in /home/ana/cartpole",
        ),
        (
            now(root="/scratch/cartpole"),
            "it was made for project cartpole in /home/ana/cartpole, "
            "not project cartpole in /scratch/cartpole",
        ),
        (
            now(commit="9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"),
            "it was made at commit 1a2b3c4d5e6f, the specs are now at commit 9f8e7d6c5b4a",
        ),
        (
            now(commit=None),
            "it was made at commit 1a2b3c4d5e6f, the specs are now from the work tree",
        ),
        (now(targets=()), "it was made for targets train, not (the whole project)"),
        (
            now(fingerprint="77aa"),
            "the observed state changed since it was made",
        ),
    ],
)
def test_a_stale_plan_is_refused_naming_what_changed(current: Plan, reason: str) -> None:
    with pytest.raises(StalePlanError) as caught:
        check_fresh(SAVED, current)
    assert str(caught.value) == (
        f"the saved plan is stale: {reason}. Run `recon plan -out FILE` again and apply the "
        "new plan."
    )


def test_every_change_is_named_at_once() -> None:
    current = now(commit="9f8e7d6c5b4a39281706f5e4d3c2b1a098765432", fingerprint="77aa")
    with pytest.raises(StalePlanError, match="at commit 9f8e7d6c5b4a; the observed state"):
        check_fresh(SAVED, current)


def other_hash(action: Action) -> Action:
    return action.model_copy(update={"spec_hash": "e9"}) if action.target == "train" else action


@pytest.mark.parametrize(
    ("actions", "moved"),
    [
        # Same commit: a work tree edited after `recon plan -out`.
        (tuple(other_hash(a) for a in SAVED.actions), "train"),
        (SAVED.actions[:2], "allocation ws"),
        (
            (
                *SAVED.actions,
                Action(kind=ActionKind.ADOPT, cause=Cause.ADOPT, target="train", reason="tagged"),
            ),
            "train",
        ),
        (
            tuple(
                Action(
                    kind=ActionKind.SUBMIT,
                    cause=Cause.NEVER_RUN,
                    target=f"run-{i}",
                    reason="not yet run",
                )
                for i in range(7)
            ),
            "allocation ws, prepare, run-0, run-1, run-2 and 5 more",
        ),
    ],
    ids=["spec-hash", "action-gone", "action-added", "many"],
)
def test_a_plan_that_would_now_act_otherwise_is_refused(
    actions: tuple[Action, ...], moved: str
) -> None:
    with pytest.raises(
        StalePlanError, match=rf"stale: a plan made now would act otherwise on {moved}\. Run"
    ):
        check_fresh(SAVED, now(actions=actions))


def test_reasons_may_change_wording_without_making_a_plan_stale() -> None:
    reworded = tuple(a.model_copy(update={"reason": a.reason + " (again)"}) for a in SAVED.actions)
    check_fresh(SAVED, now(actions=reworded))


@pytest.mark.parametrize(
    ("age", "max_age", "said"),
    [
        (timedelta(hours=2, minutes=5), timedelta(hours=1), "it is 2h 5m old, more than the 1h"),
        (timedelta(seconds=31), timedelta(seconds=30), "it is 31s old, more than the 30s"),
        (timedelta(days=1, seconds=1), timedelta(hours=24), "it is 24h 1s old, more than the 24h"),
    ],
)
def test_a_plan_older_than_allowed_is_refused(
    age: timedelta, max_age: timedelta, said: str
) -> None:
    current = now(created_at=SAVED.created_at + age)
    check_fresh(SAVED, current)  # no limit given: age alone never refuses
    with pytest.raises(StalePlanError, match=f"stale: {said} allowed\\. Run"):
        check_fresh(SAVED, current, max_age=max_age)
