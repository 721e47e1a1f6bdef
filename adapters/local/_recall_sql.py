# ruff: noqa: S608 - statements here are assembled only from this module's own fragments; every value
# that comes from a caller (ids, words, filter values, instants) is bound as a parameter, never spliced.
"""Recall's one statement on the local provider's SQLite file: each signal's ranked list over every memory
asked, words ranked by bm25 over each memory's own records.

Pure functions, no I/O: `adapters/local/provider.py` runs what this module builds, over the tables of
adapters/local/_schema.py, with the SQL functions adapters/local/_connections.py registers.

A memory is its own corpus: how many records it holds, their mean length and how many of them hold each
word are those of the versions this recall could answer in that memory, so what another memory holds
never moves an order. Without `as_of` they are read from the counts kept on write (adapters/local/_kept.py,
a row per memory, type and word); `as_of` an earlier instant, they are counted here, over the versions
current then. The one thing taken from FTS5 per version is how often each word occurs in it,
weighed by column (`TITLE_WEIGHT`, `BODY_WEIGHT`). FTS5 has no function that returns that count, but its
bm25 is a known function of it (https://sqlite.org/fts5.html, "bm25"):

    bm25 = -idf * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avgdl))

with `idf` and `avgdl` FTS5's own, over its whole table (its averages record, and the rows that hold the
word), and `dl` the version's length. Those three are read here too, so `f` is solved for; the counts are
whole numbers (the weights are), so the solution is rounded back to the exact count. bm25 reads the word
index's position lists; the count it replaces (`highlight`) read and split each version's text again, for
every word asked, which was half of a recall's time.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from adapters import filter_sql
from adapters.base import Condition, Signal
from adapters.local._schema import to_json
from adapters.local._sql import (
    AVERAGES,
    BODY_WEIGHT,
    DIALECT,
    K1,
    TITLE_WEIGHT,
    B,
    phrases_all,
    phrases_meaning,
    scope,
)
from adapters.local._terms import phrase_term

# FTS5's corpus as its bm25 sees it: every row of the word index, all memories' versions.
_FTS = f"fts AS (SELECT memfed_fts_rows(block) AS n, memfed_fts_avgdl(block) AS avgdl FROM ({AVERAGES}))"
_JOINED = "FROM versions_fts CROSS JOIN versions v ON v.seq = versions_fts.rowid"


def _scope(
    memory_ids: Sequence[str], types: Sequence[str], as_of: str | None, include: str
) -> tuple[str, dict[str, Any]]:
    """The versions of the memories asked that this recall may answer, as SQL over alias `v`."""
    params: dict[str, Any] = {"memories": to_json(list(memory_ids), "memory ids")}
    where = "v.memory_id IN (SELECT value FROM json_each(:memories)) AND " + scope(as_of, include)
    if as_of is not None:
        params["as_of"] = as_of
    if types:
        where += " AND v.type IN (SELECT value FROM json_each(:types))"
        params["types"] = to_json(list(types), "types")
    return where, params


def _kept_scope(alias: str, include: str, types: Sequence[str]) -> str:
    """The rows of the counts kept on write (adapters/local/_kept.py) that a recall without `as_of` sees."""
    clause = f" AND {alias}.forgets = 0" if include == "active" else ""
    return clause + (f" AND {alias}.type IN (SELECT value FROM json_each(:types))" if types else "")


def _kept_corpus(scope: str) -> str:
    """Each memory's size and mean length, summed from the counts kept on write."""
    return (
        "corpus AS MATERIALIZED (SELECT s.memory_id, sum(s.records) AS n,"
        " CAST(sum(s.words) AS REAL) / sum(s.records) AS avgdl"
        f" FROM memory_sizes s WHERE s.memory_id IN (SELECT value FROM json_each(:memories)){scope}"
        " GROUP BY s.memory_id HAVING sum(s.records) > 0)"
    )


