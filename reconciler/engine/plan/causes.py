"""Why the planner chose each action, as a value (``Action.cause``): one word per case
the planner tells apart, what behaviour and tests key on, while the action's reason says
it in words for a person.
"""

from __future__ import annotations

from enum import StrEnum


class Cause(StrEnum):
    """Why the planner chose an action, as a value: what behaviour and tests key on,
    while the action's ``reason`` says it in words for a person (and may be reworded).
    Like kopf's cause detection, one word per case the planner tells apart."""

    # a run submitted (submit, replace, retry, may rerun)
    NEVER_RUN = "never_run"  # no job of any spec yet
    SPEC_CHANGED = "spec_changed"  # its spec (fields, script, environment) changed
    CODE_CHANGED = "code_changed"  # a committed file of its code changed since its job
    INPUTS_CHANGED = "inputs_changed"  # an input's version changed since its job read it
    OUTPUT_MISSING = "output_missing"  # it succeeded, but a declared output is gone
    JOB_LOST = "job_lost"  # its job is gone: unseen past its grace, or its id reused
    RETRY = "retry"  # its last attempt failed and retries are left
    CANCELLED_BY_RECON = "cancelled_by_recon"  # its last job ended by recon's cancel
    # its last job saved its checkpoint and ended (or timed out, or was preempted), and
    # requeues are left: the next job resumes from the checkpoint
    CHECKPOINT_REQUEUE = "checkpoint_requeue"
    REPLACE_REQUESTED = "replace_requested"  # `--replace`
    UPSTREAM_RERUN = "upstream_rerun"  # current, but an upstream in flight may change it
    # a run left as it is
    CURRENT = "current"
    IN_PROGRESS = "in_progress"  # a job of its current spec (or allocation) queued/running
    NOT_SEEN_YET = "not_seen_yet"  # a journalled job not listed yet, within its grace
    STEP_NOT_LISTED = "step_not_listed"  # a step started in an allocation, not listed yet
    OBSERVATION_INCOMPLETE = "observation_incomplete"  # not acted on a partial picture
    ARRAY_UNREAD = "array_unread"  # a job array of its sweep no member map tells apart
    UPDATE_DEFERRED = "update_deferred"  # an older spec's job runs on (update: defer)
    RETRIES_EXHAUSTED = "retries_exhausted"  # failed with no retries left
    REQUEUES_EXHAUSTED = "requeues_exhausted"  # a checkpointing run past max_requeues
    WAITING_UPSTREAM = "waiting_upstream"  # an upstream must finish (or be decided) first
    WAITING_ALLOCATION = "waiting_allocation"  # its allocation's job, time or room
    # a run blocked
    UPSTREAM_FAILED = "upstream_failed"  # an upstream failed or is blocked
    PARTNER_FAILED = "partner_failed"  # a coupled partner ended badly (also a teardown's)
    # no partition of the cluster holds it, or its allocation cannot (blocked, too small,
    # too short-lived)
    DOES_NOT_FIT = "does_not_fit"
    # its last submission at this spec and commit was refused (by the scheduler, or
    # before it was sent: an output that is a symbolic link, a run folder not made)
    REFUSED = "refused"
    # jobs found or cancelled
    ADOPT = "adopt"  # a tagged job of the project's the journal does not know
    COMPONENT_FAILED = "component_failed"  # a het job's component failed: torn down
    PRUNE = "prune"  # its run or allocation left the repo
    ORPHAN = "orphan"  # a tagged allocation no spec declares and the journal does not know
    # allocations
    NONE_HELD = "none_held"  # no job of the allocation is held
    RENEW = "renew"  # its job runs out of time (or has too little for a run)
    SETUP = "setup"  # its job is up and its setup commands are to start
    SETUP_RETRY = "setup_retry"  # its setup failed and tries are left
    # its setup failed: in every try allowed (blocked), or in the job now released
    SETUP_FAILED = "setup_failed"
    UNSUPPORTED = "unsupported"  # this backend or cluster cannot hold it
    READY = "ready"  # a job of it is up and reused
    ON_DEMAND = "on_demand"  # idle_release: allocated only once a run needs it
    IDLE = "idle"  # no step has run in its job for idle_release
    SUPERSEDED = "superseded"  # a newer job of it took the old one's place
    # a run renamed, its spec otherwise unchanged: moved, no job (engine/plan/moves)
    RENAMED = "renamed"
