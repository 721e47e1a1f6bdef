"""The embedded provider keeps recall's per-memory counts on write (adapters/local/_kept.py) instead of
counting them at every recall. These tests pin that the kept counts are always the counts of the current
versions, through every kind of write, that recall ranks from them exactly as it ranks by counting (a
recall `as_of` an instant after every write counts its own, over the same versions), that the tokenizer
behind them makes FTS5's own terms, that an erased record's words leave no count behind, and that a file
from before the counts gains them."""

from __future__ import annotations

import random
import sqlite3
from collections import Counter
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.base import RecallQuery
from adapters.local import LocalProvider
from adapters.local import _terms as terms
from tests.adapters.harnesses import M1, M2, M3, PERSON, Stamps

# Words the stemmer folds together (renewal, renewals, renewed), with diacritics, digits and case.
VOCABULARY = ("renewal", "renewals", "renewed", "Zürich", "zurich", "café", "plum", "tart", "fig", "2026",
              "Acme", "acme", "discount", "oak", "elm", "running", "runs")  # fmt: skip
TYPES = ("note", "fact")
QUESTIONS = ("renewal", "renewed zurich", "plum tart fig", "acme discount", "running", "café 2026 oak")



def text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(VOCABULARY) for _ in range(n))


async def churn(provider: LocalProvider, stamps: Stamps, rng: random.Random) -> None:
    """Writes of every kind, at random: records of two types with titles, revisions (some changing the
    type), forgetting, erasing some records and dropping a memory."""
    written: list[tuple[str, str]] = []
    for i in range(80):
        memory = (M1, M2, M3)[i % 3]
        title = text(rng, 2) if rng.random() < 0.3 else None
        record = await provider.remember(
            memory, stamps.record(text(rng, rng.randint(1, 12)), title=title, type=rng.choice(TYPES))
        )
        written.append((memory, record.id))
    for memory, record_id in rng.sample(written, 25):
        if rng.random() < 0.5:
            await provider.revise(memory, record_id, stamps.revision(title=text(rng, 1)))
        else:
            await provider.revise(memory, record_id, stamps.revision(type=rng.choice(TYPES)))
    for memory, record_id in rng.sample(written, 12):
        await provider.forget(memory, record_id, PERSON, stamps.tick())
    doomed = rng.sample([w for w in written if w[0] != M3], 10)
    for memory in (M1, M2):
        await provider.erase(memory, [record_id for m, record_id in doomed if m == memory])
    await provider.drop_memory(M3)
    await provider.remember(M3, stamps.record(text(rng, 5)))


def recounted(
    path: Path,
) -> tuple[Counter[tuple[str, str, int]], Counter[tuple[str, str, int]], Counter[tuple[str, str, str, int]]]:
    """The counts made again from the file's current versions: (memory, type, forgets) -> versions and
    -> their total length; (memory, term, type, forgets) -> versions holding the term."""
    sizes: Counter[tuple[str, str, int]] = Counter()
    lengths: Counter[tuple[str, str, int]] = Counter()
    held: Counter[tuple[str, str, str, int]] = Counter()
    db = sqlite3.connect(path)
    try:
        rows = db.execute(
            "SELECT v.memory_id, v.type, v.forgets, v.words, f.title, f.body FROM versions v"
            " JOIN versions_fts f ON f.rowid = v.seq WHERE v.invalidated_at IS NULL"
        ).fetchall()
    finally:
        db.close()
    for memory, type_, forgets, words, title, body in rows:
        sizes[(memory, type_, forgets)] += 1
        lengths[(memory, type_, forgets)] += words
        for term in terms.terms(title, body):
            held[(memory, term, type_, forgets)] += 1
    return sizes, lengths, held


def kept(
    path: Path,
) -> tuple[Counter[tuple[str, str, int]], Counter[tuple[str, str, int]], Counter[tuple[str, str, str, int]]]:
    db = sqlite3.connect(path)
    try:
        size_rows = db.execute("SELECT memory_id, type, forgets, records, words FROM memory_sizes").fetchall()
        term_rows = db.execute("SELECT memory_id, term, type, forgets, records FROM memory_terms").fetchall()
    finally:
        db.close()
    sizes = Counter({(m, t, f): n for m, t, f, n, _ in size_rows if n})
    lengths = Counter({(m, t, f): w for m, t, f, n, w in size_rows if n})
    held = Counter({(m, term, t, f): n for m, term, t, f, n in term_rows if n})
    return sizes, lengths, held


