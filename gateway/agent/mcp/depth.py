"""API answers cut to a depth any MCP client can take, so one deeply nested record never fails a tool.

The SDK serializes a tool result with pydantic, which refuses a value nested past about 250 levels (and
clients parse with the same bound), and rendering a result walks it too. A record's attributes can
nest far deeper than that: written before the API bounded their depth, imported, or kept by a vendor.
Such a record would otherwise fail every read tool on its memory, for every record beside it.

So every answer a tool receives is cut before anything renders it: a list or object more than
MAX_DEPTH levels down is replaced by TOO_DEEP, everything above it is kept, and the records that held
a cut value are named, so the tool answers with every record and says which ones were cut (results
are made per record: one record's depth costs only that record's deepest values).

The walk is iterative: it must not be the thing that fails on depth.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 100  # levels of lists and objects kept, counted from the answer's top
TOO_DEEP = f"[nested deeper than {MAX_DEPTH} levels: not shown]"


@dataclass(frozen=True)
class Cut:
    value: Any
    records: tuple[str, ...] = ()  # ids of the records that held a cut value, in the answer's order
    elsewhere: int = 0  # cut values that were not inside any record


def _record_id(value: dict[Any, Any], enclosing: str | None) -> str | None:
    if value.get("object") == "memory.record" and isinstance(value.get("id"), str):
        return str(value["id"])
    return enclosing


def _deeper_than_the_bound(value: Any) -> bool:
    """Whether any list or object in `value` lies more than MAX_DEPTH levels down: one level at a time,
    over the containers alone, so the common answer (a few levels deep) is handed on uncopied."""
    level, frontier = 0, [value] if isinstance(value, dict | list) else []
    while frontier:
        level += 1
        if level > MAX_DEPTH:
            return True
        frontier = [child for container in frontier
                    for child in (container.values() if isinstance(container, dict) else container)
                    if isinstance(child, dict | list)]
    return False


def cut(value: Any) -> Cut:
    """`value` with every list or object deeper than MAX_DEPTH levels replaced by TOO_DEEP (a copy, when
    there is one to replace; `value` itself otherwise)."""
    if not _deeper_than_the_bound(value):
        return Cut(value)
    records: dict[str, None] = {}
    elsewhere = 0
    top: list[Any] = [None]
    # (the value to copy, the container its copy goes in, the key there, its level, the record it is in)
    pending: list[tuple[Any, Any, Any, int, str | None]] = [(value, top, 0, 1, None)]
    while pending:
        source, parent, key, level, record = pending.pop()
        if not isinstance(source, dict | list):
            parent[key] = source
            continue
        if level > MAX_DEPTH:
            parent[key] = TOO_DEEP
            if record is None:
                elsewhere += 1
            else:
                records.setdefault(record)
            continue
        if isinstance(source, dict):
            inner = _record_id(source, record)
            copied: dict[Any, Any] = dict.fromkeys(source)  # keys in their order, filled below
            parent[key] = copied
            pending.extend((v, copied, k, level + 1, inner) for k, v in source.items())
        else:
            items: list[Any] = [None] * len(source)
            parent[key] = items
            pending.extend((v, items, i, level + 1, record) for i, v in enumerate(source))
    # Records were met last-pushed-first: put them back in the order the answer lists them.
    return Cut(top[0], tuple(_in_order(top[0], records)), elsewhere)


def _in_order(value: Any, wanted: dict[str, None]) -> list[str]:
    """The ids in `wanted`, in the order a reader meets their records in `value` (already cut, so shallow)."""
    if not wanted:
        return []
    found: list[str] = []
    pending = [value]
    while pending:
        item = pending.pop()
        if isinstance(item, dict):
            record = _record_id(item, None)
            if record in wanted and record not in found:
                found.append(record)
            pending.extend(reversed(list(item.values())))
        elif isinstance(item, list):
            pending.extend(reversed(item))
    return found
