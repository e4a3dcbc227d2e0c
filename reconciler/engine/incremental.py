"""`recon watch`'s passes planned in part: after a commit that changes a few runs
(``commit_pass``), and on the timer when only some live jobs changed (``jobs_pass``):
those runs and their downstream planned again, the rest of the last pass kept.

A full pass at 100,000 runs loads every spec, reads every journal record, looks at every
output on disk and plans every run: about 9 CPU-seconds, for a commit that may change
one run's command. When the last pass was kept (engine/steady.py: its plan carried
nothing out) and, since then, the journal has not been written, the scheduler answers as
it did, and the plan's next look has not come, the only news is the commit. Then:

- the files that differ between the two commits are listed (one `git diff-tree`), and
  the desired state at the new commit is made from the kept one and the changed spec
  files alone (``desired.loader.reload``: None for anything it cannot tell apart, such
  as recon.yaml, a file added or removed, a run's code, or a run's inputs or outputs);
- the runs those files changed, and every run downstream of them, are planned again
  from the kept plan's inputs (``engine.plan.replan``: None for a run whose decision
  reads more than its upstreams', such as one in an allocation, coupled, or a sweep's
  member); their outputs and inputs on disk are looked at again, the others' are the
  kept pass's, as in a kept timer pass;
- the plan is carried out as a full pass's would be, under the project's lock, the
  journal and the scheduler checked again under it.

A timer pass whose scheduler answers otherwise than for the kept pass, but only in some
of the deployment's jobs that are live before and after (a job started; on Slurm, a
running job's time left, which changes at every pass), is planned likewise from the
kept pass (``jobs_pass``): those jobs' runs and their downstream decided again against
the new answer, the next look made again over every run. It writes nothing and takes no
lock, as a kept timer pass; a plan with something to carry out is left to a full pass.

Both are one path (``planned_in_part``): the next world made from the kept one plus
what changed (``News``: the scheduler's answer, the jobs that changed, the commit's
specs), the runs it touches planned again; ``Plan.has_work`` then says, as for every
pass, whether it has anything to carry out.

Every None, and every error but the user's own, makes the pass a full one instead
(``SteadyPasses``); so does every ``full_every``-th pass, whose plan is then checked
against the kept one when that was made by this module (engine/steady.py's
``steady-mismatch``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from reconciler.desired.desired import Desired
from reconciler.desired.loader import reload
from reconciler.desired.source import changed_files
from reconciler.engine.observe.arrays import read_maps
from reconciler.engine.observe.files import code_at
from reconciler.engine.observe.journal import JournalState
from reconciler.engine.observe.observation import Observed, observe, scheduler_for
from reconciler.engine.plan.actions import Plan
from reconciler.engine.plan.identity import split_by_owner
from reconciler.engine.plan.inputs import FileState, PlanMemo
from reconciler.engine.plan.moves import moved_folders
from reconciler.engine.plan.replan import replan, replan_jobs
from reconciler.engine.reconcile import Look, PassOutcome, Request, carry_out, open_journal
from reconciler.scheduler.base import Observation, Scheduler
from reconciler.scheduler.states import Health
from reconciler.state.directory import prepare_state_dir
from reconciler.state.journal import WriteStamps
from reconciler.state.lock import project_lock
from reconciler.state.outputs import observe_inputs, observe_outputs
from reconciler.state.paths import deployment, journal_path, state_dir
from reconciler.state.records import SubmissionRecord

Clock = Callable[[], datetime]
Stamp = tuple[str, int, int, int] | None

_COMMIT_ID = re.compile(r"[0-9a-f]{40}([0-9a-f]{24})?")


@dataclass(frozen=True)
class PartPass:
    """A pass planned in part from a kept one."""

    outcome: PassOutcome
    stamp: Stamp  # the journal's, taken before the pass (a commit's: under the lock)
    observed: Observed
    visited: tuple[str, ...]  # the runs planned again


def commit_pass(
    kept: PassOutcome,
    kept_stamp: Stamp,
    kept_observed: Observed,
    request: Request,
    commit: str,
    *,
    scheduler: Scheduler | None,
    stamps: WriteStamps,
    clock: Clock,
    approve: Callable[[Plan], bool],
    lock_timeout: float,
) -> PartPass | None:
    """The pass at ``commit`` made from the kept one (at an earlier commit), or None
    when it cannot be (then a full pass is made). ``kept_stamp``: the journal's stamp
    taken before the kept pass read it; ``kept_observed``: the scheduler's answer then."""
    look, before = kept.look, kept.desired
    memo = _kept_memo(look)
    if (
        memo is None
        or look.code_at is None
        or before.commit is None
        or not _COMMIT_ID.fullmatch(commit)
        or request.targets
        or request.replace
        or request.worktree
    ):
        return None
    changes = changed_files(before.root, before.commit, commit)
    if changes is None:
        return None
    reloaded = reload(before, commit, changes)
    if reloaded is None:
        return None
    desired = reloaded.desired
    directory = state_dir(desired)
    prepare_state_dir(directory)
    with project_lock(directory, lock_timeout):
        stamp = stamps.stamp(journal_path(desired))
        if stamp != kept_stamp:  # written since the kept pass read it
            return None
        now = clock()
        if look.plan.next_look is not None and now >= look.plan.next_look.at:
            return None
        scheduler = scheduler or scheduler_for(desired, request.scheduler)
        observed = observe(scheduler, JournalState(look.records, look.setups), now)
        news = News(observed, desired, frozenset(reloaded.changed))
        if not observed.same_as(kept_observed):  # on Slurm, whenever a job runs
            found = changed_jobs(kept, kept_observed, observed, desired)
            if found is None:
                return None
            news = replace(news, own=found[0], jobs_changed=frozenset(found[1]))
        own = look.observation if news.own is None else news.own
        if _unsettled(memo, own, desired.project.project):
            return None  # a job's end to judge and record: a full pass does
        made = planned_in_part(look, news, now)
        if made is None:
            return None
        seen, visited = made
        with open_journal(desired) as journal:
            outcome = carry_out(request, seen, scheduler, journal, clock, approve)
        return PartPass(outcome, stamp, observed, visited)


