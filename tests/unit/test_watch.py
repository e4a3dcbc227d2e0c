"""`recon watch`: the pure schedule, the loop under a frozen clock, and its real edges
(the wake-up queue and signals, the ref watcher, the git branch, the log lines)."""

from __future__ import annotations

import io
import json
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import typer
from freezegun import freeze_time
from freezegun.api import FrozenDateTimeFactory

from reconciler.commands.common import LogFormat, parse_duration
from reconciler.commands.watchlog import LineLog, Puller
from reconciler.engine.plan.actions import LookKind, NextLook, Plan
from reconciler.engine.reconcile import PassOutcome
from reconciler.engine.wakeups import QUIET_MS, RefBurst, RefWatcher, WakeQueue
from reconciler.engine.watch import Level, LoopState, Schedule, Wake, WatchLoop
from reconciler.errors import LockedError, ObservationError, RepoError, SpecError, SpecIssue
from reconciler.repository.refs import BranchRefs
from tests.gitrepo import GitRepo
from tests.planning import guard, outcome_of

T0 = datetime(2025, 3, 1, 12, 0, tzinfo=UTC)
EVERY_30S = Schedule(timedelta(seconds=30))


# -- the pure schedule -----------------------------------------------------------------


def test_backoff_doubles_from_one_second_up_to_the_cap() -> None:
    schedule = Schedule(timedelta(seconds=30), backoff_cap=timedelta(seconds=60))
    delays = [schedule.backoff(n).total_seconds() for n in range(1, 9)]
    assert delays == [1, 2, 4, 8, 16, 32, 60, 60]


def test_backoff_cap_is_never_below_the_interval() -> None:
    schedule = Schedule(timedelta(minutes=10), backoff_cap=timedelta(minutes=5))
    assert schedule.backoff(40) == timedelta(minutes=10)


@pytest.mark.parametrize(
    ("state", "wake", "tip", "wanted"),
    [
        (LoopState(T0, last_tip="a"), Wake.REFS, "b", True),  # a new commit
        (LoopState(T0, last_tip="a"), Wake.REFS, "a", False),  # refs touched, tip unmoved
        (LoopState(T0, last_tip="a"), Wake.TIMER, "a", True),  # follow job states
        (LoopState(T0, last_tip="a", bad_commit="a"), Wake.TIMER, "a", False),
        (LoopState(T0, last_tip="a", bad_commit="a"), Wake.REFS, "b", True),  # maybe the fix
        (LoopState(T0, failures=3, last_tip="a"), Wake.REFS, "b", True),  # even backing off
    ],
)
def test_which_wakeups_call_for_a_pass(
    state: LoopState, wake: Wake, tip: str, wanted: bool
) -> None:
    assert state.wants_pass(wake, tip) is wanted


def test_state_after_a_failure_a_success_and_a_bad_commit() -> None:
    failed = LoopState(T0).failed("a", T0, EVERY_30S).failed("a", T0, EVERY_30S)
    assert (failed.failures, failed.due) == (2, T0 + timedelta(seconds=2))
    recovered = failed.succeeded("a", T0, EVERY_30S)
    assert (recovered.failures, recovered.due) == (0, T0 + timedelta(seconds=30))
    rejected = failed.rejected("b", T0, EVERY_30S)
    assert (rejected.bad_commit, rejected.failures) == ("b", 0)
    assert LoopState(T0, last_tip="a").failed(None, T0, EVERY_30S).last_tip == "a"


def test_the_next_pass_is_at_the_plans_look_or_the_interval_whichever_first() -> None:
    assert EVERY_30S.next_pass(T0, None) == (T0 + timedelta(seconds=30), None)
    soon = renewal_at(12)
    assert EVERY_30S.next_pass(T0, soon) == (T0 + timedelta(seconds=12), soon)
    assert EVERY_30S.next_pass(T0, renewal_at(30)) == (T0 + timedelta(seconds=30), None)
    assert EVERY_30S.next_pass(T0, renewal_at(90)) == (T0 + timedelta(seconds=30), None)


