"""The decision log (placeholder interface; the full tamper-evident log replaces this module).

Every access decision the gateway makes is handed to `AuditLog.decide`. It must be cheap and never
raise on the request path.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime


@dataclass(frozen=True)
class DecisionEntry:
    """One access decision. No record content is ever put here."""

    request_id: str
    principal: str
    groups: tuple[str, ...]
    operation: str
    memory_id: str | None
    privilege: str | None
    allowed: bool
    reason: str
    at: datetime = field(default_factory=lambda: datetime.now(UTC))


class AuditLog:
    """Collects decisions. This placeholder keeps them in memory."""

    def __init__(self) -> None:
        self.entries: list[DecisionEntry] = []

    def decide(self, entry: DecisionEntry) -> None:
        self.entries.append(entry)

    async def start(self) -> None:
        return None

    async def close(self) -> None:
        return None
