# ruff: noqa: S608 - statements here are assembled only from this module's own fragments and the schema
# name checked by `_schema.identifier`; every value from a caller (ids, words, filters, instants) is bound.
"""The statements the PostgreSQL provider runs: fixed ones over its table, the scope and filters of a
read, and recall's ranked lists with PostgreSQL's own text search.

Pure: `Statements(schema, text_config)` builds strings; adapters/postgres/provider.py runs them through
SQLAlchemy's `text()` with named parameters. Ranking is `ts_rank` of one version's own tsvector against
the question, so a record's score depends on nothing but that record: no statistics across the table,
and so none across memories.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from typing import Any

from adapters import filter_sql
from adapters.base import Condition, ProviderRejected, Signal
from adapters.filter_sql import scope as scope
from adapters.postgres._schema import COLUMNS
from adapters.version_rows import to_json

# Letters and digits, the tokens of the SQLite provider's unicode61 tokenizer: everything else is a
# separator on both providers, so "2026-10-09" is three words here too (PostgreSQL's own parser would
# read "-10" as a signed number, and hyphenated or dotted runs as one token beside their parts).
_WORD = re.compile(r"[^\W_]+")


def words_only(text: str) -> str:
    """`text` as its words, space-separated and without diacritics (as unicode61's remove_diacritics
    reads them: "Zürich" is "Zurich"): what goes into a tsvector and a tsquery."""
    folded = "".join(c for c in unicodedata.normalize("NFKD", text) if not unicodedata.combining(c))
    return " ".join(_WORD.findall(folded))


_SELECT = ", ".join(f"v.{c}" for c in COLUMNS)
_INSERTED = tuple(c for c in COLUMNS if c != "seq")


class _PostgreSQL:
    """PostgreSQL's spelling of a filter. Attributes are compared as jsonb, so a number equals a number
    and a string a string, as the SQLite provider compares them (adapters/filter_sql.py: the shape)."""

    def attribute(self, key: str, field: str, name: str) -> tuple[str, dict[str, Any]]:
        if not key:
            raise ProviderRejected(f"cannot filter on {field!r}")
        # JSON null reads as absent, as SQLite's json_extract reads it.
        return (
            f"NULLIF(CAST(v.attributes AS jsonb) -> CAST(:{name}_key AS text), 'null'::jsonb)",
            {f"{name}_key": key},
        )

    def bound(self, value: Any, kind: str) -> Any:
        return to_json(value, "filter value") if kind == "json" else value

    def one_of(self, column: str, kind: str, values: list[Any], name: str, params: dict[str, Any]) -> str:
        bound = [self.bound(v, kind) for v in values]
        if kind == "json":
            params[name] = to_json([json.loads(v) for v in bound], "filter value")
            return f"{column} IN (SELECT jsonb_array_elements(CAST(CAST(:{name} AS text) AS jsonb)))"
        params[name] = bound
        return f"{column} = ANY(CAST(:{name} AS text[]))"

    def equals(self, column: str, negated: bool, kind: str, name: str) -> str:
        # IS DISTINCT FROM rather than !=: a record without the attribute is not equal to the value.
        return f"{column} {'IS DISTINCT FROM' if negated else '='} {_operand_sql(kind, name)}"

    def ranged(self, column: str, kind: str, symbol: str, value: Any, name: str, params: dict[str, Any]) -> str:
        if kind != "json":
            return f"{column} {symbol} :{name}"
        # jsonb orders across kinds (every string before every number); a range on numbers matches numbers.
        if isinstance(value, int | float):
            return f"(jsonb_typeof({column}) = 'number' AND {column} {symbol} {_operand_sql(kind, name)})"
        # jsonb compares strings in the database's collation; byte order is what SQLite compares by.
        params[name] = value
        return (
            f"(jsonb_typeof({column}) = 'string' AND ({column} #>> '{{}}') COLLATE \"C\" {symbol}"
            f" CAST(:{name} AS text))"
        )


def _operand_sql(kind: str, name: str) -> str:
    return f"CAST(CAST(:{name} AS text) AS jsonb)" if kind == "json" else f":{name}"


_DIALECT = _PostgreSQL()


class Statements:
    """Every statement of one provider, over `"<schema>".versions`, searching with `text_config`."""

    def __init__(self, schema: str, text_config: str) -> None:
        self.table = t = f'"{schema}".versions'
        self.config = cfg = f"'{text_config}'::regconfig"
        self.insert = (
            f"INSERT INTO {t} ({', '.join(_INSERTED)}, words) VALUES ({', '.join(':' + c for c in _INSERTED)},"
            f" setweight(to_tsvector({cfg}, :search_title), 'A') || setweight(to_tsvector({cfg}, :search_body), 'B'))"
        )
        self.close = f"UPDATE {t} SET invalidated_at = :at WHERE record_id = :record AND version = :version"
        self.current = (
            f"SELECT {_SELECT} FROM {t} v"
            " WHERE v.memory_id = :memory AND v.record_id = :record AND v.invalidated_at IS NULL"
        )
        self.history = (
            f"SELECT {_SELECT} FROM {t} v WHERE v.memory_id = :memory AND v.record_id = :record ORDER BY v.version"
        )
        self.written_by_write = f"SELECT {_SELECT} FROM {t} v WHERE v.memory_id = :memory AND v.write_id = :write"
        self.erase = (
            f"DELETE FROM {t} WHERE memory_id = :memory AND record_id = ANY(CAST(:ids AS text[])) RETURNING record_id"
        )
        self.drop = f"DELETE FROM {t} WHERE memory_id = :memory"
        self.versions = (
            f"SELECT {_SELECT} FROM {t} v WHERE v.memory_id = :memory AND v.record_id = ANY(CAST(:ids AS text[]))"
        )
        self.count = (
            f"SELECT v.memory_id, count(*) AS n FROM {t} v"
            f" WHERE v.memory_id = ANY(CAST(:memories AS text[])) AND {scope(None, 'active')} GROUP BY v.memory_id"
        )

    def get(self, as_of: str | None) -> str:
        return (
            f"SELECT {_SELECT} FROM {self.table} v"
            f" WHERE v.memory_id = :memory AND v.record_id = :record AND {scope(as_of, 'all')}"
        )

    def list(self, as_of: str | None, include: str, *, types: bool, after: bool) -> str:
        where = f"v.memory_id = :memory AND {scope(as_of, include)}"
        if types:
            where += " AND v.type = ANY(CAST(:types AS text[]))"
        if after:
            where += " AND (v.written_at < :after_at OR (v.written_at = :after_at AND v.record_id < :after_id))"
        return (
            f"SELECT {_SELECT} FROM {self.table} v WHERE {where} ORDER BY v.written_at DESC, v.record_id DESC LIMIT :n"
        )

    def recall(
        self,
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
        rows (version columns, signal, place). None when no signal was asked with something to match."""
        params: dict[str, Any] = {"memories": list(memory_ids), "depth": depth}
        where = "v.memory_id = ANY(CAST(:memories AS text[])) AND " + scope(as_of, include)
        if as_of is not None:
            params["as_of"] = as_of
        if types:
            where += " AND v.type = ANY(CAST(:types AS text[]))"
            params["types"] = list(types)
        # NOT MATERIALIZED: each list folds the candidates into its own scan, so `words @@ q` can use the
        # GIN index with the memory condition instead of reading every version of the memories asked.
        cand = f"SELECT v.seq, v.written_at, v.record_id, v.words FROM {self.table} v WHERE {where}"
        ctes = [f"cand AS NOT MATERIALIZED ({cand})"]
        lists: list[str] = []

        for signal, tsquery in (("query", self._any_word(query, params)), ("text", self._every_word(text, params))):
            if signal not in signals or tsquery is None:
                continue
            ctes.append(
                f"sig_{signal} AS (SELECT seq, '{signal}' AS signal,"
                " row_number() OVER (ORDER BY score DESC, written_at DESC, record_id DESC) AS place"
                f" FROM (SELECT c.seq, c.written_at, c.record_id, ts_rank(c.words, q.q) AS score"
                f" FROM cand c, (SELECT {tsquery} AS q) q WHERE c.words @@ q.q) ranked"
                " ORDER BY place LIMIT :depth)"
            )
            lists.append(f"sig_{signal}")

        if "filters" in signals and filters:
            every_filter = filter_sql.all_of(_DIALECT, filters, as_of is not None, params)
            ctes.append(
                "sig_filters AS (SELECT v.seq, 'filters' AS signal,"
                " row_number() OVER (ORDER BY v.written_at DESC, v.record_id DESC) AS place"
                f" FROM {self.table} v JOIN cand c ON c.seq = v.seq WHERE {every_filter}"
                " ORDER BY place LIMIT :depth)"
            )
            lists.append("sig_filters")

        if not lists:
            return None
        ranked = " UNION ALL ".join(f"SELECT seq, signal, place FROM {name}" for name in lists)
        statement = (
            f"WITH {', '.join(ctes)} SELECT {_SELECT}, s.signal, s.place"
            f" FROM ({ranked}) s JOIN {self.table} v ON v.seq = s.seq"
        )
        return statement, params

    def _any_word(self, question: str | None, params: dict[str, Any]) -> str | None:
        """Meaning, emulated by words: any word of the question, stop words dropped by the configuration
        (each word parsed on its own by plainto_tsquery, so nothing in it is tsquery syntax), OR'd."""
        tokens = words_only(question or "").split()
        if not tokens:
            return None
        params["query_words"] = list(dict.fromkeys(tokens))
        return (
            "(SELECT coalesce(CAST(string_agg(w.q::text, ' | ') FILTER (WHERE w.q::text <> '') AS tsquery),"
            " ''::tsquery) FROM unnest(CAST(:query_words AS text[])) AS u(word),"
            f" LATERAL plainto_tsquery({self.config}, u.word) AS w(q))"
        )

    def _every_word(self, text: str | None, params: dict[str, Any]) -> str | None:
        """Words: every word of `text` must occur (plainto_tsquery ANDs them)."""
        joined = words_only(text or "")
        if not joined:
            return None
        params["text_words"] = joined
        return f"plainto_tsquery({self.config}, :text_words)"