def test_a_look_due_now_or_past_waits_the_floor() -> None:
    for past in (renewal_at(-60), renewal_at(0), renewal_at(2)):
        assert EVERY_30S.next_pass(T0, past) == (T0 + timedelta(seconds=5), past)
    fast = Schedule(timedelta(seconds=2))  # an interval under the floor still holds
    assert fast.next_pass(T0, renewal_at(-60)) == (T0 + timedelta(seconds=2), None)


def test_a_failure_or_a_skip_forgets_the_look() -> None:
    looking = LoopState(T0).succeeded("a", T0, EVERY_30S, renewal_at(12))
    assert (looking.due, looking.looking) == (T0 + timedelta(seconds=12), renewal_at(12))
    failed = looking.failed("a", T0, EVERY_30S)
    assert (failed.due, failed.looking) == (T0 + timedelta(seconds=1), None)
    assert looking.skipped(T0, EVERY_30S).looking is None


# -- the loop, on a frozen clock ---------------------------------------------------------


def outcome(commit: str, look: NextLook | None = None) -> PassOutcome:
    plan = Plan(
        project="demo", root="/nowhere", commit=commit, scheduler="fake", created_at=T0,
        observation_complete=True, fingerprint="f", actions=(), next_look=look,
    )  # fmt: skip
    return outcome_of(plan)


def renewal_at(seconds: float) -> NextLook:
    """A plan's next look `seconds` after T0: an allocation's renewal."""
    return NextLook(
        at=T0 + timedelta(seconds=seconds), kind=LookKind.RENEWAL, target="warm",
        reason="allocation job 12 of warm is down to 5m (min_remaining): renewed",
    )  # fmt: skip


@dataclass
class Script:
    """A repo whose tip moves at given seconds, and wake-ups that replay those moves as
    REFS events, then STOP at `until`. Waiting ticks the frozen clock: no real sleep."""

    frozen: FrozenDateTimeFactory
    until: float
    commits: list[tuple[float, str]] = field(default_factory=list)
    extra_wakes: list[tuple[float, Wake]] = field(default_factory=list)
    head: str = "c0"
    waits: list[float] = field(default_factory=list)

    def elapsed(self) -> float:
        return (datetime.now(UTC) - T0).total_seconds()

    def tip(self) -> str:
        return self.head

    def wait(self, timeout: float) -> Wake:
        self.waits.append(timeout)
        now = self.elapsed()
        events = sorted(
            [(at, Wake.REFS, sha) for at, sha in self.commits]
            + [(at, wake, None) for at, wake in self.extra_wakes]
        )
        for at, wake, sha in events:
            if now <= at <= now + timeout and at <= self.until:
                self.frozen.tick(at - now)
                if sha is not None:
                    self.commits.remove((at, sha))
                    self.head = sha
                else:
                    self.extra_wakes.remove((at, wake))
                return wake
        if now + timeout >= self.until:
            self.frozen.tick(max(0.0, self.until - now))
            return Wake.STOP
        self.frozen.tick(timeout)
        return Wake.TIMER


@dataclass
class Recorder:
    """The pass and the log, recording when (seconds since T0) each happened."""

    failures: dict[float, Exception] = field(default_factory=dict)  # at or after: raise once
    # the next look the plan of a pass at this many seconds after T0 says (None: none)
    looks: Callable[[float], NextLook | None] = lambda _now: None
    passes: list[tuple[float, str]] = field(default_factory=list)
    lines: list[tuple[Level, str, dict[str, Any]]] = field(default_factory=list)

    def reconcile(self, commit: str) -> PassOutcome:
        now = (datetime.now(UTC) - T0).total_seconds()
        for at in sorted(self.failures):
            if at <= now:
                raise self.failures.pop(at)
        self.passes.append((now, commit))
        return outcome(commit, self.looks(now))

    def log(self, level: Level, event: str, **fields: Any) -> None:
        self.lines.append((level, event, fields))

    def events(self, name: str) -> list[dict[str, Any]]:
        return [fields for _, event, fields in self.lines if event == name]


