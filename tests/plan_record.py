"""Record every plan the tests make, to show that a change to the engine's code leaves
its plans as they were.

Set ``RECON_PLAN_RECORD=<file>`` and run a suite: each plan the planner returns is
written to the file as one JSON line, keyed by the test that made it and its place
among that test's plans. Run the same suite before and after a change, then compare:

    RECON_PLAN_RECORD=/tmp/before.jsonl python3 -m pytest tests/unit tests/local
    RECON_PLAN_RECORD=/tmp/after.jsonl python3 -m pytest tests/unit tests/local
    python3 -m tests.plan_record /tmp/before.jsonl /tmp/after.jsonl

What differs from one run of a test to the next whatever the code (temporary folders,
commit ids, job ids the local backend hands out, clock times) is replaced by its place
of first appearance within the test, so two runs of unchanged code compare equal except
where a test's plans depend on timing; running the "before" suite twice shows those.
"""

from __future__ import annotations

import json
import os
import re
import sys
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV = "RECON_PLAN_RECORD"
CHECKOUT = Path(__file__).resolve().parents[1]  # two checkouts compare equal

# Values that change from run to run: temporary paths, commit ids and other hex
# digests, ISO times, and numbers that are job ids in JSON ("job_id": "123").
_VOLATILE = re.compile(
    r"/tmp/[^\s\"']*?pytest-\d+/[^/\s\"']+"  # a test's tmp_path
    r"|/tmp/tmp[\w-]+"  # tempfile's folders
    r"|\b[0-9a-f]{40}\b|\b[0-9a-f]{64}\b|\b[0-9a-f]{12}\b"  # commits, hashes
    r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?(?:[+-]\d\d:\d\d|Z)?"  # times
)
_JOB_FIELD = re.compile(r'("(?:job_id|job|leader|array_id)": )"(\d+)((?:[_+]\d+)?)"')


def normalise(text: str) -> str:
    """``text`` with each volatile value replaced by its order of first appearance."""
    seen: dict[str, str] = {}

    def token(kind: str, value: str) -> str:
        return seen.setdefault(f"{kind}:{value}", f"<{kind}{len(seen)}>")

    text = _JOB_FIELD.sub(lambda m: f'{m[1]}"{token("job", m[2])}{m[3]}"', text)
    return _VOLATILE.sub(lambda m: token("v", m[0]), text)


class Recorder:
    """Wraps the planner wherever a module has bound it, and writes what it returns."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.counts: dict[str, int] = defaultdict(int)
        self.original: Callable[..., Any] | None = None
        self.wrapper: Callable[..., Any] | None = None

    def install(self) -> None:
        from reconciler.engine import plan as plan_module

        original = plan_module.plan
        if getattr(original, "__recorded__", False):
            return
        self.original = original

        def recorded(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            self.write(result)
            return result

        recorded.__recorded__ = True  # type: ignore[attr-defined]
        recorded.__wrapped__ = original  # type: ignore[attr-defined]
        self.wrapper = recorded
        self.rebind()

    def rebind(self) -> None:
        """Point every module's name for the planner at the wrapper (modules bind it at
        import, and some are imported only once a test runs)."""
        if self.original is None or self.wrapper is None:
            return
        for module in list(sys.modules.values()):
            names = getattr(module, "__dict__", None)
            if not names or not str(getattr(module, "__name__", "")).startswith(
                ("reconciler", "tests")
            ):
                continue
            for name, value in list(names.items()):
                if value is self.original:
                    setattr(module, name, self.wrapper)

    def write(self, plan: Any) -> None:
        from reconciler.report.plan import as_json

        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
        index = self.counts[test]
        self.counts[test] += 1
        entry = {"test": test, "index": index, "plan": as_json(plan), "checkout": str(CHECKOUT)}
        line = json.dumps(entry)
        with self.path.open("a") as out:
            out.write(line + "\n")


def load(path: Path, ignore: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """Each test's plans, in order, normalised; keys named in ``ignore`` dropped from the
    plan and from every action (fields a change adds on purpose)."""
    plans: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        text = entry["plan"]
        if entry.get("checkout"):
            text = text.replace(entry["checkout"], "<checkout>")
        document = json.loads(text)
        for key in ignore:
            document.pop(key, None)
        for action in document.get("actions", []):
            for key in ignore:
                action.pop(key, None)
        plans[entry["test"]].append(json.dumps(document, indent=1, sort_keys=True))
    return {test: [normalise(p) for p in found] for test, found in plans.items()}


def compare(before: Path, after: Path, ignore: tuple[str, ...] = ()) -> int:
    """Print what differs; 0 when every test made the same plans."""
    old, new = load(before, ignore), load(after, ignore)
    differing = sorted(t for t in old.keys() & new.keys() if old[t] != new[t])
    only_old = sorted(old.keys() - new.keys())
    only_new = sorted(new.keys() - old.keys())
    same = len(old.keys() & new.keys()) - len(differing)
    plans = sum(len(old[t]) for t in old.keys() & new.keys() if t not in differing)
    print(f"{same} tests made the same {plans} plans; {len(differing)} differ")
    listed = (("differ", differing), ("only before", only_old), ("only after", only_new))
    for label, tests in listed:
        for test in tests:
            print(f"  {label}: {test}")
    return 1 if differing or only_old or only_new else 0


if __name__ == "__main__":
    arguments = sys.argv[1:]
    ignored = tuple(a.removeprefix("--ignore=") for a in arguments if a.startswith("--ignore="))
    files = [Path(a) for a in arguments if not a.startswith("--ignore=")]
    sys.exit(compare(files[0], files[1], ignored))
