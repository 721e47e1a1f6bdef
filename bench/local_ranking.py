"""What ranking each memory by its own records costs a recall on the embedded provider (issue 9 item 5).

One file holds a large memory, a small one, and twenty others that share the vocabulary. For each memory
and each kind of question it prints, side by side, p50 / p99 of R runs of:
- "global bm25": the statement recall ran before, one bm25 over the word index of every memory's
  versions (kept here only as the baseline; it leaked other memories' words into the order);
- "per-memory bm25": the statement recall runs now (adapters/local/_recall_sql.py `recall_statement`), bm25 over
  the memory's own records;
both on one plain sqlite3 connection, so the figures are the statements' alone; then the provider's whole
`recall` (aiosqlite, decoding, fusion) for the second. The three run in turns, so that each sees the same
load on a shared machine. Figures only; nothing is asserted.

    .venv/bin/python bench/local_ranking.py [R]
"""

from __future__ import annotations

import asyncio
import platform
import random
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.base import Part, RecallQuery, Record, RecordTime, Writer
from adapters.local import LocalProvider
from adapters.local import _kept as kept
from adapters.local import _recall_sql as recall_sql
from adapters.local import _sql as sql
from adapters.local._schema import fts_mean_length, fts_rows
from adapters.local._terms import terms_json

WRITER = Writer("member", "mbr_bench", "agent")
BIG, SMALL = "hmem_" + "b" * 32, "hmem_" + "5" * 32
OTHERS = ["hmem_" + f"{n:032x}" for n in range(20)]
SIZES = {BIG: 10_000, SMALL: 200, **{m: 500 for m in OTHERS}}
QUESTIONS = {
    "query, 3 words": RecallQuery(query="renewal discount procurement", limit=10),
    "query, 1 common word": RecallQuery(query="renewal", limit=10),
    "text, 2 words": RecallQuery(text="discount terms", limit=10),
    "query, 1 rarer word": RecallQuery(query="harbour", limit=10),
}
# The statement recall ran before per-memory ranking, for the baseline: FTS5's bm25 over its whole table.
GLOBAL_BM25 = (
    "WITH cand AS (SELECT * FROM versions v WHERE v.memory_id IN (SELECT value FROM json_each(:memories))"
    " AND v.invalidated_at IS NULL AND v.forgets = 0),"
    " sig AS (SELECT seq, row_number() OVER (ORDER BY score, written_at DESC, record_id DESC) AS place"
    " FROM (SELECT c.seq, c.written_at, c.record_id, bm25(versions_fts, 2.0, 1.0) AS score"
    " FROM versions_fts JOIN cand c ON c.seq = versions_fts.rowid WHERE versions_fts MATCH :match)"
    " ORDER BY place LIMIT :depth)"
    " SELECT v.*, s.place FROM sig s JOIN versions v ON v.seq = s.seq"
)


def vocabulary(rng: random.Random) -> list[str]:
    syllables = ["ka", "lo", "mi", "ren", "tu", "vo", "sha", "pel", "dor", "quin", "ab", "est"]
    made = {"".join(rng.choice(syllables) for _ in range(rng.randint(2, 4))) for _ in range(3000)}
    # Most of the questions' words come first, the commonest (a worst case: each is in most records);
    # "harbour" is the 200th, in about one record in a hundred.
    ranked = ["renewal", "discount", "procurement", "terms", "acme", *sorted(made)]
    return [*ranked[:200], "harbour", *ranked[200:]]


def seed(path: Path) -> int:
    """Every memory's records, written with the provider's own statements in one transaction."""
    rng = random.Random(7)
    words = vocabulary(rng)
    weights = [1.0 / (rank + 1) for rank in range(len(words))]  # Zipf-like: a few words are everywhere
    start = datetime(2026, 10, 1, tzinfo=UTC)
    db = sqlite3.connect(path, isolation_level=None)
    db.create_function("memfed_words", 1, sql.fts_words, deterministic=True)
    db.create_function("memfed_terms", 2, terms_json, deterministic=True)
    db.execute("BEGIN")
    n = 0
    for memory, size in SIZES.items():
        for i in range(size):
            text = " ".join(rng.choices(words, weights, k=rng.randint(8, 60)))
            record = Record(id="hrec_" + f"{n:032x}", memory_id=memory, type="note",
                            content=(Part("text", text=text),), written_by=WRITER,
                            time=RecordTime(start + timedelta(seconds=n)), title=f"r{i}")
            cursor = db.execute(sql.INSERT, sql.columns(record))
            db.execute(sql.INSERT_WORDS, (cursor.lastrowid, *sql.searchable(record)))
            db.execute(sql.SET_WORDS, {"seq": cursor.lastrowid})
            for statement in kept.change(kept.SEQ, 1):  # recall's per-memory counts, as the provider keeps them
                db.execute(statement, {"seq": cursor.lastrowid})
            n += 1
    db.execute("COMMIT")
    db.close()
    return n


def timed(db: sqlite3.Connection, statement: str, params: dict[str, Any]) -> float:
    began = time.perf_counter()
    db.execute(statement, params).fetchall()
    return time.perf_counter() - began


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"{statistics.median(ordered) * 1000:7.2f} /{p99 * 1000:7.2f}"


async def main(runs: int) -> None:
    print(f"python {platform.python_version()}, sqlite {sqlite3.sqlite_version}, {platform.machine()}, runs={runs}")
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "records.sqlite3"
        made = await LocalProvider.open(path)  # the schema, as the provider makes it
        await made.close()
        total = seed(path)
        print(f"{total} records in {len(SIZES)} memories; big {SIZES[BIG]}, small {SIZES[SMALL]},"
              f" {len(OTHERS)} others {SIZES[OTHERS[0]]} each")
        db = sqlite3.connect(path)
        db.row_factory = sqlite3.Row
        db.create_function("memfed_idf", 2, sql.idf, deterministic=True)
        db.create_function("memfed_fts_rows", 1, fts_rows, deterministic=True)
        db.create_function("memfed_fts_avgdl", 1, fts_mean_length, deterministic=True)
        provider = await LocalProvider.open(path)
        try:
            print(f"{'memory':8} {'question':22} {'global bm25 p50/p99 ms':>24} {'per-memory p50/p99 ms':>24}"
                  f" {'recall() p50/p99 ms':>22}")
            for label, memory in (("big", BIG), ("small", SMALL)):
                for name, asked in QUESTIONS.items():
                    phrases = (sql.phrases_meaning(asked.query) if asked.query else sql.phrases_all(asked.text or ""))
                    old = {"memories": sql.to_json([memory], "m"), "depth": 50,
                           "match": (" OR " if asked.query else " AND ").join(phrases)}
                    new = recall_sql.recall_statement([memory], asked.signals(), query=asked.query, text=asked.text,
                                               filters=(), types=(), as_of=None, include="active", depth=50)
                    assert new is not None
                    before: list[float] = []
                    after: list[float] = []
                    whole: list[float] = []
                    for _ in range(runs):  # in turns, so that both see the same load on a shared machine
                        before.append(timed(db, GLOBAL_BM25, old))
                        after.append(timed(db, *new))
                        began = time.perf_counter()
                        await provider.recall([memory], asked)
                        whole.append(time.perf_counter() - began)
                    print(f"{label:8} {name:22} {ms(before):>24} {ms(after):>24} {ms(whole):>22}")
        finally:
            await provider.close()
            db.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 10))
