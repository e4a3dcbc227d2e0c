"""The watch service's log lines and its pull before each timer pass."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, TextIO

from reconciler.commands.common import LogFormat
from reconciler.engine.watch import Level
from reconciler.errors import ReconError
from reconciler.repository.refs import BranchRefs


@dataclass
class LineLog:
    """One line per event on `out`: readable text, or one JSON object per line.

    Every JSON line has time, level, event, commit and counts (null when they do not
    apply), so a log shipper can index them without knowing each event."""

    out: TextIO
    log_format: LogFormat
    clock: Callable[[], datetime]

    def __call__(self, level: Level, event: str, **fields: Any) -> None:
        now = self.clock().isoformat(timespec="milliseconds")
        if self.log_format is LogFormat.json:
            line = json.dumps(
                {"time": now, "level": level.value, "event": event, "commit": None,
                 "counts": None, **fields},
                default=str,
            )  # fmt: skip
        else:
            trace = fields.pop("traceback", None)
            line = f"{now} {level.value.upper():7} {event} {_describe(fields)}".rstrip()
            if trace:  # a bug's traceback, indented under its line
                line += "\n" + "".join(f"    {row}\n" for row in str(trace).splitlines()).rstrip()
        self.out.write(line + "\n")
        self.out.flush()


def _describe(fields: dict[str, Any]) -> str:
    parts = []
    for key, value in fields.items():
        if value is None:
            continue
        if isinstance(value, dict):
            shown = ",".join(f"{k}={v}" for k, v in value.items() if v) or "none"
        else:
            shown = str(value)[:12] if key == "commit" else str(value)
        quote = not shown or any(c.isspace() for c in shown)
        parts.append(f"{key}={shown!r}" if quote else f"{key}={shown}")
    return " ".join(parts)


@dataclass
class Puller:
    """Fetch and fast-forward before each timer pass; a failure is logged, not raised:
    the cluster is still followed at the local tip."""

    refs: BranchRefs
    log: LineLog
    _last_said: tuple[str, str] | None = None

    def __call__(self) -> None:
        try:
            result = self.refs.pull()
        except ReconError as error:
            self.log(Level.WARNING, "pull-failed", message=str(error))
            return
        if result.moved:
            self.log(Level.INFO, "pulled", commit=result.new, message=f"from {result.old[:12]}")
        elif not result.up_to_date and (result.why, result.new) != self._last_said:
            # Said once per upstream commit, not every interval.
            self.log(Level.WARNING, "not-pulled", commit=result.new, message=result.why)
        self._last_said = (result.why, result.new)