@pytest.mark.parametrize("seed_value", [1, 5])
async def test_the_kept_counts_are_the_counts_of_the_current_versions(
    local: LocalProvider, stamps: Stamps, tmp_path: Path, seed_value: int
) -> None:
    """After writes, revisions, forgetting, erasure and a dropped memory, every kept count (sizes, lengths
    and each term's holders, by memory, type and forgotten or not) is what counting the file's current
    versions gives, and none is negative."""
    await churn(local, stamps, random.Random(seed_value))
    path = tmp_path / "records.sqlite3"
    assert kept(path) == recounted(path)
    db = sqlite3.connect(path)
    try:
        assert db.execute("SELECT count(*) FROM memory_terms WHERE records < 0").fetchone() == (0,)
    finally:
        db.close()


@pytest.mark.parametrize("seed_value", [2, 9])
async def test_recall_ranks_alike_from_the_kept_counts_and_by_counting(
    local: LocalProvider, stamps: Stamps, seed_value: int
) -> None:
    """Every question, by words and by text, active and all, of every type or one, over one memory or
    all: the hits and their scores are the same from the kept counts as from counting at query time (a
    recall `as_of` an instant after every write sees the same versions and counts them itself)."""
    await churn(local, stamps, random.Random(seed_value))
    later = stamps.tick() + timedelta(days=1)
    for words in QUESTIONS:
        for asked in (RecallQuery(query=words, limit=50), RecallQuery(text=words, limit=50)):
            for variant in (asked, replace(asked, include="all"), replace(asked, types=("fact",))):
                for memories in ([M1], [M1, M2, M3]):
                    now = await local.recall(memories, variant)
                    counted = await local.recall(memories, replace(variant, as_of=later))
                    assert [(h.record.id, h.score) for h in now.hits] == [
                        (h.record.id, h.score) for h in counted.hits
                    ], (variant, memories)


def test_a_phrase_stands_for_the_term_the_word_index_makes_of_it(tmp_path: Path) -> None:
    """For words the stemmer folds, with diacritics, digits and case: the versions whose terms hold a
    phrase's term are exactly those the word index matches for the phrase; a phrase the tokenizer makes
    several tokens of, or none, has no term."""
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE idx USING fts5(title, body, tokenize = 'porter unicode61 remove_diacritics 2')")
    rng = random.Random(4)
    texts = [(text(rng, 2), text(rng, 6)) for _ in range(60)]
    db.executemany("INSERT INTO idx (rowid, title, body) VALUES (?, ?, ?)", [(i, *t) for i, t in enumerate(texts)])
    for word in (*VOCABULARY, "RENEWALS", "Cafe"):
        phrase = f'"{word}"'
        term = terms.phrase_term(phrase)
        assert term is not None, word
        matched = {row[0] for row in db.execute("SELECT rowid FROM idx WHERE idx MATCH ?", (phrase,))}
        assert matched == {i for i, t in enumerate(texts) if term in terms.terms(*t)}, word
    assert terms.phrase_term('"two words"') is None
    assert terms.phrase_term('"..."') is None


async def test_an_erased_records_words_leave_no_count_behind(
    local: LocalProvider, stamps: Stamps, tmp_path: Path
) -> None:
    """A word only an erased record (and its revised-away version) held has no row in the kept counts;
    a word other records still hold keeps its count of them."""
    await local.remember(M1, stamps.record("plum tart"))
    doomed = await local.remember(M1, stamps.record("qzxvwsecret plum"))
    await local.revise(M1, doomed.id, stamps.revision(title="qzxvwtitle"))
    await local.erase(M1, [doomed.id])
    db = sqlite3.connect(tmp_path / "records.sqlite3")
    try:
        rows = dict(db.execute("SELECT term, records FROM memory_terms WHERE memory_id = ?", (M1,)).fetchall())
    finally:
        db.close()
    assert rows == {"plum": 1, "tart": 1}


async def test_a_file_from_before_the_kept_counts_gains_them(tmp_path: Path, stamps: Stamps) -> None:
    """A schema-version-3 file (no kept counts) opens with them counted from its versions, and ranks as
    it did; the file says version 4 after."""
    path = tmp_path / "records.sqlite3"
    provider = await LocalProvider.open(path)
    try:
        await churn(provider, stamps, random.Random(3))
        before = [await provider.recall([M1, M2], RecallQuery(query=q, limit=50)) for q in QUESTIONS]
    finally:
        await provider.close()
    db = sqlite3.connect(path)
    try:
        db.executescript("DROP TABLE memory_sizes; DROP TABLE memory_terms; PRAGMA user_version = 3;")
    finally:
        db.close()

    provider = await LocalProvider.open(path)
    try:
        after = [await provider.recall([M1, M2], RecallQuery(query=q, limit=50)) for q in QUESTIONS]
    finally:
        await provider.close()
    assert [[(h.record.id, h.score) for h in a.hits] for a in after] == [
        [(h.record.id, h.score) for h in b.hits] for b in before
    ]
    assert kept(path) == recounted(path)
    db = sqlite3.connect(path)
    try:
        assert db.execute("PRAGMA user_version").fetchone() == (4,)
    finally:
        db.close()
