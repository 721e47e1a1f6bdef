"""The gateway's clock: adapters.clock, the one memfed has (see there for the precisions and why)."""

from __future__ import annotations

from adapters.clock import Precision, now, now_ms, rfc3339, rfc3339_or_none, rfc3339_us, utc

as_utc = utc

__all__ = ["Precision", "as_utc", "now", "now_ms", "rfc3339", "rfc3339_or_none", "rfc3339_us", "utc"]
