"""Why a run is submitted anew, in the fields of its spec that changed. Pure."""

from __future__ import annotations

from collections.abc import Sequence

from reconciler.desired.desired import DesiredRun, changed_fields, flat_fields
from reconciler.engine.plan.actions import FieldChange
from reconciler.engine.plan.causes import Cause
from reconciler.state.records import SubmissionRecord, SubmissionStatus


def why_submit(history: Sequence[SubmissionRecord], run: DesiredRun) -> tuple[Cause, str]:
    """A run with no job of its current spec: never run, or its spec changed (and that
    in words)."""
    earlier = [
        r
        for r in history
        if r.spec_hash != run.spec_hash and r.status is not SubmissionStatus.REFUSED
    ]
    if not earlier:
        return Cause.NEVER_RUN, "not yet run"
    last = earlier[-1]
    if not last.spec_fields:
        return Cause.SPEC_CHANGED, f"spec changed ({last.spec_hash[:8]} -> {run.spec_hash[:8]})"
    return Cause.SPEC_CHANGED, "spec changed"  # the fields that changed travel with the action


def field_changes(history: Sequence[SubmissionRecord], run: DesiredRun) -> tuple[FieldChange, ...]:
    """What changed since the run's last job; nothing once a job of this spec was made
    (an output gone missing later is not explained by an old edit)."""
    if not history or history[-1].spec_hash == run.spec_hash:
        return ()
    earlier = [r for r in history if r.spec_hash != run.spec_hash]
    if not earlier[-1].spec_fields:
        return ()
    new = flat_fields(run.spec, run.script_text, run.environment_files)
    return tuple(
        FieldChange(field=f, old=o, new=n)
        for f, o, n in changed_fields(earlier[-1].spec_fields, new)
    )
