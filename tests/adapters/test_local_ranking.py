"""The embedded provider ranks a memory's records by that memory's records and the question alone: the
words, lengths and counts of another memory's records, forgotten and superseded versions included, never
move a score or an order (issue 9 item 5). Otherwise a member could learn whether any record anywhere holds
a word by the order of two records of its own."""

from __future__ import annotations

import sqlite3
from dataclasses import replace
from pathlib import Path

from adapters.base import RecallQuery
from adapters.local import LocalProvider
from tests.adapters.harnesses import M1, M2, M3, PERSON, Stamps

# Each question in each form a recall can take: words (any, ranked) and text (all), current and `all`.
ASKED = [
    RecallQuery(query="apple banana", limit=10),
    RecallQuery(query="pie crust", limit=10),
    RecallQuery(text="pie", limit=10),
    RecallQuery(text="pie", include="all", limit=10),
    RecallQuery(query="apple pie", include="all", limit=10),
]



async def ranking(provider: LocalProvider, memory_id: str) -> list[list[tuple[str, float]]]:
    """Every hit's id and score, in order, for each question of ASKED."""
    answers = [await provider.recall([memory_id], asked) for asked in ASKED]
    return [[(hit.record.id, hit.score) for hit in answer.hits] for answer in answers]


async def seed_m1(provider: LocalProvider, stamps: Stamps) -> None:
    """Records whose order hangs on how rare `apple` is and on how long a record is, against others."""
    for n in range(6):
        await provider.remember(M1, stamps.record(f"Cherry notes number {n} about the orchard."))
    await provider.remember(M1, stamps.record("banana pie"))
    await provider.remember(M1, stamps.record("apple pie"))  # newer: first while the two tie
    await provider.remember(M1, stamps.record("pie " * 2 + "crust " + "orchard " * 8))
    await provider.remember(M1, stamps.record("pie"))
    gone = await provider.remember(M1, stamps.record("apple pie crust, forgotten"))
    await provider.forget(M1, gone.id, PERSON, stamps.tick())


async def test_another_memorys_records_never_move_a_score_or_an_order(local: LocalProvider, stamps: Stamps) -> None:
    """Adding records with the question's words (and long ones without them) to other memories, revising
    and forgetting them, then erasing them, leaves every score and order of M1's recall as it was."""
    await seed_m1(local, stamps)
    before = await ranking(local, M1)
    assert all(before), before  # every question finds something in M1

    others: list[tuple[str, str]] = []
    for n in range(30):
        memory = M2 if n % 2 else M3
        written = await local.remember(memory, stamps.record(f"apple {n} " + "filler " * 60))
        others.append((memory, written.id))
        if n % 3 == 0:
            await local.revise(memory, written.id, stamps.revision(title="apple pie"))
        if n % 5 == 0:
            await local.forget(memory, written.id, PERSON, stamps.tick())
    assert await ranking(local, M1) == before

    for memory in (M2, M3):
        await local.erase(memory, [rid for m, rid in others if m == memory])
    assert await ranking(local, M1) == before


async def test_removing_another_memorys_records_never_moves_a_score_or_an_order(
    local: LocalProvider, stamps: Stamps
) -> None:
    """The same from the other side: records that were there first, then dropped with their memory."""
    for n in range(20):
        await local.remember(M2, stamps.record("apple crust " + "filler " * (5 * n)))
    await seed_m1(local, stamps)
    before = await ranking(local, M1)
    await local.drop_memory(M2)
    assert await ranking(local, M1) == before


async def test_in_a_recall_over_several_memories_each_keeps_its_own_order(
    local: LocalProvider, stamps: Stamps
) -> None:
    """Asked over M1 and M2 at once, M1's records come in the order M1 alone gives them, however many of
    M2's records hold the question's words."""
    await seed_m1(local, stamps)
    for n in range(30):
        await local.remember(M2, stamps.record(f"apple crust {n} " + "filler " * (3 * n)))
    for asked in ASKED:
        alone = [hit.record.id for hit in (await local.recall([M1], asked)).hits]
        together = await local.recall([M1, M2], replace(asked, limit=50))
        assert [hit.record.id for hit in together.hits if hit.record.memory_id == M1] == alone, asked


async def test_alone_in_its_file_a_memory_ranks_as_fts5s_own_bm25(tmp_path: Path, stamps: Stamps) -> None:
    """The per-memory score is bm25 as FTS5 computes it (same weights and constants): a memory that is the
    whole file, with no superseded versions, is ranked in the order FTS5's bm25 gives."""
    path = tmp_path / "records.sqlite3"
    provider = await LocalProvider.open(path)
    try:
        texts = ["pie", "pie pie crust", "apple pie " + "orchard " * 12, "crust crust crust pie apple",
                 "apple", "pie and " * 5 + "crust", "banana bread", "apple apple apple crust"]
        ids = {}
        for text in texts:
            ids[(await provider.remember(M1, stamps.record(text, title="pie" if "banana" in text else None))).id] = text
        answers = {asked: await provider.recall([M1], RecallQuery(query=asked, limit=20))
                   for asked in ("pie", "apple crust", "pie apple crust", "banana pie")}
    finally:
        await provider.close()
    db = sqlite3.connect(path)
    try:
        for asked, answer in answers.items():
            match = " OR ".join(f'"{w}"' for w in asked.split())
            rows = db.execute(
                "SELECT v.record_id FROM versions_fts f JOIN versions v ON v.seq = f.rowid"
                " WHERE versions_fts MATCH ?"
                " ORDER BY bm25(versions_fts, 2.0, 1.0), v.written_at DESC, v.record_id DESC",
                (match,),
            ).fetchall()
            assert [hit.record.id for hit in answer.hits] == [r[0] for r in rows], asked
    finally:
        db.close()


async def test_a_file_from_before_per_memory_ranking_gains_each_versions_length(
    tmp_path: Path, stamps: Stamps
) -> None:
    """A schema-version-2 file (no `words` column, the old `versions_live` index) opens with every
    version's length read off the word index, and ranks as a file written by this version does."""
    path = tmp_path / "records.sqlite3"
    provider = await LocalProvider.open(path)
    try:
        await seed_m1(provider, stamps)
        fresh = await ranking(provider, M1)
    finally:
        await provider.close()
    db = sqlite3.connect(path)
    try:
        lengths = db.execute("SELECT seq, words FROM versions ORDER BY seq").fetchall()
        db.executescript(
            "DROP INDEX versions_words; ALTER TABLE versions DROP COLUMN words;"
            " CREATE INDEX versions_live ON versions (memory_id, invalidated_at, forgets); PRAGMA user_version = 2;"
        )
    finally:
        db.close()

    provider = await LocalProvider.open(path)
    try:
        assert await ranking(provider, M1) == fresh
    finally:
        await provider.close()
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT seq, words FROM versions ORDER BY seq").fetchall() == lengths
        assert all(words > 0 for _, words in lengths)
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
        assert "versions_words" in indexes and "versions_live" not in indexes
        assert db.execute("PRAGMA user_version").fetchone() == (4,)
    finally:
        db.close()
