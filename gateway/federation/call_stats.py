"""A provider's recent calls, for operators: latency percentiles and failures over the last calls.

Kept per provider handle in memory (the last `WINDOW` calls through its breaker), shown in the capability
document's `x.memfed.recent` and on the console's providers page. Counting calls, which say nothing of
the provider's health, are not in it, as they are not in the breaker.
"""

from __future__ import annotations

import math
import time
from collections import Counter, deque
from dataclasses import dataclass
from typing import Any

WINDOW = 200


@dataclass(frozen=True)
class _Call:
    ended: float  # monotonic seconds
    ms: float
    outcome: str  # "ok" or the failure's reason (timeout, unavailable, rate_limited, ...)


class CallStats:
    def __init__(self, window: int = WINDOW) -> None:
        self._calls: deque[_Call] = deque(maxlen=window)

    def note(self, ms: float, outcome: str) -> None:
        self._calls.append(_Call(time.monotonic(), ms, outcome))

    def document(self) -> dict[str, Any]:
        calls = list(self._calls)
        times = sorted(c.ms for c in calls)
        failed = [c for c in calls if c.outcome != "ok"]
        last = failed[-1] if failed else None
        return {
            "calls": len(calls),
            "p50_ms": _percentile(times, 0.50),
            "p95_ms": _percentile(times, 0.95),
            "max_ms": round(times[-1], 2) if times else None,
            "failures": len(failed),
            "failures_by_reason": dict(Counter(c.outcome for c in failed)),
            "last_failure": None if last is None else {
                "reason": last.outcome, "seconds_ago": round(time.monotonic() - last.ended, 1)},
        }


def _percentile(ordered: list[float], q: float) -> float | None:
    """Nearest-rank percentile of an ordered list (None when empty)."""
    if not ordered:
        return None
    rank = min(max(1, math.ceil(q * len(ordered))), len(ordered))
    return round(ordered[rank - 1], 2)