@pytest.fixture
def frozen() -> Iterator[FrozenDateTimeFactory]:
    with freeze_time(T0) as factory:
        assert isinstance(factory, FrozenDateTimeFactory)
        yield factory


def run_loop(
    script: Script, recorder: Recorder, schedule: Schedule = EVERY_30S, **extra: Any
) -> None:
    loop = WatchLoop(
        schedule, script.tip, recorder.reconcile, script, recorder.log,
        lambda: datetime.now(UTC), **extra,
    )  # fmt: skip
    loop.run()


def test_passes_at_start_then_every_interval(frozen: FrozenDateTimeFactory) -> None:
    script, recorder = Script(frozen, until=95), Recorder()
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (30, "c0"), (60, "c0"), (90, "c0")]
    assert [f["trigger"] for f in recorder.events("pass")] == ["timer"] * 4
    assert recorder.lines[-1][1] == "stopped"


def test_a_new_commit_passes_at_once_and_restarts_the_interval(
    frozen: FrozenDateTimeFactory,
) -> None:
    script, recorder = Script(frozen, until=70, commits=[(12.5, "c1")]), Recorder()
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (12.5, "c1"), (42.5, "c1")]
    assert [f["trigger"] for f in recorder.events("pass")] == ["timer", "refs", "timer"]


def test_ref_events_without_a_new_tip_do_not_pass(frozen: FrozenDateTimeFactory) -> None:
    script = Script(frozen, until=40, extra_wakes=[(5, Wake.REFS), (6, Wake.REFS)])
    recorder = Recorder()
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (30, "c0")]
    assert script.waits[:3] == [30, 25, 24]  # the interval keeps counting down


def test_transient_errors_back_off_exponentially_then_recover(
    frozen: FrozenDateTimeFactory,
) -> None:
    locked = LockedError("another recon apply holds the lock")
    down = ObservationError("squeue: slurmctld not responding")
    recorder = Recorder(failures={0: locked, 0.5: down, 1: locked})
    script = Script(frozen, until=40)
    run_loop(script, recorder)
    # Fails at 0, 1 (+1 s), 3 (+2 s), passes at 7 (+4 s), then the interval again.
    assert recorder.passes == [(7, "c0"), (37, "c0")]
    retries = recorder.events("retry")
    assert [r["delay"] for r in retries] == [1, 2, 4]
    assert [r["error"] for r in retries] == ["LockedError", "ObservationError", "LockedError"]
    assert all(level is Level.WARNING for level, event, _ in recorder.lines if event == "retry")


def test_a_bad_commit_is_logged_once_and_waits_for_the_next(
    frozen: FrozenDateTimeFactory,
) -> None:
    bad = SpecError([SpecIssue("specs/a.yaml", 3, "resources.cpus", "must be a number")])
    recorder = Recorder(failures={0: bad})
    script = Script(frozen, until=100, commits=[(50, "c1")])
    run_loop(script, recorder)
    # c0 is bad: the timer passes at 30 skip it; c1 at 50 passes, then every 30 s.
    assert recorder.passes == [(50, "c1"), (80, "c1")]
    (error,) = recorder.events("spec-error")
    assert error["commit"] == "c0" and "specs/a.yaml:3" in error["message"]
    assert recorder.events("retry") == []


