"""Which of a recall's `filters` conditions are sent to Zep, spelled as v4 `metadata_filters`, and which
are judged by memfed alone (said in `degraded`, that part only).

Pure: no I/O. What Zep can judge is what memfed keeps as its own key on an episode's metadata:
`memfed_type` and `memfed_attr_<key>` for the attribute keys a provider names (`filter_attributes`).
Edges and nodes are never narrowed: a derived fact or entity references objects of every kind, and its
references would change with a narrower listing; v3 listings take no filter at all.

Sending a condition must never lose a record memfed would keep, so each one is sent as a superset of
memfed's judgement: ORed with "the key is absent" (an episode written before the key existed, a value
that is not a scalar, an episode Zep or another client wrote), ranges only on numbers (how Zep orders
strings is not documented), `in` only on values Zep's grammar takes. memfed still judges every condition
on what comes back.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from adapters import degraded as entries
from adapters.base import Condition
from adapters.records import instant
from adapters.zep._records import ATTR_PREFIX
from adapters.zep._shapes import DateCondition

TYPE_KEY = "memfed_type"
ZEPS_OWN_TYPE = "episode"  # what an episode without memfed's keys reads as
ATTRIBUTE_NAME = re.compile(r"[A-Za-z0-9_]{1,40}")


def attr_key(name: str) -> str:
    return ATTR_PREFIX + name


@dataclass(frozen=True)
class Pushdown:
    """The conditions sent (as `group`, a v4 metadata filter group ANDed with the listing's own) and the
    conditions memfed alone judges."""

    sent: tuple[Condition, ...] = ()
    judged: tuple[Condition, ...] = ()
    groups: tuple[Mapping[str, Any], ...] = ()

    @property
    def needs_chains(self) -> bool:
        """An attribute may differ between a record's versions, so a listing filtered on one can miss the
        version that closed a matching one: the candidates' chains are listed again, whole."""
        return any(c.field.startswith("attributes.") for c in self.sent)

    def emulated(self) -> tuple[str, ...]:
        """What memfed judged alone (`RecallAnswer.emulated`): `filters` when nothing was sent (as a
        provider that judges all of them says), else `filters.<field>` per field."""
        if not self.judged:
            return ()
        if not self.sent:
            return ("filters",)
        fields = dict.fromkeys(c.field for c in self.judged)
        return tuple(entries.token("filters." + f) for f in fields)


def _scalar(value: Any) -> bool:
    return isinstance(value, str | int | float) and not isinstance(value, bool)


def _listable(values: Sequence[Any]) -> bool:
    # zep-cloud: "string members must be non-empty, contain no comma, and have no surrounding whitespace"
    return bool(values) and all(
        _scalar(v) and (not isinstance(v, str) or (v and "," not in v and v == v.strip())) for v in values)


def _one(key: str, cond: Condition) -> dict[str, Any] | None:
    """The Zep predicate admitting at least what memfed's `cond` admits on a present key (None: not sendable).
    `ne` only on `memfed_type` (always a string): on an attribute memfed meets `ne 1` with a value "1" of
    another kind, which a vendor that coerces kinds would not."""
    op, value = cond.op, cond.value
    if op == "ne" and key != TYPE_KEY:
        return None
    if op == "in":
        values = [v for v in value if v is not None]
        return {"property_name": key, "operator": "in", "value": values} if _listable(values) else None
    if op in ("eq", "ne"):
        if value is None:
            return {"property_name": key, "operator": "is_null"} if op == "eq" else None
        return {"property_name": key, "operator": op, "value": value} if _scalar(value) else None
    if op in ("gt", "gte", "lt", "lte") and isinstance(value, int | float) and not isinstance(value, bool):
        return {"property_name": key, "operator": op, "value": value}
    return None


def _admits_zeps_own(cond: Condition) -> bool:
    """Whether a `type` condition admits Zep's own episodes (type `episode`, no `memfed_type`)."""
    if cond.op == "in":
        return ZEPS_OWN_TYPE in cond.value
    if cond.op == "eq":
        return bool(cond.value == ZEPS_OWN_TYPE)
    if cond.op == "ne":
        return bool(cond.value != ZEPS_OWN_TYPE)
    return True


def admits_type(conditions: Sequence[Condition], types: Sequence[str], name: str) -> bool:
    """Whether a record of type `name` can pass the recall's `types` and every `type` condition, judged
    as memfed judges them (`adapters.filters`: a range compares strings)."""
    if types and name not in types:
        return False
    for cond in conditions:
        if cond.field != "type":
            continue
        op, value = cond.op, cond.value
        if op == "in":
            ok = name in [v for v in value if isinstance(v, str)]
        elif op in ("eq", "ne"):
            ok = (value == name) == (op == "eq")
        elif not isinstance(value, str):
            ok = False
        else:
            ok = {"gt": name > value, "gte": name >= value, "lt": name < value, "lte": name <= value}[op]
        if not ok:
            return False
    return True


def _absent(key: str) -> dict[str, Any]:
    return {"property_name": key, "operator": "is_null"}


def plan(conditions: Sequence[Condition], attribute_keys: Sequence[str], *, narrowed: bool,
         types_listed: bool) -> Pushdown:
    """What of `conditions` is sent to a v4 episode listing (`narrowed`: the recall lists episodes alone;
    `types_listed`: the listing already asks for the record types the `type` eq/in conditions admit)."""
    if not narrowed:
        return Pushdown(judged=tuple(conditions))
    sent: list[Condition] = []
    judged: list[Condition] = []
    groups: list[dict[str, Any]] = []
    for cond in conditions:
        if cond.field == "type" and cond.op in ("eq", "in") and cond.value is not None:
            # The listing's `memfed_type in [...]` is these conditions' intersection; without it (Zep's own
            # `episode` type admitted) the listing asks every episode and memfed judges the type.
            (sent if types_listed else judged).append(cond)
            continue
        if cond.field == "type":
            key, lax = TYPE_KEY, _admits_zeps_own(cond)
        elif cond.field.startswith("attributes.") and cond.field.removeprefix("attributes.") in attribute_keys:
            key, lax = attr_key(cond.field.removeprefix("attributes.")), True
        else:
            judged.append(cond)
            continue
        predicate = _one(key, cond)
        if predicate is None:
            judged.append(cond)
            continue
        sent.append(cond)
        if predicate["operator"] == "is_null" or not lax:
            groups.append({"type": "and", "filters": [predicate]})
        else:
            groups.append({"type": "or", "filters": [predicate, _absent(key)]})
    return Pushdown(tuple(sent), tuple(judged), tuple(groups))


# memfed's time field that is Zep's own on every edge, stated or derived: a stated fact's edge is made with
# `valid_at` = its `valid_from` (immutable in v4). The others differ on stated edges (`created_at` is when
# Zep got it, a closing edge's `invalid_at` and `expired_at` are memfed's closing marks).
EDGE_TIMES = {"time.valid_from": "valid_at"}


# How far a sent bound is widened: Zep may keep a time at a coarser precision than memfed's microseconds,
# and a bound on the edge of it must not lose a record memfed would keep (memfed judges the exact bound).
SLACK = timedelta(seconds=1)


def edge_dates(conditions: Sequence[Condition]) -> tuple[DateCondition, ...]:
    """The v4 edge listing's `date_filters` (ANDed) admitting at least the edges whose record meets the
    recall's conditions on `time.valid_from`, each bound widened by `SLACK`; `ne` (which memfed also
    meets with no time) is not sent."""
    out: list[DateCondition] = []
    for cond in conditions:
        zep_field = EDGE_TIMES.get(cond.field)
        if zep_field is None or cond.op not in ("eq", "gt", "gte", "lt", "lte"):
            continue
        if cond.value is None:
            if cond.op == "eq":
                out.append(DateCondition(zep_field, "is_null"))
            continue
        at = instant(cond.value, cond.field)
        if cond.op in ("eq", "gt", "gte"):
            out.append(DateCondition(zep_field, "gte", at - SLACK))
        if cond.op in ("eq", "lt", "lte"):
            out.append(DateCondition(zep_field, "lte", at + SLACK))
    return tuple(out)


def edge_records_filter(record_ids: Sequence[str]) -> dict[str, Any]:
    """Every version of these facts (memfed's keys ride in an edge's attributes): `property_filters`."""
    return {"property_name": "memfed_record", "operator": "in", "value": list(record_ids)}


def record_ids_group(record_ids: Sequence[str]) -> dict[str, Any]:
    """Every version of these records: the second listing that rebuilds the chains of the candidates."""
    return {"type": "and", "filters": [{"property_name": "memfed_record", "operator": "in",
                                        "value": list(record_ids)}]}
