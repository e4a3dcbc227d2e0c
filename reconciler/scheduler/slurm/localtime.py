"""The zone Slurm prints its times in: the machine's local time, daylight saving included.

sacct and squeue print naive local times and take ``--starttime`` as one. A fixed offset
taken at start-up would be an hour wrong for every time on the other side of a DST change,
enough to slide an observation window past the jobs it must see.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta, tzinfo


class SystemLocalTime(tzinfo):
    """The C library's local time (``TZ``, ``/etc/localtime``), asked afresh for each instant."""

    def utcoffset(self, dt: datetime | None) -> timedelta:
        return timedelta(seconds=self._local(dt).tm_gmtoff)

    def dst(self, dt: datetime | None) -> timedelta | None:
        return None

    def tzname(self, dt: datetime | None) -> str:
        return self._local(dt).tm_zone

    def fromutc(self, dt: datetime) -> datetime:
        stamp = dt.replace(tzinfo=UTC).timestamp()
        return dt + timedelta(seconds=time.localtime(stamp).tm_gmtoff)

    @staticmethod
    def _local(dt: datetime | None) -> time.struct_time:
        if dt is None:
            return time.localtime()
        # mktime reads the wall time as local, finding out itself whether DST applies.
        return time.localtime(time.mktime((*dt.timetuple()[:8], -1)))

    def __repr__(self) -> str:
        return "SystemLocalTime()"
