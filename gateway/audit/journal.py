"""The decision log's journal files: which lines in them the gateway wrote, and the gateway's own note of
how far the stored log reached (see gateway.audit for the journal itself).

A journal line becomes a sealed entry, so a line the gateway did not write must never be read as one.
Every line ends with a MAC: keyed BLAKE2b (128 bits; one call, about half of HMAC-SHA256's cost on the
request path, where lines are written) over the line's text, salted with the segment number and the byte
offset where the line starts, under the journal's key. Bound to its place, a genuine line copied elsewhere
(a replay) fails as surely as a forged one, and a line appended by someone else does not disturb the
gateway's own lines after it (each is tagged with the offset it really lands at).

Where the log is sealed, the key is derived from the seal key (and the journal's id), so it is never on
disk. Without a seal key it is a random key kept in `journal-key` (0600) beside the journal: that stops
lines from anyone who cannot read the file (another user, a process that may only append), not from
someone running as the gateway's own user. Only a seal key, kept out of the data directory, does that.

`anchor` (0600) is the gateway's note, after every commit, of the last entry it stored, that entry's hash
and where the log is sealed from. A start on a database that no longer holds that entry (emptied, cut,
put back to an earlier copy, rewritten) is refused (gateway.audit.opening). It guards against whoever can
change the database but not the data directory; an anchor the operator keeps outside both (`memfed audit
anchor`) guards against both.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import os
import secrets
import struct
from dataclasses import dataclass
from pathlib import Path

from gateway.audit.seal import AuditLogRefused, Seal
from gateway.state.private_files import write_private

_TAG = 32  # hex digits of the MAC kept on a line
_PLACE = struct.Struct(">QQ")  # segment, offset: BLAKE2b's 16-byte salt
_MARK = b"\x1d"  # between a line's text and its MAC; the MAC has a fixed width, so the text may hold one too


def take_lock(path: Path) -> int:
    """Hold the journal's lock file (one process per journal); the descriptor, to close when done."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        os.close(fd)
        raise RuntimeError(f"the audit journal {path.parent} is in use by another process") from exc
    return fd


def journal_id(path: Path) -> str:
    """The journal's id (its row in audit_journals), made on first use."""
    if not path.exists():
        write_private(path, (secrets.token_hex(16) + "\n").encode())
    return path.read_text().strip()


class JournalKey:
    """Tags the lines the gateway writes to one journal and tells them apart from any other line."""

    def __init__(self, key: bytes, journal_id: str) -> None:
        self._key = hmac.new(key, b"journal:" + journal_id.encode(), hashlib.sha256).digest()

    def __repr__(self) -> str:
        return "JournalKey(<key>)"

    @classmethod
    def of(cls, directory: Path, journal_id: str, seal: Seal | None) -> JournalKey:
        """The key of the journal in `directory`: from the seal, or the install's own key file."""
        if seal is not None:
            return cls(seal.journal_key(), journal_id)
        path = directory / "journal-key"
        if not path.exists():
            write_private(path, secrets.token_hex(32).encode() + b"\n")
        try:
            return cls(bytes.fromhex(path.read_text().strip()), journal_id)
        except ValueError as exc:
            raise AuditLogRefused(f"the journal key {path} is not one this gateway wrote") from exc

    def _mac(self, segment: int, offset: int, text: bytes) -> bytes:
        place = _PLACE.pack(segment, offset)
        return hashlib.blake2b(text, key=self._key, salt=place, digest_size=_TAG // 2).hexdigest().encode()

    def tag(self, segment: int, offset: int, lines: list[bytes]) -> bytes:
        """`lines` (each ending in a newline) as they go into segment `segment` from byte `offset` on."""
        out: list[bytes] = []
        for line in lines:
            text = line[:-1]
            tagged = text + _MARK + self._mac(segment, offset, text) + b"\n"
            out.append(tagged)
            offset += len(tagged)
        return b"".join(out)

    def text(self, segment: int, offset: int, raw: bytes) -> bytes | None:
        """The text of the line `raw` (without its newline) found at `offset` of `segment`; None when the
        gateway did not write it there."""
        cut = len(raw) - _TAG - 1
        if cut < 0 or raw[cut : cut + 1] != _MARK:
            return None
        text = raw[:cut]
        return text if hmac.compare_digest(raw[cut + 1 :], self._mac(segment, offset, text)) else None


@dataclass(frozen=True)
class LocalAnchor:
    """How far the stored log reached when this gateway last committed to it."""

    seq: int
    hash: str
    sealed_from: int | None = None

    @classmethod
    def read(cls, path: Path) -> LocalAnchor | None:
        """The note in `path` (None: there is none). A note that cannot be read refuses the start: quietly
        skipping it would let anyone who can spoil the file switch the check off."""
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            return None
        try:
            data = json.loads(raw)
            sealed = data.get("sealed_from")
            anchor = cls(int(data["seq"]), str(data["hash"]), int(sealed) if sealed is not None else None)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise AuditLogRefused(f"{path} is not a note this gateway wrote; if the database was replaced on "
                                  "purpose, move the file aside and start again") from exc
        if anchor.seq < 0 or len(anchor.hash) != 64:
            raise AuditLogRefused(f"{path} is not a note this gateway wrote")
        return anchor

    def write(self, path: Path) -> None:
        data = {"seq": self.seq, "hash": self.hash, "sealed_from": self.sealed_from}
        write_private(path, json.dumps(data, sort_keys=True).encode() + b"\n")
