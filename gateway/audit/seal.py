"""The decision log's seal: an HMAC over each entry's hash and over the head, with a key only the gateway
holds.

A hash chain alone shows an edit only to someone who did not recompute it: whoever can write the state
database can change an entry and rehash everything after it, head included, and the chain verifies
again. With `[audit] seal_key_env` naming an environment variable that holds a secret, every entry and
the head also carry HMAC-SHA256(key, ...); without the key a rewritten entry cannot be sealed, so
verification finds the first entry whose seal does not match: where the rewrite starts.

Seals alone can be stripped: an entry without one looks like an entry written before the key was set,
and an empty log like a new one. So the log also records, sealed, that sealing began (`genesis`: the
entry from which every entry carries a seal, and that entry's hash) and how far it reaches (the head's
seal covers the count of entries, which is the last seq, and the last hash). With the key, a log without
a sealed genesis, with an entry past the genesis that lost its seal, or without a sealed head that meets
the end of the chain does not verify. What no record inside the database can show is a whole database
put back to an earlier state of its own: that is what an anchor kept outside it is for (`memfed audit
anchor`, `memfed audit verify --anchor`).
"""

from __future__ import annotations

import hashlib
import hmac
import os

from gateway.base.config import ConfigError


class SealKeyMissing(ConfigError):
    """The configuration names a seal key variable that is not set: refusing beats writing unsealed."""


class AuditLogRefused(RuntimeError):
    """The stored log is not the one this gateway left (rewritten, stripped of its seals, cut, emptied or
    sealed with another key): the gateway will not chain, let alone seal, new entries on top of it."""


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

    def genesis(self, seq: int, entry_hash: str) -> str:
        return hmac.new(self._key, f"genesis:{seq}:{entry_hash}".encode(), hashlib.sha256).hexdigest()

    def journal_key(self) -> bytes:
        """The key journal lines are authenticated with (gateway.audit.journal): derived, so the seal key
        itself signs nothing but the log."""
        return hmac.new(self._key, b"memfed audit journal", hashlib.sha256).digest()

    def holds(self, expected: str, found: object) -> bool:
        return isinstance(found, str) and hmac.compare_digest(expected, found)
