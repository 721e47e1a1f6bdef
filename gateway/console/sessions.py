"""Console sessions: a random cookie value stands for a member's bearer credential, kept server-side.

The credential (an API key or an OIDC token) never goes back to the browser once signed in: the cookie
holds only a random id, and the store keeps its SHA-256, so a memory dump of the table does not hand out
cookie values. Every session has its own CSRF token that each change must echo in a header. Sessions
live in the gateway's process: a restart signs every console user out, which costs a sign-in, not data.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field

COOKIE = "memfed_console"
CSRF_HEADER = "x-csrf-token"


@dataclass
class Session:
    token: str  # the bearer credential the console uses on the member's behalf
    csrf: str
    member_id: str
    expires_at: float
    last_seen: float = field(default_factory=time.monotonic)

    def __repr__(self) -> str:  # the credential must never reach a log line
        return f"Session(member:{self.member_id})"


def _digest(cookie: str) -> str:
    return hashlib.sha256(cookie.encode()).hexdigest()


class Sessions:
    """In-process table of signed-in console users, each ending `lifetime` seconds after sign-in or after
    `idle` seconds without a request, whichever comes first."""

    def __init__(self, lifetime: float = 8 * 3600, idle: float = 3600,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lifetime = lifetime
        self.idle = idle
        self._clock = clock
        self._by_digest: dict[str, Session] = {}

    def open(self, token: str, member_id: str) -> tuple[str, Session]:
        """A new session (always a fresh cookie value: a cookie planted before sign-in is never promoted)."""
        self._sweep()
        cookie = secrets.token_urlsafe(32)
        now = self._clock()
        session = Session(token=token, csrf=secrets.token_urlsafe(32), member_id=member_id,
                          expires_at=now + self.lifetime, last_seen=now)
        self._by_digest[_digest(cookie)] = session
        return cookie, session

    def get(self, cookie: str | None) -> Session | None:
        if not cookie:
            return None
        key = _digest(cookie)
        session = self._by_digest.get(key)
        if session is None:
            return None
        now = self._clock()
        if now >= session.expires_at or now - session.last_seen >= self.idle:
            del self._by_digest[key]
            return None
        session.last_seen = now
        return session

    def close(self, cookie: str | None) -> None:
        if cookie:
            self._by_digest.pop(_digest(cookie), None)

    def __len__(self) -> int:
        return len(self._by_digest)

    def _sweep(self) -> None:
        now = self._clock()
        for key, session in list(self._by_digest.items()):
            if now >= session.expires_at or now - session.last_seen >= self.idle:
                del self._by_digest[key]


def csrf_ok(session: Session, sent: str | None) -> bool:
    return bool(sent) and hmac.compare_digest(session.csrf.encode(), (sent or "").encode())
