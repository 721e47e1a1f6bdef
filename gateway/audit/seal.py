"""The decision log's seal: an HMAC over each entry's hash and over the head, with a key only the gateway
holds.

A hash chain alone shows an edit only to someone who did not recompute it: whoever can write the state
database can change an entry and rehash everything after it, head included, and the chain verifies
again. With `[audit] seal_key_env` naming an environment variable that holds a secret, every entry and
the head also carry HMAC-SHA256(key, ...); without the key a rewritten entry cannot be sealed, so
verification finds the first entry whose seal does not match: where the rewrite starts. Entries written
before the key was configured carry no seal; once one is sealed, every later one must be.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from gateway.config import ConfigError


class SealKeyMissing(ConfigError):
    """The configuration names a seal key variable that is not set: refusing beats writing unsealed."""


class Seal:
    def __init__(self, key: bytes) -> None:
        if len(key) < 16:
            raise ValueError("an audit seal key needs at least 16 bytes")
        self._key = key

    def __repr__(self) -> str:  # the key must never reach a log line
        return "Seal(<key>)"

    @classmethod
    def from_env(cls, variable: str | None) -> Seal | None:
        """The seal whose key the named environment variable holds; None when no variable is named."""
        if not variable:
            return None
        value = os.environ.get(variable)
        if not value:
            raise SealKeyMissing(f"[audit] seal_key_env names {variable}, which is not set")
        return cls(value.encode())

    def entry(self, entry_hash: str) -> str:
        return hmac.new(self._key, b"entry:" + entry_hash.encode(), hashlib.sha256).hexdigest()

    def head(self, seq: int, head_hash: str) -> str:
        # Another domain than an entry's: the seal of an old entry cannot be passed off as a head's.
        return hmac.new(self._key, f"head:{seq}:{head_hash}".encode(), hashlib.sha256).hexdigest()

    def holds(self, expected: str, found: object) -> bool:
        return isinstance(found, str) and hmac.compare_digest(expected, found)
