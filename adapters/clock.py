"""memfed's one clock, for the gateway and every adapter: now, in milliseconds for stored instants, and
RFC 3339 text at a stated precision.

Stored times are integers of milliseconds since the epoch (sortable, the same in SQLite and PostgreSQL).
Text times are UTC with a `Z`: seconds where only the second matters (a migration's progress), milliseconds
where an API answer shows an instant, microseconds where the text is read back and must order exactly as
the instant did (export lines, stored version rows, a consolidation run's `read.through`, which the next
run resumes strictly after). Fixed width at each precision, so text order is time order.

It lives in adapters (the layer both adapters and the gateway may import); gateway.base.clock is its face there.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Literal

Precision = Literal["seconds", "milliseconds", "microseconds"]


def now_ms() -> int:
    return int(time.time() * 1000)


def now() -> datetime:
    """Now, an aware UTC datetime: the instant the gateway stamps on what it writes."""
    return datetime.now(UTC)


def utc(moment: datetime) -> datetime:
    """`moment` in UTC. A naive datetime is taken to be UTC already (how SQLite hands them back): guessing a
    local zone would make the same instant sort differently on two machines."""
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def parse(value: object) -> datetime | None:
    """A vendor's ISO 8601 / RFC 3339 text as an aware instant (a time without a zone taken as UTC); None for
    anything else, so a vendor's missing or odd timestamp reads as "not known" rather than failing a read."""
    if not isinstance(value, str) or not value:
        return None
    try:
        return utc(datetime.fromisoformat(value))
    except ValueError:
        return None


def rfc3339(moment: datetime, precision: Precision = "milliseconds") -> str:
    return utc(moment).replace(tzinfo=None).isoformat(timespec=precision) + "Z"


def rfc3339_or_none(moment: datetime | None, precision: Precision = "milliseconds") -> str | None:
    return None if moment is None else rfc3339(moment, precision)


_SECONDS: dict[int, str] = {}


def rfc3339_us(us: int) -> str:
    """RFC 3339 UTC with milliseconds of an instant in epoch microseconds, the audit journal's form: the
    date part is cached per second, since the journal reads back thousands of lines a second."""
    second, rest = divmod(us, 1_000_000)
    if (prefix := _SECONDS.get(second)) is None:
        if len(_SECONDS) > 256:
            _SECONDS.clear()
        prefix = _SECONDS[second] = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(second))
    return f"{prefix}.{rest // 1000:03d}Z"
