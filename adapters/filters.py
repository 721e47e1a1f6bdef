"""memfed's filter semantics, the same whichever provider keeps a memory: which records a read shows, in what
order, and which match a filter (part of the contract, for adapters whose vendor cannot filter on memfed's
fields and judge the records read back).

mem0, Zep and the SaaS API promise no listing order memfed can rely on and keep memfed's fields inside
metadata, so these run on the records read back. The semantics follow the local provider's, so one filter
means the same thing on every provider: `type`, `attributes.<key>` (one flat key) and `time.<field>`; a
record without the field is not equal to any value (`ne` matches it, `eq None` matches it); ranges never
compare a number with a string; instants are compared as instants.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

import adapters.base as base
from adapters.base import Condition, Include, ProviderRejected, Record

TIME_FIELDS = ("written_at", "valid_from", "valid_to", "invalidated_at")
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


utc = base.utc


def visible(record: Record, include: Include) -> bool:
    if include not in ("active", "all"):
        raise ProviderRejected(f"include must be active or all, not {include!r}")
    return include == "all" or record.status == "active"


# --------------------------------------------------------------------------- order and cursors


def order_key(record: Record) -> tuple[int, str]:
    """Newest first sorts this descending: the shown version's `written_at`, then the id."""
    return (utc(record.time.written_at) - _EPOCH) // timedelta(microseconds=1), record.id


def encode_cursor(key: tuple[int, str]) -> str:
    return base.encode_cursor(key)


def decode_cursor(cursor: str) -> tuple[int, str]:
    micros, record_id = base.decode_cursor(cursor, int)
    return int(micros), record_id


# --------------------------------------------------------------------------- filters

_MISSING = object()


def _instant(value: Any, field: str) -> datetime:
    return base.instant(value, field)


def _kind(field: str) -> str:
    """What kind of value a filterable field holds; refuses a field that cannot be filtered."""
    if field == "type":
        return "text"
    if field.startswith("time."):
        if field.removeprefix("time.") not in TIME_FIELDS:
            raise ProviderRejected(f"cannot filter on {field!r}: time fields are {', '.join(TIME_FIELDS)}")
        return "time"
    if field.startswith("attributes.") and field != "attributes.":
        return "json"
    raise ProviderRejected(f"cannot filter on {field!r}: fields are type, attributes.*, time.*")


def _value(record: Record, field: str) -> Any:
    """The record's value for a field, `_MISSING` when it has none."""
    if field == "type":
        return record.type
    if field.startswith("time."):
        value = getattr(record.time, field.removeprefix("time."))
        return _MISSING if value is None else utc(value)
    value = record.attributes.get(field.removeprefix("attributes."), _MISSING)
    return _MISSING if value is None else value


def _operand(value: Any, kind: str, field: str) -> Any:
    if kind == "time":
        return _instant(value, field)
    if kind == "text" and not isinstance(value, str):
        raise ProviderRejected(f"{field}: expected a string")
    if value is not None and not isinstance(value, str | int | float):
        raise ProviderRejected(f"{field}: can compare only strings, numbers and booleans")
    return value


def _want(cond: Condition, kind: str) -> Any:
    """The condition's value(s) in the field's terms; refuses a value the op cannot take."""
    op, value = cond.op, cond.value
    if op == "in":
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise ProviderRejected(f"{cond.field} in: expected a list of values")
        return [_operand(v, kind, cond.field) for v in value if v is not None]
    if op in ("eq", "ne"):
        return None if value is None else _operand(value, kind, cond.field)
    if op in ("gt", "gte", "lt", "lte"):
        if value is None or isinstance(value, bool):
            raise ProviderRejected(f"{cond.field} {op}: expected a number, a string or an instant")
        return _operand(value, kind, cond.field)
    raise ProviderRejected(f"unknown filter op {op!r}")


def check(cond: Condition) -> None:
    """Refuse a condition before anything is asked of the vendor, whether or not a record would meet it."""
    _want(cond, _kind(cond.field))


def _same_kind(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool)
    if isinstance(a, int | float) and isinstance(b, int | float):
        return True
    return type(a) is type(b)


def matches(record: Record, cond: Condition) -> bool:
    want = _want(cond, _kind(cond.field))
    have = _value(record, cond.field)
    op = cond.op
    if op == "in":
        return have is not _MISSING and any(_same_kind(have, w) and have == w for w in want)
    if op in ("eq", "ne"):
        if want is None:
            return (have is _MISSING) == (op == "eq")
        equal = have is not _MISSING and _same_kind(have, want) and have == want
        return equal if op == "eq" else not equal
    if have is _MISSING or isinstance(have, bool) or not _same_kind(have, want):
        return False  # a range never orders a number against a string, nor a missing value
    if op == "gt":
        return bool(have > want)
    if op == "gte":
        return bool(have >= want)
    if op == "lt":
        return bool(have < want)
    return bool(have <= want)