@dataclass(frozen=True)
class News:
    """What changed since a kept pass (its plan carried nothing out, the journal unwritten
    since, its next look not come): the scheduler's new answer, and in it ``own`` (this
    deployment's jobs) where some live jobs changed (``jobs_changed``: their runs); and
    after a commit, the desired state at it (``desired``) and the runs its spec files
    changed (``specs_changed``)."""

    observed: Observed
    desired: Desired | None = None  # None: the kept pass's commit
    specs_changed: frozenset[str] = frozenset()
    own: Observation | None = None  # None: the kept pass's jobs
    jobs_changed: frozenset[str] = frozenset()


def planned_in_part(kept: Look, news: News, now: datetime) -> tuple[Look, tuple[str, ...]] | None:
    """The next pass's world made from the kept one plus ``news``, and planned in part:
    the runs the news touches and their downstream decided again (engine/plan/replan.py),
    the rest of the kept plan kept; with the runs decided again. None when the news is
    not local to some runs (the pass is then a full one)."""
    memo = _kept_memo(kept)
    if memo is None:
        return None
    own = kept.observation if news.own is None else news.own
    if news.desired is None:  # the same commit: only some live jobs changed
        made = replan_jobs(kept.plan, memo, own, news.jobs_changed, now)
        world = replace(kept.world, observation=own, now=now)
    else:
        desired = news.desired
        affected = memo.affected(news.specs_changed | news.jobs_changed)
        if affected is None or kept.code_at is None:
            return None
        files = _files(desired, kept.files, memo, affected)
        versions = {**kept.code_at, **code_at(desired, _records_of(memo, affected))}
        jobs = own if news.jobs_changed else None
        made = replan(kept.plan, memo, desired, affected, now, files, versions, jobs)
        world = replace(
            kept.world, desired=desired, observation=own, now=now, files=files, code_at=versions
        )
    if made is None:
        return None
    seen = replace(kept, world=world, plan=made.plan, observed=news.observed, memo=made.memo)
    return seen, made.visited


def _kept_memo(look: Look) -> PlanMemo | None:
    """What a kept pass's plan was made from, when a pass may be planned in part from it:
    it had no ending to record (a full pass records it); None otherwise."""
    return None if look.endings or look.setup_changes else look.memo


def _records_of(memo: PlanMemo, names: Collection[str]) -> list[SubmissionRecord]:
    return [record for name in names for record in memo.inputs.history(name)]