def test_a_held_plan_is_logged_once_until_it_changes(frozen: FrozenDateTimeFactory) -> None:
    """A commit that would empty the project holds every pass; the log says so once, and
    again for another commit that is held too."""
    recorder = Recorder()
    held = guard("a", "b")

    def reconcile(commit: str) -> PassOutcome:
        recorder.passes.append((script.elapsed(), commit))
        return outcome_of(outcome(commit).plan, held=held)

    script = Script(frozen, until=100, commits=[(50, "c1")])
    loop = WatchLoop(
        EVERY_30S, script.tip, reconcile, script, recorder.log, lambda: datetime.now(UTC)
    )
    loop.run()
    assert recorder.passes == [(0, "c0"), (30, "c0"), (50, "c1"), (80, "c1")]
    refused = recorder.events("prune-refused")
    assert [r["commit"] for r in refused] == ["c0", "c1"]
    assert all(level is Level.WARNING for level, e, _ in recorder.lines if e == "prune-refused")
    assert refused[0]["message"].startswith(
        "the commit declares no run or allocation, and the plan's prunes would cancel 2 jobs"
    )


def test_stop_after_the_current_pass(frozen: FrozenDateTimeFactory) -> None:
    script = Script(frozen, until=1000, extra_wakes=[(45, Wake.STOP)])
    recorder = Recorder()
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (30, "c0")]
    assert recorder.lines[-1][1] == "stopped"


def test_pull_before_timer_passes_only_and_notify_after_each_pass(
    frozen: FrozenDateTimeFactory,
) -> None:
    pulls: list[float] = []
    notified: list[tuple[str | None, datetime]] = []
    script, recorder = Script(frozen, until=35, commits=[(10, "c1")]), Recorder()
    run_loop(
        script,
        recorder,
        pull=lambda: pulls.append(script.elapsed()),
        after_pass=lambda done, started: notified.append((done.plan.commit, started)),
    )
    assert pulls == [0]  # not before the commit pass at 10; the next timer is at 40
    assert notified == [("c0", T0), ("c1", T0 + timedelta(seconds=10))]


def test_an_unexpected_error_is_logged_backed_off_and_the_next_pass_runs(
    frozen: FrozenDateTimeFactory,
) -> None:
    recorder = Recorder(failures={0: ZeroDivisionError("a bug")})
    told: list[tuple[str | None, int, str]] = []
    script = Script(frozen, until=40)
    run_loop(script, recorder, on_crash_loop=lambda *said: told.append(said))
    assert recorder.passes == [(1, "c0"), (31, "c0")]  # backed off 1 s, then the interval
    (crash,) = recorder.events("pass-crashed")
    assert (crash["error"], crash["failures"], crash["delay"]) == ("ZeroDivisionError", 1, 1)
    assert "Traceback" in crash["traceback"] and "ZeroDivisionError: a bug" in crash["traceback"]
    assert [level for level, event, _ in recorder.lines if event == "pass-crashed"] == [Level.ERROR]
    assert recorder.events("recovered") == [{"commit": "c0", "failures": 1}]
    assert told == []  # one bad pass is not a crash loop


def test_a_crash_loop_is_told_once_per_streak(frozen: FrozenDateTimeFactory) -> None:
    bug = KeyError("runs")
    recorder = Recorder(failures={0: bug, 0.5: RuntimeError("x"), 1: bug, 2: bug})
    told: list[tuple[str | None, int, str]] = []
    run_loop(Script(frozen, until=60), recorder, on_crash_loop=lambda *said: told.append(said))
    # Fails at 0, 1, 3 and 7, passes at 15 (+8 s), then every interval.
    assert recorder.passes == [(15, "c0"), (45, "c0")]
    assert [c["failures"] for c in recorder.events("pass-crashed")] == [1, 2, 3, 4]
    assert told == [("c0", 3, "KeyError: 'runs'")]


def test_a_bug_outside_the_pass_itself_does_not_end_the_loop(
    frozen: FrozenDateTimeFactory,
) -> None:
    pulls = iter([ValueError("bad pull"), None, None])

    def pull() -> None:
        error = next(pulls)
        if error is not None:
            raise error

    recorder = Recorder()
    run_loop(Script(frozen, until=40), recorder, pull=pull)
    assert recorder.passes == [(1, "c0"), (31, "c0")]
    assert [c["error"] for c in recorder.events("pass-crashed")] == ["ValueError"]


