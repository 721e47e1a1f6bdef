"""The gateway's one clock: now in milliseconds for stored instants, and RFC 3339 text at a stated precision.

Stored times are integers of milliseconds since the epoch (sortable, the same in SQLite and PostgreSQL).
Text times are UTC with a `Z`: milliseconds where an API answer shows an instant, microseconds where the
text is read back and must order exactly as the instant did (export lines, a consolidation run's
`read.through`, which the next run resumes strictly after).
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

Precision = Literal["milliseconds", "microseconds"]


def now_ms() -> int:
    return int(time.time() * 1000)


def as_utc(moment: datetime) -> datetime:
    """`moment` in UTC; a naive datetime is taken to be UTC already (how SQLite hands them back)."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def rfc3339(moment: datetime, precision: Precision = "milliseconds") -> str:
    return as_utc(moment).isoformat(timespec=precision).replace("+00:00", "Z")


def rfc3339_or_none(moment: datetime | None, precision: Precision = "milliseconds") -> str | None:
    return None if moment is None else rfc3339(moment, precision)
