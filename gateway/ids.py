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