def test_a_tip_that_cannot_be_read_backs_off(frozen: FrozenDateTimeFactory) -> None:
    calls: Iterator[str | Exception] = iter([RepoError("branch gone"), "c0", "c0"])

    def tip() -> str:
        value = next(calls)
        if isinstance(value, Exception):
            raise value
        return value

    recorder = Recorder()
    loop = WatchLoop(
        EVERY_30S, tip, recorder.reconcile, Script(frozen, until=20), recorder.log,
        lambda: datetime.now(UTC),
    )  # fmt: skip
    loop.run()
    assert recorder.passes == [(1, "c0")]
    assert recorder.events("retry")[0]["commit"] is None


# -- the wake-up queue and signals -------------------------------------------------------


def test_queue_times_out_as_timer_and_prefers_stop() -> None:
    wakeups = WakeQueue()
    assert wakeups.wait(0.01) is Wake.TIMER
    wakeups.put(Wake.REFS)
    assert wakeups.wait(10) is Wake.REFS
    for wake in (Wake.REFS, Wake.STOP, Wake.REFS):
        wakeups.put(wake)
    assert wakeups.wait(10) is Wake.STOP
    assert wakeups.wait(0) is Wake.TIMER  # drained


def test_a_burst_of_ref_changes_is_one_wakeup_once_quiet() -> None:
    burst = RefBurst(quiet=100, longest=1600)  # in milliseconds here: exact sums
    assert not burst.settled(0)  # nothing changed: nothing to tell
    wakeups = 0
    for step in range(10):  # ten commits 60 ms apart, each looked at 10 ms later
        burst.changed(step * 60)
        wakeups += burst.settled(step * 60 + 10)
    assert wakeups == 0  # never quiet for 100 ms while they come
    assert not burst.settled(540 + 99)
    assert burst.settled(540 + 100)  # 100 ms after the last one
    assert not burst.settled(5000)  # told once


def test_a_stream_of_ref_changes_that_never_pauses_still_wakes_the_loop() -> None:
    burst = RefBurst(quiet=100, longest=1600)
    wakeups = []
    for now in range(0, 3300, 50):  # a change every 50 ms for 3.3 s
        burst.changed(now)
        if burst.settled(now):
            wakeups.append(now)
    assert wakeups == [1600, 3250]  # the longest a stream is grouped, then again


@pytest.fixture
def restore_signals() -> Iterator[None]:
    saved = {number: signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    yield
    for number, handler in saved.items():
        signal.signal(number, handler)


@pytest.mark.usefixtures("restore_signals")
@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT])
def test_a_signal_wakes_the_waiting_loop_with_stop(number: signal.Signals) -> None:
    wakeups = WakeQueue()
    wakeups.stop_on_signals([signal.SIGINT, signal.SIGTERM])
    threading.Timer(0.2, os.kill, (os.getpid(), number)).start()
    started = time.monotonic()
    assert wakeups.wait(30) is Wake.STOP  # no KeyboardInterrupt either
    assert time.monotonic() - started < 5


# -- the branch and its refs -------------------------------------------------------------


@pytest.fixture
def git_repo(tmp_path: Path) -> GitRepo:
    repo = GitRepo(tmp_path / "repo")
    repo.commit({"project/recon.yaml": "project: demo\n"}, message="first")
    return repo


def test_tip_of_head_and_of_a_branch(git_repo: GitRepo) -> None:
    first = git_repo.git("rev-parse", "HEAD")
    git_repo.git("branch", "deploy")
    second = git_repo.commit(message="second")
    project = git_repo.root / "project"  # the project is a subfolder
    assert BranchRefs(project, None).tip() == second
    assert BranchRefs(project, "deploy").tip() == first
    with pytest.raises(RepoError, match="branch 'nope' not found"):
        BranchRefs(project, "nope")


