"""Decoded mem0 memories, kept by what they were decoded from.

Decoding a memory (memfed's versions in its metadata, each field checked: `_records.decode`) is most of
the gateway's own work on a search answer, ~50 us a record, and a recall's answer waits for it after the
last vendor answer arrives. Agents ask the same memories again and again, and the same item decodes to the
same record every time: `decode` reads only the item's text, its two timestamps and its metadata, so those
(with the ids) are the key, the score is not. A changed memory (revised through memfed, or edited at mem0)
is a different key; what fails to decode is never kept, so it fails (and is logged) each time as before.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import orjson
from cachetools import LRUCache

from adapters.mem0 import _records as records

KEPT = 20_000  # memories; a decoded record of a few versions is a few KB


class DecodedItems:
    def __init__(self, maxsize: int = KEPT) -> None:
        self._kept: LRUCache[Hashable, records.Stored] = LRUCache(maxsize=maxsize)

    def decode(self, item: Mapping[str, Any], *, record_id: str, memory_id: str) -> records.Stored:
        """`_records.decode(item, ...)`, from the kept result when the same content was decoded before."""
        key = _key(item, record_id, memory_id)
        if key is not None and (kept := self._kept.get(key)) is not None:
            return kept
        stored = records.decode(item, record_id=record_id, memory_id=memory_id)
        if key is not None:
            self._kept[key] = stored
        return stored


def _key(item: Mapping[str, Any], record_id: str, memory_id: str) -> Hashable | None:
    """What `decode` reads of the item, as one hashable value; None when it cannot be made one cheaply."""
    try:
        metadata = orjson.dumps(item.get("metadata"))
    except (TypeError, orjson.JSONEncodeError):
        return None
    text, updated, created = item.get("memory"), item.get("updated_at"), item.get("created_at")
    if not all(v is None or isinstance(v, str) for v in (text, updated, created)):
        return None
    return record_id, memory_id, text, updated, created, metadata
