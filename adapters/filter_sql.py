"""A filter as SQL over the version table (alias `v`), for the providers that keep versions in SQL.

The shape is one for every SQL store: which columns a field reads, which values each op accepts, `NULL`
for absent, the error for each mistake. What differs by dialect is how an attribute is read, how a list
and a value are bound and compared, and how a range keeps numbers and strings apart: a `Dialect` says
that (adapters/local/_sql.py for SQLite, adapters/postgres/_sql.py for PostgreSQL).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from adapters.base import Condition, ProviderRejected
from adapters.filters import TIME_FIELDS
from adapters.version_rows import parse_instant

RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


class Dialect(Protocol):
    """The parts of a filter's SQL that one database spells its own way. `kind` is text, time or json."""

    def attribute(self, key: str, field: str, name: str) -> tuple[str, dict[str, Any]]:
        """The expression reading attribute `key` (JSON null as SQL NULL) and its parameters."""
        ...

    def bound(self, value: Any, kind: str) -> Any:
        """A checked operand as the driver binds it."""
        ...

    def one_of(self, column: str, kind: str, values: list[Any], name: str, params: dict[str, Any]) -> str:
        """`column` is one of `values` (checked operands); binds them under `name`."""
        ...

    def equals(self, column: str, negated: bool, kind: str, name: str) -> str:
        """`column` equals (or, negated, is not equal to, absent included) the value bound as `name`."""
        ...

    def ranged(self, column: str, kind: str, symbol: str, value: Any, name: str, params: dict[str, Any]) -> str:
        """`column <symbol> :name`, never comparing a number with a string."""
        ...


def scope(as_of: str | None, include: str) -> str:
    """The versions a read sees: the current one of each record, or the one current at `as_of`."""
    if include not in ("active", "all"):
        raise ProviderRejected(f"include must be active or all, not {include!r}")
    if as_of is None:
        clause = "v.invalidated_at IS NULL"
    else:
        clause = "v.written_at <= :as_of AND (v.invalidated_at IS NULL OR v.invalidated_at > :as_of)"
    return clause + (" AND v.forgets = 0" if include == "active" else "")


def all_of(dialect: Dialect, filters: Sequence[Condition], as_of_given: bool, params: dict[str, Any]) -> str:
    """Every filter, AND-ed, as SQL over alias `v`; each one's parameters (named `f0`, `f1`, ...) go into
    `params`. What a recall's filters list keeps, on either SQL provider."""
    clauses = []
    for i, cond in enumerate(filters):
        clause, cond_params = condition(dialect, cond, f"f{i}", as_of_given)
        clauses.append(clause)
        params.update(cond_params)
    return " AND ".join(clauses)


def condition(dialect: Dialect, cond: Condition, name: str, as_of_given: bool) -> tuple[str, dict[str, Any]]:
    """One filter as SQL over alias `v`, with its parameters named after `name`."""
    column, kind, params = _column(dialect, cond.field, name, as_of_given)
    value, op = cond.value, cond.op
    if op == "in":
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise ProviderRejected(f"{cond.field} in: expected a list of values")
        return dialect.one_of(column, kind, [operand(v, kind, cond.field) for v in value], name, params), params
    if op in ("eq", "ne"):
        if value is None:
            return f"{column} IS {'NOT ' if op == 'ne' else ''}NULL", params
        params[name] = dialect.bound(operand(value, kind, cond.field), kind)
        return dialect.equals(column, op == "ne", kind, name), params
    if op in RANGE_SQL:
        if value is None or isinstance(value, bool):
            raise ProviderRejected(f"{cond.field} {op}: expected a number, a string or an instant")
        params[name] = dialect.bound(operand(value, kind, cond.field), kind)
        return dialect.ranged(column, kind, RANGE_SQL[op], value, name, params), params
    raise ProviderRejected(f"unknown filter op {op!r}")


def _column(dialect: Dialect, field: str, name: str, as_of_given: bool) -> tuple[str, str, dict[str, Any]]:
    """The SQL a filter's field reads, the kind of its values (text, time, json) and any parameters."""
    if field == "type":
        return "v.type", "text", {}
    if field.startswith("time."):
        part = field.removeprefix("time.")
        if part not in TIME_FIELDS:
            raise ProviderRejected(f"cannot filter on {field!r}: time fields are {', '.join(TIME_FIELDS)}")
        if part == "invalidated_at" and as_of_given:
            # Compare with what the read shows: a version closed after `as_of` was open then.
            return "(CASE WHEN v.invalidated_at > :as_of THEN NULL ELSE v.invalidated_at END)", "time", {}
        return f"v.{part}", "time", {}
    if field.startswith("attributes."):
        column, params = dialect.attribute(field.removeprefix("attributes."), field, name)
        return column, "json", params
    raise ProviderRejected(f"cannot filter on {field!r}: fields are type, attributes.*, time.*")


def operand(value: Any, kind: str, field: str) -> Any:
    """A filter's value checked against its field's kind: an instant for time, a string for type."""
    if kind == "time":
        return parse_instant(value, field)
    if kind == "text":
        if not isinstance(value, str):
            raise ProviderRejected(f"{field}: expected a string")
        return value
    if value is not None and not isinstance(value, str | int | float):
        raise ProviderRejected(f"{field}: can compare only strings, numbers and booleans")
    return value