def test_ref_changes_are_refs_not_locks_or_the_index(git_repo: GitRepo) -> None:
    refs = BranchRefs(git_repo.root, "main")
    git_dir = git_repo.root / ".git"
    assert refs.is_ref_change(str(git_dir / "refs" / "heads" / "main"))
    assert refs.is_ref_change(str(git_dir / "packed-refs"))
    assert refs.is_ref_change(str(git_dir / "HEAD"))
    assert not refs.is_ref_change(str(git_dir / "refs" / "heads" / "main.lock"))
    assert not refs.is_ref_change(str(git_dir / "index"))
    assert not refs.is_ref_change(str(git_dir / "ORIG_HEAD"))
    assert set(refs.watched_dirs()) == {git_dir.resolve(), (git_dir / "refs" / "heads").resolve()}


def test_watcher_wakes_on_a_commit_within_seconds(git_repo: GitRepo) -> None:
    refs = BranchRefs(git_repo.root, "main")
    wakeups = WakeQueue()
    errors: list[Exception] = []
    watcher = RefWatcher(refs.watched_dirs(), refs.is_ref_change, wakeups, errors.append)
    watcher.start()
    try:
        time.sleep(0.3)  # let inotify register its watches
        assert wakeups.wait(0.5) is Wake.TIMER  # nothing yet
        git_repo.git("add", "-A")  # the index changes: not a ref
        assert wakeups.wait(0.8) is Wake.TIMER
        started = time.monotonic()
        git_repo.commit(message="new")
        assert wakeups.wait(5) is Wake.REFS
        assert time.monotonic() - started < 3
    finally:
        watcher.stop()
    assert errors == []


def test_watcher_wakes_once_for_a_burst_of_commits(git_repo: GitRepo) -> None:
    """A script's commits, one after another: one wake-up for all, so that the pass plans
    the last commit and submits nothing for the ones it replaces."""
    refs = BranchRefs(git_repo.root, "main")
    woken: list[float] = []

    class Counted(WakeQueue):
        def put(self, wake: Wake) -> None:
            woken.append(time.monotonic())
            super().put(wake)

    wakeups = Counted()
    errors: list[Exception] = []
    watcher = RefWatcher(refs.watched_dirs(), refs.is_ref_change, wakeups, errors.append)
    watcher.start()
    try:
        time.sleep(0.3)  # let inotify register its watches
        for commit in range(10):  # one git command each: 15-30 ms apart, well within quiet
            git_repo.git("commit", "-q", "--allow-empty", "-m", f"burst {commit}")
        last = time.monotonic()
        assert wakeups.wait(5) is Wake.REFS
        time.sleep(3 * QUIET_MS / 1000)  # any later wake-up would have come by now
    finally:
        watcher.stop()
    assert errors == []
    assert len(woken) == 1, [round(at - last, 3) for at in woken]


@pytest.fixture
def clone(git_repo: GitRepo, tmp_path: Path) -> GitRepo:
    """A clone of `git_repo` (its origin), as a deploy checkout would be."""
    target = tmp_path / "deploy"
    git_repo.git("clone", "-q", str(git_repo.root), str(target))
    return GitRepo(target)  # `git init` again in a clone changes nothing


def test_pull_fast_forwards_a_clean_checkout(git_repo: GitRepo, clone: GitRepo) -> None:
    new = git_repo.commit({"project/a.txt": "a\n"}, message="upstream")
    result = BranchRefs(clone.root, "main").pull()
    assert (result.moved, result.new) == (True, new)
    assert clone.git("rev-parse", "HEAD") == new
    assert (clone.root / "project" / "a.txt").read_text() == "a\n"


def test_pull_leaves_a_dirty_checkout_alone(git_repo: GitRepo, clone: GitRepo) -> None:
    old = clone.git("rev-parse", "HEAD")
    git_repo.commit({"project/recon.yaml": "project: other\n"}, message="upstream")
    (clone.root / "project" / "recon.yaml").write_text("project: edited by hand\n")
    result = BranchRefs(clone.root, "main").pull()
    assert not result.moved and "changes" in result.why
    assert clone.git("rev-parse", "HEAD") == old
    assert (clone.root / "project" / "recon.yaml").read_text() == "project: edited by hand\n"


