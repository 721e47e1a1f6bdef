# ruff: noqa: S608 - statements here are assembled only from this module's own fragments; every value
# that comes from a caller (ids, words, filter values, instants) is bound as a parameter, never spliced.
"""The statements the local provider runs on its SQLite file: the fixed ones, FTS5 match expressions,
the scope and filters of a read, listing cursors and purges. Recall's one statement, built of these, is
adapters/local/_recall_sql.py.

Pure functions and constants, no I/O: `adapters/local/provider.py` runs what this module builds, over the tables
and the row encoding of adapters/local/_schema.py.
"""

from __future__ import annotations

import math
import re
from typing import Any

import adapters.base as base
from adapters.base import ProviderRejected
from adapters.filter_sql import scope as scope

# The names imported as themselves are re-exported: the adapter's modules import this one as `sql` and
# read the stored form through it too (`sql.record`, `sql.utc`, `sql.SCHEMA`).
from adapters.local._schema import AVERAGES as AVERAGES
from adapters.local._schema import SCHEMA as SCHEMA
from adapters.local._schema import SCHEMA_VERSION as SCHEMA_VERSION
from adapters.local._schema import SET_WORDS as SET_WORDS
from adapters.local._schema import Row as Row
from adapters.local._schema import columns as columns
from adapters.local._schema import from_ts as from_ts
from adapters.local._schema import fts_words as fts_words
from adapters.local._schema import record as record
from adapters.local._schema import searchable as searchable
from adapters.local._schema import to_json
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
    "SELECT v.* FROM versions v WHERE v.memory_id = :memory AND v.record_id = :record AND v.invalidated_at IS NULL"
)
HISTORY = "SELECT v.* FROM versions v WHERE v.memory_id = :memory AND v.record_id = :record ORDER BY v.version"
WRITTEN_BY_WRITE = "SELECT v.* FROM versions v WHERE v.memory_id = :memory AND v.write_id = :write"
ERASABLE = "memory_id = :memory AND record_id IN (SELECT value FROM json_each(:ids))"
FIND = f"SELECT DISTINCT record_id FROM versions WHERE {ERASABLE}"
IN_MEMORY = "memory_id = :memory"
CHECKPOINT = "PRAGMA wal_checkpoint(TRUNCATE)"

# bm25 as FTS5 computes it (k1, b, and the weights of (title, body): a word in the line that names a record
# says more than one in its body), but over one memory's records: see adapters/local/_recall_sql.py.
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


class _SQLite:
    """SQLite's spelling of a filter (adapters/filter_sql.py holds the shape both SQL providers share)."""

    def attribute(self, key: str, field: str, name: str) -> tuple[str, dict[str, Any]]:
        # SQLite's JSON path has no escape inside a quoted label, so a key with a quote cannot be named.
        if not key or '"' in key:
            raise ProviderRejected(f"cannot filter on {field!r}")
        return f"json_extract(v.attributes, :{name}_path)", {f"{name}_path": f'$."{key}"'}

    def bound(self, value: Any, kind: str) -> Any:
        return value

    def one_of(self, column: str, kind: str, values: list[Any], name: str, params: dict[str, Any]) -> str:
        params[name] = to_json(values, "filter value")
        return f"{column} IN (SELECT value FROM json_each(:{name}))"

    def equals(self, column: str, negated: bool, kind: str, name: str) -> str:
        # `IS NOT` rather than `!=`: a record without the attribute is not equal to the value.
        return f"{column} {'IS NOT' if negated else '='} :{name}"

    def ranged(self, column: str, kind: str, symbol: str, value: Any, name: str, params: dict[str, Any]) -> str:
        return f"{_range_guard(column, kind, value)}{column} {symbol} :{name}"


DIALECT = _SQLite()


def _range_guard(column: str, kind: str, value: Any) -> str:
    """SQLite orders every number before every string: a range on numbers must not match words."""
    if kind != "json":
        return ""
    if isinstance(value, int | float):
        return f"typeof({column}) IN ('integer', 'real') AND "
    return f"typeof({column}) = 'text' AND "


# --------------------------------------------------------------------------- listing cursors


def encode_cursor(written_at: str, record_id: str) -> str:
    return base.encode_cursor((written_at, record_id))


def decode_cursor(cursor: str) -> tuple[str, str]:
    written_at, record_id = base.decode_cursor(cursor, str)
    return str(written_at), record_id


# --------------------------------------------------------------------------- reads and purges


def get_statement(as_of: str | None) -> str:
    return f"SELECT v.* FROM versions v WHERE v.memory_id = :memory AND v.record_id = :record AND {scope(as_of, 'all')}"


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
