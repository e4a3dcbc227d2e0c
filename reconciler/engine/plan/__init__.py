"""The planner: pure. From the desired state, what the scheduler reports and the journal's
records, to a Plan. Nothing here touches the journal, the lock, files on disk, a
subprocess or git (a contract in pyproject.toml checks it)."""

from reconciler.engine.plan.assemble import FileState, fingerprint, plan, planned
from reconciler.engine.plan.world import World

__all__ = ["FileState", "World", "fingerprint", "plan", "planned"]