def test_pull_moves_a_branch_not_checked_out_without_touching_files(
    git_repo: GitRepo, clone: GitRepo
) -> None:
    clone.git("checkout", "-q", "-b", "local")
    new = git_repo.commit({"project/a.txt": "a\n"}, message="upstream")
    result = BranchRefs(clone.root, "main").pull()
    assert result.moved and clone.git("rev-parse", "main") == new
    assert not (clone.root / "project" / "a.txt").exists()


def test_pull_never_merges_a_diverged_branch(git_repo: GitRepo, clone: GitRepo) -> None:
    git_repo.commit({"project/a.txt": "upstream\n"}, message="upstream")
    mine = clone.commit({"project/b.txt": "mine\n"}, message="local")
    result = BranchRefs(clone.root, "main").pull()
    assert not result.moved and "diverged" in result.why
    assert clone.git("rev-parse", "HEAD") == mine


# -- command-line pieces -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("30s", 30), ("2m", 120), ("1h", 3600), ("500ms", 0.5), ("45", 45), ("1.5s", 1.5)],
)
def test_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "0s", "fast", "-1s", "3d"])
def test_bad_durations_say_how_to_write_one(text: str) -> None:
    with pytest.raises(typer.BadParameter, match="30s"):
        parse_duration(text)


def test_json_log_lines_always_carry_the_same_keys() -> None:
    out = io.StringIO()
    log = LineLog(out, LogFormat.json, lambda: T0)
    log(Level.INFO, "pass", commit="abc", counts={"submitted": 1}, trigger="refs")
    log(Level.WARNING, "retry", message="slurmctld down")
    first, second = (json.loads(line) for line in out.getvalue().splitlines())
    assert first == {
        "time": "2025-03-01T12:00:00.000+00:00", "level": "info", "event": "pass",
        "commit": "abc", "counts": {"submitted": 1}, "trigger": "refs",
    }  # fmt: skip
    assert {"time", "level", "event", "commit", "counts"} <= second.keys()
    assert second["commit"] is None and second["level"] == "warning"


def test_text_log_lines_are_one_readable_line() -> None:
    out = io.StringIO()
    log = LineLog(out, LogFormat.text, lambda: T0)
    log(Level.INFO, "pass", commit="0123456789abcdef", counts={"submitted": 2, "adopted": 0})
    log(Level.ERROR, "spec-error", message="2 problems")
    assert out.getvalue().splitlines() == [
        "2025-03-01T12:00:00.000+00:00 INFO    pass commit=0123456789ab counts=submitted=2",
        "2025-03-01T12:00:00.000+00:00 ERROR   spec-error message='2 problems'",
    ]


def test_a_traceback_is_one_field_in_json_and_indented_lines_in_text() -> None:
    trace = 'Traceback (most recent call last):\n  File "x.py", line 1\nKeyError: 1\n'
    out = io.StringIO()
    LineLog(out, LogFormat.json, lambda: T0)(Level.ERROR, "pass-crashed", traceback=trace)
    assert json.loads(out.getvalue())["traceback"] == trace
    out = io.StringIO()
    LineLog(out, LogFormat.text, lambda: T0)(Level.ERROR, "pass-crashed", traceback=trace)
    assert out.getvalue().splitlines() == [
        "2025-03-01T12:00:00.000+00:00 ERROR   pass-crashed",
        "    Traceback (most recent call last):",
        '      File "x.py", line 1',
        "    KeyError: 1",
    ]


