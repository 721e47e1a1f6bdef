"""Id minting: a prefix that says what the id names, then 32 random hex digits."""

from __future__ import annotations

import secrets

PREFIXES = {
    "memory": "hmem_",
    "record": "hrec_",
    "consolidation": "hcon_",
    "file": "file_",
    "member": "mbr_",
    "group": "grp_",
    "key": "key_",
    "grant": "hgrt_",
    "snapshot": "hsnp_",
    "harness": "hrn_",
    "job": "hjob_",
    "write": "hwri_",
    "request": "req_",
    "change": "hchg_",
}


def new_id(kind: str) -> str:
    return PREFIXES[kind] + secrets.token_hex(16)


class IdPool:
    """Ids of one kind for a bulk write, the same as new_id's, drawn from the OS's randomness a few
    thousand at a time (one call for each id was a tenth of a tree import's per-line cost)."""

    def __init__(self, kind: str, batch: int = 4096) -> None:
        self.prefix = PREFIXES[kind]
        self.batch = batch
        self._hex = ""
        self._at = 0

    def take(self) -> str:
        if self._at >= len(self._hex):
            self._hex, self._at = secrets.token_hex(16 * self.batch), 0
        start = self._at
        self._at += 32
        return self.prefix + self._hex[start:self._at]
