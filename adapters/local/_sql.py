# ruff: noqa: S608 - statements here are assembled only from this module's own fragments; every value
# that comes from a caller (ids, words, filter values, instants) is bound as a parameter, never spliced.
"""The statements the local provider runs on its SQLite file: the fixed ones, FTS5 match expressions,
the scope and filters of a read, recall's ranked lists, listing cursors and purges.

Pure functions and constants, no I/O: `adapters/local/provider.py` runs what this module builds, over the tables
and the row encoding of adapters/local/_schema.py.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from typing import Any

import adapters.base as base
from adapters.base import Condition, ProviderRejected, Signal

# The names imported as themselves are re-exported: the adapter's modules import this one as `sql` and
# read the stored form through it too (`sql.record`, `sql.utc`, `sql.SCHEMA`).
from adapters.local._schema import SCHEMA as SCHEMA
from adapters.local._schema import SCHEMA_VERSION as SCHEMA_VERSION
from adapters.local._schema import SET_WORDS as SET_WORDS
from adapters.local._schema import Row as Row
from adapters.local._schema import columns as columns
from adapters.local._schema import from_ts as from_ts
from adapters.local._schema import fts_words as fts_words
from adapters.local._schema import parse_instant, to_json
from adapters.local._schema import record as record
from adapters.local._schema import searchable as searchable
from adapters.local._schema import ts as ts
from adapters.local._schema import ts_or_none as ts_or_none
from adapters.local._schema import utc as utc

_NAMES = (
    "memory_id", "record_id", "version", "forgets", "supersedes", "type", "title", "content", "attributes",
    "refs", "follows", "written_by", "written_at", "invalidated_at", "valid_from", "valid_to", "write_id",
)  # fmt: skip
INSERT = f"INSERT INTO versions ({', '.join(_NAMES)}) VALUES ({', '.join(':' + n for n in _NAMES)})"
INSERT_WORDS = "INSERT INTO versions_fts (rowid, title, body) VALUES (?, ?, ?)"
CLOSE = "UPDATE versions SET invalidated_at = :at WHERE record_id = :record AND version = :version"
CURRENT = (
    "SELECT v.* FROM versions v"
    " WHERE v.memory_id = :memory AND v.record_id = :record AND v.invalidated_at IS NULL"
)
HISTORY = (
    "SELECT v.* FROM versions v WHERE v.memory_id = :memory AND v.record_id = :record ORDER BY v.version"
)
WRITTEN_BY_WRITE = "SELECT v.* FROM versions v WHERE v.memory_id = :memory AND v.write_id = :write"
ERASABLE = "memory_id = :memory AND record_id IN (SELECT value FROM json_each(:ids))"
FIND = f"SELECT DISTINCT record_id FROM versions WHERE {ERASABLE}"
IN_MEMORY = "memory_id = :memory"
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"

# bm25 as FTS5 computes it (k1, b, and the weights of (title, body): a word in the line that names a record
# says more than one in its body), but over one memory's records: see `recall_statement`.
K1, B = 1.2, 0.75
TITLE_WEIGHT, BODY_WEIGHT = 2.0, 1.0


def idf(rows: int, hits: int) -> float:
    """A word's weight among `rows` records of which `hits` hold it, as FTS5's bm25 takes it: never
    below a millionth, so a word in most records still counts a little. Registered as `memfed_idf`."""
    weight = math.log((rows - hits + 0.5) / (hits + 0.5))
    return weight if weight > 0.0 else 1e-6


# --------------------------------------------------------------------------- full-text expressions

# Letters and digits, the characters FTS5's unicode61 tokenizer keeps in a token. Everything else,
# FTS5's own syntax included, is a separator and never reaches the MATCH expression.
_WORD = re.compile(r"[^\W_]+")

STOPWORDS = frozenset(
    {
        "a", "an", "and", "are", "as", "at", "be", "been", "but", "by", "can", "could", "did", "do", "does",
        "for", "from", "had", "has", "have", "how", "i", "if", "in", "into", "is", "it", "its", "me", "my",
        "no", "not", "of", "on", "or", "our", "should", "so", "than", "that", "the", "their", "them",
        "then", "there", "these", "they", "this", "to", "was", "we", "were", "what", "when", "where",
        "which", "who", "whom", "why", "will", "with", "would", "you", "your",
    }
)  # fmt: skip


def words(text: str) -> list[str]:
    return list(dict.fromkeys(_WORD.findall(text)))


def _quoted(token: str) -> str:
    # A double-quoted FTS5 string is always a phrase of plain tokens: AND, NEAR, *, ^ and column
    # filters have no meaning inside one. Doubling quotes is the only escape it needs.
    return '"' + token.replace('"', '""') + '"'


def phrases_all(text: str) -> list[str]:
    """Words: every word of `text` must occur (an empty list when `text` holds no word at all)."""
    return [_quoted(t) for t in _distinct(words(text))]


def phrases_meaning(question: str) -> list[str]:
    """Meaning, emulated by words: any non-stopword of the question, ranked by bm25."""
    return [_quoted(t) for t in _distinct(words(question)) if t.lower() not in STOPWORDS]


def _distinct(tokens: list[str]) -> list[str]:
    # The index folds case, so "Acme acme" is one word, weighed once.
    return list({t.casefold(): t for t in reversed(tokens)}.values())[::-1]


# --------------------------------------------------------------------------- scope and filters


def scope(as_of: str | None, include: str) -> str:
    """The versions a read sees: the current one of each record, or the one current at `as_of`."""
    if include not in ("active", "all"):
        raise ProviderRejected(f"include must be active or all, not {include!r}")
    if as_of is None:
        clause = "v.invalidated_at IS NULL"
    else:
        clause = "v.written_at <= :as_of AND (v.invalidated_at IS NULL OR v.invalidated_at > :as_of)"
    return clause + (" AND v.forgets = 0" if include == "active" else "")


TIME_FIELDS = ("written_at", "valid_from", "valid_to", "invalidated_at")
_RANGE_SQL = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}


def condition(cond: Condition, name: str, as_of_given: bool) -> tuple[str, dict[str, Any]]:
    """One filter as SQL over alias `v`, with its parameters named after `name`."""
    column, kind, params = _column(cond.field, name, as_of_given)
    value, op, p = cond.value, cond.op, f":{name}"
    if op == "in":
        if isinstance(value, str | bytes) or not isinstance(value, Iterable):
            raise ProviderRejected(f"{cond.field} in: expected a list of values")
        params[name] = to_json([_operand(v, kind, cond.field) for v in value], "filter value")
        return f"{column} IN (SELECT value FROM json_each({p}))", params
    if op in ("eq", "ne"):
        if value is None:
            return f"{column} IS {'NOT ' if op == 'ne' else ''}NULL", params
        params[name] = _operand(value, kind, cond.field)
        # `IS NOT` rather than `!=`: a record without the attribute is not equal to the value.
        return f"{column} {'=' if op == 'eq' else 'IS NOT'} {p}", params
    if op in _RANGE_SQL:
        if value is None or isinstance(value, bool):
            raise ProviderRejected(f"{cond.field} {op}: expected a number, a string or an instant")
        params[name] = _operand(value, kind, cond.field)
        return f"{_range_guard(column, kind, value)}{column} {_RANGE_SQL[op]} {p}", params
    raise ProviderRejected(f"unknown filter op {op!r}")


def _column(field: str, name: str, as_of_given: bool) -> tuple[str, str, dict[str, Any]]:
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
        key = field.removeprefix("attributes.")
        # SQLite's JSON path has no escape inside a quoted label, so a key with a quote cannot be named.
        if not key or '"' in key:
            raise ProviderRejected(f"cannot filter on {field!r}")
        return f"json_extract(v.attributes, :{name}_path)", "json", {f"{name}_path": f'$."{key}"'}
    raise ProviderRejected(f"cannot filter on {field!r}: fields are type, attributes.*, time.*")


def _range_guard(column: str, kind: str, value: Any) -> str:
    """SQLite orders every number before every string: a range on numbers must not match words."""
    if kind != "json":
        return ""
    if isinstance(value, int | float):
        return f"typeof({column}) IN ('integer', 'real') AND "
    return f"typeof({column}) = 'text' AND "


def _operand(value: Any, kind: str, field: str) -> Any:
    if kind == "time":
        return parse_instant(value, field)
    if kind == "text":
        if not isinstance(value, str):
            raise ProviderRejected(f"{field}: expected a string")
        return value
    if value is not None and not isinstance(value, str | int | float):
        raise ProviderRejected(f"{field}: can compare only strings, numbers and booleans")
    return value


# --------------------------------------------------------------------------- listing cursors


def encode_cursor(written_at: str, record_id: str) -> str:
    return base.encode_cursor((written_at, record_id))


def decode_cursor(cursor: str) -> tuple[str, str]:
    written_at, record_id = base.decode_cursor(cursor, str)
    return str(written_at), record_id


# --------------------------------------------------------------------------- recall

# How often a word occurs in one version, weighed by column, counted by FTS5 itself: `highlight` gives the
# column back with one mark before each occurrence of the phrase matched, so the marks are the length it
# gained. FTS5 ranks with counts of its whole table, every memory's versions in it; these counts, a
# version's own, are the only thing taken from it.
_FREQUENCY = (
    f"{TITLE_WEIGHT} * (length(highlight(versions_fts, 0, char(1), '')) - length(versions_fts.title))"
    f" + {BODY_WEIGHT} * (length(highlight(versions_fts, 1, char(1), '')) - length(versions_fts.body))"
)


def recall_statement(
    memory_ids: Sequence[str],
    signals: Sequence[Signal],
    *,
    query: str | None,
    text: str | None,
    filters: Sequence[Condition],
    types: Sequence[str],
    as_of: str | None,
    include: str,
    depth: int,
) -> tuple[str, dict[str, Any]] | None:
    """One statement over every memory asked: each signal's ranked list (at most `depth` long), as
    rows (version columns, signal, place). None when no signal can match anything (no words)."""
    params: dict[str, Any] = {"memories": to_json(list(memory_ids), "memory ids"), "depth": depth}
    where = "v.memory_id IN (SELECT value FROM json_each(:memories)) AND " + scope(as_of, include)
    if as_of is not None:
        params["as_of"] = as_of
    if types:
        where += " AND v.type IN (SELECT value FROM json_each(:types))"
        params["types"] = to_json(list(types), "types")
    ctes: list[str] = []
    lists: list[str] = []

    worded = [
        (signal, phrases, every)
        for signal, phrases, every in (
            ("query", phrases_meaning(query or ""), False),
            ("text", phrases_all(text or ""), True),
        )
        if signal in signals and phrases
    ]
    if worded:
        # Each memory is its own corpus: how many records it holds, their mean length, and how many of
        # them hold each word, all counted over the versions this recall could answer in that memory.
        ctes.append(
            "corpus AS (SELECT v.memory_id, count(*) AS n, avg(v.words) AS avgdl"
            f" FROM versions v WHERE {where} GROUP BY v.memory_id)"
        )
    for signal, phrases, every in worded:
        # CROSS JOIN keeps the word index outermost. The planner may otherwise probe the match once per
        # record of the memory, which measured about 30 times slower on a 20,000-record memory.
        branches = []
        for i, phrase in enumerate(phrases):
            params[f"{signal}_{i}"] = phrase
            branches.append(
                f"SELECT {i} AS phrase, v.seq, v.memory_id, v.written_at, v.record_id, v.words, {_FREQUENCY} AS tf"
                f" FROM versions_fts CROSS JOIN versions v ON v.seq = versions_fts.rowid"
                f" WHERE versions_fts MATCH :{signal}_{i} AND {where}"
            )
        ctes += [
            f"hit_{signal} AS ({' UNION ALL '.join(branches)})",
            f"idf_{signal} AS (SELECT h.memory_id, h.phrase, memfed_idf(k.n, count(*)) AS idf"
            f" FROM hit_{signal} h JOIN corpus k ON k.memory_id = h.memory_id GROUP BY h.memory_id, h.phrase)",
            f"score_{signal} AS (SELECT h.seq, h.written_at, h.record_id,"
            f" sum(i.idf * ((h.tf * {K1 + 1.0}) / (h.tf + {K1} * ({1.0 - B} + {B} * h.words / k.avgdl)))) AS score"
            f" FROM hit_{signal} h JOIN idf_{signal} i ON i.memory_id = h.memory_id AND i.phrase = h.phrase"
            f" JOIN corpus k ON k.memory_id = h.memory_id GROUP BY h.seq"
            + (f" HAVING count(*) = {len(phrases)})" if every else ")"),
            f"sig_{signal} AS (SELECT seq, '{signal}' AS signal,"
            " row_number() OVER (ORDER BY score DESC, written_at DESC, record_id DESC) AS place"
            f" FROM score_{signal} ORDER BY place LIMIT :depth)",
        ]
        lists.append(f"sig_{signal}")

    if "filters" in signals and filters:
        clauses = []
        for i, cond in enumerate(filters):
            clause, cond_params = condition(cond, f"f{i}", as_of is not None)
            clauses.append(clause)
            params.update(cond_params)
        ctes.append(f"cand AS (SELECT * FROM versions v WHERE {where})")
        ctes.append(
            "sig_filters AS (SELECT seq, 'filters' AS signal,"
            " row_number() OVER (ORDER BY written_at DESC, record_id DESC) AS place"
            f" FROM cand v WHERE {' AND '.join(clauses)} ORDER BY place LIMIT :depth)"
        )
        lists.append("sig_filters")

    if not lists:
        return None
    ranked = " UNION ALL ".join(f"SELECT seq, signal, place FROM {name}" for name in lists)
    sql = (
        f"WITH {', '.join(ctes)} SELECT v.*, s.signal, s.place"
        f" FROM ({ranked}) s JOIN versions v ON v.seq = s.seq"
    )
    return sql, params


# --------------------------------------------------------------------------- reads and purges


def get_statement(as_of: str | None) -> str:
    return (
        "SELECT v.* FROM versions v"
        f" WHERE v.memory_id = :memory AND v.record_id = :record AND {scope(as_of, 'all')}"
    )


def list_statement(as_of: str | None, include: str, *, types: bool, after: bool) -> str:
    where = f"v.memory_id = :memory AND {scope(as_of, include)}"
    if types:
        where += " AND v.type IN (SELECT value FROM json_each(:types))"
    if after:
        where += " AND (v.written_at < :after_at OR (v.written_at = :after_at AND v.record_id < :after_id))"
    return f"SELECT v.* FROM versions v WHERE {where} ORDER BY v.written_at DESC, v.record_id DESC LIMIT :n"


COUNT = (
    "SELECT v.memory_id, count(*) AS n FROM versions v"
    f" WHERE v.memory_id IN (SELECT value FROM json_each(:memories)) AND {scope(None, 'active')}"
    " GROUP BY v.memory_id"
)


def purge_statements(where: str) -> tuple[str, ...]:
    """Delete the versions matching `where` (ERASABLE or IN_MEMORY) with their words, then rewrite the
    word index: FTS5 deletes by appending tombstones, and the words stay in older index segments until
    they are merged, so without the rewrite erased words would still be in the file."""
    return (
        f"DELETE FROM versions_fts WHERE rowid IN (SELECT seq FROM versions WHERE {where})",
        f"DELETE FROM versions WHERE {where}",
        "INSERT INTO versions_fts (versions_fts) VALUES ('optimize')",
    )
