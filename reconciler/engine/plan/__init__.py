"""The planner: pure. From the desired state, what the scheduler reports and the journal's
records, to a Plan. Nothing here touches the journal, the lock, files on disk, a
subprocess or git (a contract in pyproject.toml checks it)."""

from reconciler.engine.plan.assemble import FileState, fingerprint, plan, planned

__all__ = ["FileState", "fingerprint", "plan", "planned"]