def _worded(
    signal: str,
    phrases: Sequence[str],
    every: bool,
    where: str,
    params: dict[str, Any],
    kept: tuple[Sequence[str], str] | None,
) -> list[str]:
    """The CTEs of one signal of words, ending in `sig_{signal}`: its ranked list. With `kept` (each
    phrase's term, and the kept counts' scope) each memory's counts of the words are read from the counts
    kept on write; without, they are counted here."""
    for i, phrase in enumerate(phrases):
        params[f"{signal}_{i}"] = phrase
    # When every word must occur, only the versions holding them all are scored: a common word's other
    # versions are never scored (nor, when counts are kept, read at all). The set is made once, first,
    # and tested without probing the word index by rowid (the `+`): probing it from inside another scan of
    # it measured 50 times slower than the scans themselves.
    narrowed = every and len(phrases) > 1
    if narrowed:
        params[f"{signal}_all"] = " AND ".join(phrases)
    # CROSS JOIN keeps the word index outermost. The planner may otherwise probe the match once per
    # record of the memory, which measured about 30 times slower on a 20,000-record memory.
    source, scoped = (f"all_{signal} v ON v.seq", "") if narrowed else ("versions v ON v.seq", f" AND {where}")
    hits = " UNION ALL ".join(
        f"SELECT {i} AS phrase, v.seq, v.memory_id, v.written_at, v.record_id, v.words,"
        f" -bm25(versions_fts, {TITLE_WEIGHT}, {BODY_WEIGHT}) AS raw,"
        f" (SELECT memfed_idf(f.n, count(*)) FROM versions_fts, fts f WHERE versions_fts MATCH :{signal}_{i})"
        " AS fts_idf"
        f" FROM versions_fts CROSS JOIN {source} = versions_fts.rowid WHERE versions_fts MATCH :{signal}_{i}{scoped}"
        for i in range(len(phrases))
    )
    if kept is not None:
        terms, kept_scope = kept
        for i, term in enumerate(terms):
            params[f"{signal}_term_{i}"] = term
        counted = " UNION ALL ".join(
            f"SELECT {i} AS phrase, t.memory_id, sum(t.records) AS hits FROM memory_terms t"
            f" WHERE t.memory_id IN (SELECT value FROM json_each(:memories)) AND t.term = :{signal}_term_{i}"
            f"{kept_scope} GROUP BY t.memory_id"
            for i in range(len(phrases))
        )
    elif narrowed:
        counted = " UNION ALL ".join(
            f"SELECT {i} AS phrase, v.memory_id, count(*) AS hits {_JOINED}"
            f" WHERE versions_fts MATCH :{signal}_{i} AND {where} GROUP BY v.memory_id"
            for i in range(len(phrases))
        )
    else:
        counted = f"SELECT phrase, memory_id, count(*) AS hits FROM hit_{signal} GROUP BY memory_id, phrase"
    solved = "(h.raw / h.fts_idf)"  # f * (k1 + 1) / (f + c), c = k1 * (1 - b + b * dl / avgdl)
    every_word = (
        [
            f"all_{signal} AS MATERIALIZED (SELECT v.seq, v.memory_id, v.written_at, v.record_id, v.words"
            f" {_JOINED} WHERE versions_fts MATCH :{signal}_all AND {where})"
        ]
        if narrowed
        else []
    )
    return [
        *every_word,
        # MATERIALIZED: bm25 can only be called inside the word index's own scan, never folded into the next.
        f"hit_{signal} AS MATERIALIZED ({hits})",
        f"tf_{signal} AS (SELECT h.phrase, h.seq, h.memory_id, h.written_at, h.record_id, h.words,"
        f" round({solved} * {K1} * ({1.0 - B} + {B} * h.words / f.avgdl) / ({K1 + 1.0} - {solved})) AS tf"
        f" FROM hit_{signal} h, fts f)",
        f"count_{signal} AS ({counted})",
        f"idf_{signal} AS MATERIALIZED (SELECT c.memory_id, c.phrase, memfed_idf(k.n, c.hits) AS idf"
        f" FROM count_{signal} c JOIN corpus k ON k.memory_id = c.memory_id)",
        f"score_{signal} AS (SELECT h.seq, h.written_at, h.record_id,"
        f" sum(i.idf * ((h.tf * {K1 + 1.0}) / (h.tf + {K1} * ({1.0 - B} + {B} * h.words / k.avgdl)))) AS score"
        # CROSS JOIN: the hits outermost, each looking up its memory's few rows. The planner otherwise put the
        # per-memory weights outside and built an index over every hit first (a tenth of a common word's time).
        f" FROM tf_{signal} h CROSS JOIN idf_{signal} i ON i.memory_id = h.memory_id AND i.phrase = h.phrase"
        f" CROSS JOIN corpus k ON k.memory_id = h.memory_id GROUP BY h.seq"
        + (f" HAVING count(*) = {len(phrases)})" if every else ")"),
        f"sig_{signal} AS MATERIALIZED (SELECT seq, '{signal}' AS signal,"
        " row_number() OVER (ORDER BY score DESC, written_at DESC, record_id DESC) AS place"
        f" FROM score_{signal} ORDER BY place LIMIT :depth)",
    ]


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
    where, params = _scope(memory_ids, types, as_of, include)
    params["depth"] = depth
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
    # The counts kept on write are over current versions: a recall `as_of` an earlier instant counts its own,
    # as does one with a word the tokenizer does not make exactly one term of (see _terms.phrase_term).
    terms = {signal: [phrase_term(p) for p in phrases] for signal, phrases, _ in worded}
    counts_kept = as_of is None and all(t is not None for found in terms.values() for t in found)
    if worded:
        ctes.append(
            _kept_corpus(_kept_scope("s", include, types))
            if counts_kept
            else "corpus AS MATERIALIZED (SELECT v.memory_id, count(*) AS n, avg(v.words) AS avgdl"
            f" FROM versions v WHERE {where} GROUP BY v.memory_id)"
        )
        ctes.append(_FTS)
    for signal, phrases, every in worded:
        found = [t for t in terms[signal] if t is not None]
        ctes += _worded(
            signal, phrases, every, where, params, (found, _kept_scope("t", include, types)) if counts_kept else None
        )
        lists.append(f"sig_{signal}")

    if "filters" in signals and filters:
        every_filter = filter_sql.all_of(DIALECT, filters, as_of is not None, params)
        ctes.append(f"cand AS (SELECT * FROM versions v WHERE {where})")
        ctes.append(
            "sig_filters AS (SELECT seq, 'filters' AS signal,"
            " row_number() OVER (ORDER BY written_at DESC, record_id DESC) AS place"
            f" FROM cand v WHERE {every_filter} ORDER BY place LIMIT :depth)"
        )
        lists.append("sig_filters")

    if not lists:
        return None
    ranked = " UNION ALL ".join(f"SELECT seq, signal, place FROM {name}" for name in lists)
    sql = f"WITH {', '.join(ctes)} SELECT v.*, s.signal, s.place FROM ({ranked}) s JOIN versions v ON v.seq = s.seq"
    return sql, params