def test_pull_logs_a_move_and_says_why_not_once_per_upstream_commit(
    git_repo: GitRepo, clone: GitRepo
) -> None:
    out = io.StringIO()
    puller = Puller(BranchRefs(clone.root, "main"), LineLog(out, LogFormat.json, lambda: T0))
    puller()  # up to date: silent
    new = git_repo.commit({"project/a.txt": "a\n"}, message="upstream")
    puller()
    clone.commit({"project/b.txt": "mine\n"}, message="local")
    git_repo.commit({"project/c.txt": "c\n"}, message="upstream again")
    puller()
    puller()  # still diverged from the same upstream commit: not said again
    said = [json.loads(line) for line in out.getvalue().splitlines()]
    assert [(line["event"], line["level"]) for line in said] == [
        ("pulled", "info"),
        ("not-pulled", "warning"),
    ]
    assert said[0]["commit"] == new and "diverged" in said[1]["message"]


# -- a pass returns when its plan next needs a look ------------------------------------


def test_a_pass_returns_when_its_plan_next_needs_a_look(frozen: FrozenDateTimeFactory) -> None:
    script = Script(frozen, until=70)
    recorder = Recorder(looks=lambda now: renewal_at(12) if now < 12 else None)
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (12, "c0"), (42, "c0")]
    assert [f["trigger"] for f in recorder.events("pass")] == ["timer", "look", "timer"]
    assert script.waits[:3] == [12, 30, 30]
    (told,) = recorder.events("next-look")
    assert told == {
        "commit": "c0", "kind": "renewal", "target": "warm",
        "at": "2025-03-01T12:00:12.000+00:00", "delay": 12,
        "message": "allocation job 12 of warm is down to 5m (min_remaining): renewed",
    }  # fmt: skip


def test_a_look_after_the_interval_leaves_the_interval(frozen: FrozenDateTimeFactory) -> None:
    script, recorder = Script(frozen, until=95), Recorder(looks=lambda _now: renewal_at(100))
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (30, "c0"), (60, "c0"), (90, "c0")]
    # said only once it brings a pass forward: the pass at 90 looks again at 100
    assert [(f["at"], f["delay"]) for f in recorder.events("next-look")] == [
        ("2025-03-01T12:01:40.000+00:00", 10)
    ]


def test_a_look_already_due_is_looked_at_soon_never_in_a_busy_loop(
    frozen: FrozenDateTimeFactory,
) -> None:
    """A plan that keeps saying a time just past (say the job at its renewal is a second
    slow to count as expiring): passes every floor, logged once."""
    script, recorder = Script(frozen, until=16), Recorder(looks=lambda _now: renewal_at(1))
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (5, "c0"), (10, "c0"), (15, "c0")]
    assert script.waits[:3] == [5, 5, 5]
    assert len(recorder.events("next-look")) == 1


def test_commits_still_wake_a_watch_waiting_for_a_look(frozen: FrozenDateTimeFactory) -> None:
    script = Script(frozen, until=60, commits=[(8, "c1")])
    recorder = Recorder(looks=lambda now: renewal_at(20) if now < 20 else None)
    run_loop(script, recorder)
    assert recorder.passes == [(0, "c0"), (8, "c1"), (20, "c1"), (50, "c1")]
    triggers = [f["trigger"] for f in recorder.events("pass")]
    assert triggers == ["timer", "refs", "look", "timer"]
    assert len(recorder.events("next-look")) == 1  # the same look, said once


def test_a_failed_look_backs_off_as_any_failed_pass(frozen: FrozenDateTimeFactory) -> None:
    """The error decides the wait, as controller-runtime ignores the Result of a failed
    Reconcile: the plan of the last good pass is not asked again."""
    locked = LockedError("another recon apply holds the lock")
    recorder = Recorder(
        failures={20: locked}, looks=lambda now: renewal_at(20) if now < 20 else None
    )
    run_loop(Script(frozen, until=60), recorder)
    assert recorder.passes == [(0, "c0"), (21, "c0"), (51, "c0")]
    assert [f["trigger"] for f in recorder.events("pass")] == ["timer", "timer", "timer"]
    assert [r["delay"] for r in recorder.events("retry")] == [1]
