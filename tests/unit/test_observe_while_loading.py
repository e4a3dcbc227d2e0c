"""A pass asks the scheduler while the spec files load, and nothing else changes.

`recon plan`, `recon status` and apply's pass read recon.yaml and the journal, start the
observation in a thread, load the specs, then join. These tests prove the two run at the
same time without timing anything: the observation and the load each wait for the other
to have started, so done one after the other, the first waits in vain and says so. And
the thread's errors, and the load's, read as they did when the two ran in turn.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from reconciler.desired import loader
from reconciler.desired.desired import Desired
from reconciler.engine import reconcile
from reconciler.engine.observe import observation
from reconciler.engine.reconcile import Request, look_once, reconcile_once
from reconciler.errors import LockedError, ObservationError, SpecError, UnknownTarget
from reconciler.scheduler.base import Observation
from reconciler.scheduler.testing import ScriptedScheduler
from reconciler.state.lock import project_lock
from reconciler.state.paths import JOURNAL_FILE
from tests.cli import recon
from tests.gitrepo import GitRepo

RUN = "kind: Run\nname: {name}\ncommand: 'true'\nresources: {{cpus: 1}}\noutputs:\n  out: o\n"
# Long enough for any loaded machine; only a pass that does not overlap ever waits it out.
PATIENCE = 30.0


@dataclass
class Meeting:
    """Where the observation and the load each say they started and wait for the other."""

    observing: threading.Event = field(default_factory=threading.Event)
    loading: threading.Event = field(default_factory=threading.Event)
    observe_met_load: bool = False
    load_met_observe: bool = False
    observed: threading.Event = field(default_factory=threading.Event)  # observe returned
    locked_while_loading: bool = False  # whether the project lock was held then
    patience: float = PATIENCE
    observed_in: list[str] = field(default_factory=list)  # the thread of each observe


def meeting_scheduler(meeting: Meeting, error: Exception | None = None) -> ScriptedScheduler:
    """A scheduler whose observation waits until the load has started (then raises
    ``error``, if any); it has no sinfo, answers a submission with job 1, takes cancels."""

    def observe(since: datetime) -> Observation:
        meeting.observed_in.append(threading.current_thread().name)
        meeting.observing.set()
        meeting.observe_met_load = meeting.loading.wait(meeting.patience)
        meeting.observed.set()
        if error is not None:
            raise error
        return Observation(taken_at=datetime.now(UTC), jobs=(), complete=True)

    return ScriptedScheduler(
        observe=observe,
        partitions=ObservationError("no sinfo here: fit unknown"),
        submit="1",
        cancel=None,
    )


@pytest.fixture
def meeting(monkeypatch: pytest.MonkeyPatch) -> Meeting:
    """The load, made to say it started and to wait for the observation to start."""
    met = Meeting()
    real: Callable[..., Desired] = loader.load_desired  # what reconcile imported

    def load_desired(*args: Any, **kwargs: Any) -> Desired:
        try:
            with project_lock(args[0].root / ".recon", 0.0):
                pass
        except LockedError:
            met.locked_while_loading = True
        met.loading.set()
        met.load_met_observe = met.observing.wait(met.patience)
        return real(*args, **kwargs)

    monkeypatch.setattr(reconcile, "load_desired", load_desired)  # the probe's load
    monkeypatch.setattr(observation, "load_desired", load_desired)  # a pass's
    return met


def project(tmp_path: Path, files: dict[str, str] | None = None) -> Path:
    repo = GitRepo(tmp_path / "repo")
    repo.commit(
        {"recon.yaml": "project: overlap\n", **(files or {"specs/a.yaml": RUN.format(name="a")})}
    )
    return repo.root


def observing_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name.startswith("recon-observe")]


def test_plan_observes_while_the_specs_load(tmp_path: Path, meeting: Meeting) -> None:
    scheduler = meeting_scheduler(meeting)

    seen = look_once(Request(project(tmp_path)), scheduler=scheduler)

    assert meeting.observe_met_load and meeting.load_met_observe
    assert meeting.observed_in[0] != threading.current_thread().name
    assert [a.target for a in seen.plan.actions if a.changes_cluster] == ["a"]
    assert scheduler.methods("submit", "cancel") == []  # a plan acts on nothing
    assert not meeting.locked_while_loading  # and takes no lock
    assert observing_threads() == []


def test_apply_observes_while_the_specs_load_under_the_lock(
    tmp_path: Path, meeting: Meeting
) -> None:
    scheduler = meeting_scheduler(meeting)

    outcome = reconcile_once(Request(project(tmp_path)), scheduler=scheduler)

    assert meeting.observe_met_load and meeting.load_met_observe
    assert meeting.locked_while_loading
    assert scheduler.methods("submit", "cancel") == ["submit"]
    assert [a.target for a in outcome.plan.actions if a.changes_cluster] == ["a"]


def test_the_probe_fails_a_pass_that_loads_then_observes(tmp_path: Path, meeting: Meeting) -> None:
    """The probe itself: load, then observe, one after the other (as before), and the load
    reports that it waited for the observation in vain."""
    meeting.patience = 0.05
    root = project(tmp_path)
    scheduler = meeting_scheduler(meeting)

    reconcile.load(Request(root))
    scheduler.observe(datetime.now(UTC))

    assert not meeting.load_met_observe
    assert meeting.observe_met_load


def test_an_observation_error_reads_as_before(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    root = project(tmp_path)
    met = Meeting()
    met.loading.set()  # not waiting: this test is about the error
    failing = meeting_scheduler(
        met, ObservationError("squeue failed: Unable to contact slurm controller")
    )
    monkeypatch.setattr(reconcile, "scheduler_for", lambda *_args: failing)

    result = recon(capsys, "plan", str(root))

    assert result.code == 1
    assert result.err == "error: squeue failed: Unable to contact slurm controller\n"
    assert "Traceback" not in result.out + result.err
    assert observing_threads() == []
    with pytest.raises(ObservationError, match=r"^squeue failed: Unable to contact"):
        look_once(Request(root), scheduler=failing)


def test_a_spec_error_is_told_first_and_once_the_observation_is_over(
    tmp_path: Path, meeting: Meeting
) -> None:
    broken = {"specs/a.yaml": RUN.format(name="a"), "specs/b.yaml": "kind: Run\nname: b\n"}
    scheduler = meeting_scheduler(meeting, ObservationError("sacct failed"))

    with pytest.raises(SpecError) as raised:
        look_once(Request(project(tmp_path, broken)), scheduler=scheduler)

    assert "specs/b.yaml" in str(raised.value)
    assert meeting.observed.is_set()  # the thread had ended when the error came out
    assert observing_threads() == []


@pytest.mark.parametrize(
    "request_of",
    [
        lambda root: Request(root, targets=("nosuch",)),
        lambda root: Request(root, replace=("nosuch",)),
    ],
    ids=["target", "replace"],
)
def test_a_run_name_that_is_none_is_told_before_the_observations_error(
    tmp_path: Path, meeting: Meeting, request_of: Callable[[Path], Request]
) -> None:
    """A typo on the command line is told as such even where the cluster cannot be seen
    (plan, status and apply alike), once the observation is over."""
    root = project(tmp_path)
    for step in (look_once, reconcile_once):
        met = Meeting(loading=meeting.loading, observing=meeting.observing)
        scheduler = meeting_scheduler(met, ObservationError("squeue failed"))
        with pytest.raises(
            UnknownTarget, match=r"^no run named nosuch in this project \(runs: a\)$"
        ):
            step(request_of(root), scheduler=scheduler)
        assert met.observed.is_set()
        assert observing_threads() == []


def test_a_broken_scheduler_choice_waits_behind_a_spec_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scheduler is chosen before the specs load now; a spec error still comes first."""
    broken = {"specs/b.yaml": "kind: Run\nname: b\n"}
    monkeypatch.setenv("RECON_LOCAL_CPUS", "many")
    root = project(tmp_path, broken)
    with pytest.raises(SpecError):
        look_once(Request(root, scheduler="local"))
    with pytest.raises(SpecError):
        reconcile_once(Request(root, scheduler="local"))


def test_apply_tells_a_spec_error_before_a_held_lock_and_makes_no_journal(
    tmp_path: Path, meeting: Meeting
) -> None:
    broken = {"specs/b.yaml": "kind: Run\nname: b\n"}
    root = project(tmp_path, broken)
    scheduler = meeting_scheduler(meeting)
    with pytest.raises(SpecError):
        reconcile_once(Request(root), scheduler=scheduler)
    assert not (root / ".recon" / JOURNAL_FILE).exists()
    with project_lock(root / ".recon", 0.0), pytest.raises(SpecError):  # another apply runs
        reconcile_once(Request(root), scheduler=scheduler)
    assert scheduler.methods("submit", "cancel") == []