def _files(desired: Desired, kept: FileState, memo: PlanMemo, affected: list[str]) -> FileState:
    """The kept pass's files, with the affected runs' outputs and inputs looked at now, as
    ``observe.files.file_state`` looks at every run's (those of runs that have succeeded)."""
    succeeded = sorted(
        name
        for name in affected
        if any(r.final_health is Health.SUCCEEDED for r in memo.inputs.history(name))
        or any(job.health is Health.SUCCEEDED for job in memo.inputs.jobs(name))
    )
    outputs = observe_outputs(desired, succeeded)
    inputs = observe_inputs(desired, succeeded)
    return FileState(
        outputs={**kept.outputs, **{key: v.digest if v else None for key, v in outputs.items()}},
        inputs={**kept.inputs, **{key: v.digest if v else None for key, v in inputs.items()}},
    )


def _unsettled(memo: PlanMemo, observation: Observation, project: str) -> bool:
    """Whether a finished job of the project has no settled record (``observe.endings.judge``
    would judge it, or it is not the journal's yet), told from the runs' and
    allocations' records alone, not every record."""
    for job in observation.jobs:
        if job.tag.project != project or not job.finished:
            continue
        name = job.tag.name
        if job.tag.kind == "run":
            history = memo.inputs.history(name)
        else:
            history = memo.inputs.allocation_history(name)
        if not any(r.job_id == job.job_id and r.final_health is not None for r in history):
            return True
    return False


def jobs_pass(
    kept: PassOutcome, kept_stamp: Stamp, kept_observed: Observed, observed: Observed, now: datetime
) -> PartPass | None:
    """A timer pass at the kept pass's commit, the journal unwritten, before its next
    look, whose scheduler answered ``observed`` where the kept pass had ``kept_observed``:
    made from the kept pass when the only news is that some of the deployment's live jobs
    changed state or rows and are still live (a job started; on Slurm, a running job's
    time left, every pass). Those runs and their downstream are planned again
    (``replan_jobs``); None when anything else differs, or a guard holds the plan. A
    plan that then has something to carry out is not carried out here: ``SteadyPasses``
    makes a full pass instead, under the lock (it asks ``Plan.has_work`` once per pass:
    at 100,000 runs, each walk over the actions costs a tenth of this pass's CPU)."""
    if _kept_memo(kept.look) is None:
        return None
    found = changed_jobs(kept, kept_observed, observed, kept.desired)
    if found is None:
        return None
    own, changed = found
    news = News(observed, own=own, jobs_changed=frozenset(changed))
    made = planned_in_part(kept.look, news, now)
    if made is None or made[0].plan.held:
        return None
    seen, visited = made
    return PartPass(PassOutcome(seen, None), kept_stamp, observed, visited)


def changed_jobs(
    kept: PassOutcome, kept_observed: Observed, observed: Observed, desired: Desired
) -> tuple[Observation, set[str]] | None:
    """This deployment's jobs in ``observed`` and the runs whose jobs differ from the kept
    pass's, when that is all that differs and every changed job is a run's (of
    ``desired``) that was live and still is; None otherwise."""
    look = kept.look
    new, old = observed.jobs, kept_observed.jobs
    if observed.partitions != kept_observed.partitions or _beside_jobs(new) != _beside_jobs(old):
        return None
    project, place = desired.project.project, deployment(desired)
    maps = read_maps(new, project, place, moved_folders(desired))
    share = split_by_owner(new, project, place, look.records, maps, look.renames)
    if share.elsewhere != look.elsewhere or _beside_jobs(share.own) != _beside_jobs(
        look.observation
    ):
        return None
    before = look.observation.jobs
    if [job.job_id for job in share.own.jobs] != [job.job_id for job in before]:
        return None  # a job came or went: adopted, lost or pruned by a full pass
    changed: set[str] = set()
    for job, was in zip(share.own.jobs, before, strict=True):
        if job == was:
            continue
        if (
            job.tag != was.tag
            or job.tag.kind != "run"
            or job.tag.name not in desired.runs
            or job.finished
            or was.finished
        ):
            return None  # an end to judge, an allocation's job, an array not told apart
        changed.add(job.tag.name)
    return share.own, changed


def _beside_jobs(observation: Observation) -> Observation:
    """What an observation says beside its jobs and when it was taken."""
    return observation.model_copy(update={"jobs": (), "taken_at": _EPOCH})


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
