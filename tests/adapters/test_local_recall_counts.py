"""The embedded provider's recall reads how often each asked word occurs in a version back out of FTS5's
bm25 (adapters/local/_recall_sql.py) instead of re-reading the version's text. These tests pin that the
order is still bm25 over each memory's own records with the exact counts, computed here in Python from
records whose words are known: counts up to dozens, words in the title (weighed double), words in most
of the file (where FTS5's own weight of the word is its floor, a millionth), several memories, superseded
and forgotten versions, and `text` (every word) as well as `query` (any word)."""

from __future__ import annotations

import math
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

import pytest

from adapters.base import RecallQuery
from adapters.local import LocalProvider
from tests.adapters.harnesses import M1, M2, M3, PERSON, Stamps

# Words the index keeps as they are (the porter stemmer leaves them whole), so counting them here counts
# what FTS5 counts. `pie` ends up in most versions of the file.
ASKED_WORDS = ("pie", "plum", "tart", "fig", "jam")
FILLER = ("oak", "elm", "ash", "yew")


@dataclass
class Kept:
    record_id: str
    memory_id: str
    written_at: str
    title: list[str]
    body: list[str]
    live: bool = True



def expected(kept: Sequence[Kept], memory_id: str, asked: Sequence[str], every: bool) -> list[str]:
    """Per-memory bm25 (k1 1.2, b 0.75, title weighed 2, body 1, FTS5's idf with its floor) over the live
    versions of `memory_id`, best first; ties newest first, then the higher id."""
    corpus = [k for k in kept if k.live and k.memory_id == memory_id]
    n = len(corpus)
    avgdl = sum(len(k.title) + len(k.body) for k in corpus) / n
    hits = {w: sum(1 for k in corpus if w in k.title or w in k.body) for w in asked}
    idf = {w: max(math.log((n - h + 0.5) / (h + 0.5)), 0.0) or 1e-6 for w, h in hits.items()}
    scored: list[tuple[float, str, str]] = []
    for k in corpus:
        title, body = Counter(k.title), Counter(k.body)
        found = [w for w in asked if title[w] or body[w]]
        if not found or (every and len(found) < len(asked)):
            continue
        dl = len(k.title) + len(k.body)
        score = 0.0
        for w in found:
            tf = 2.0 * title[w] + body[w]
            score += idf[w] * (tf * 2.2) / (tf + 1.2 * (0.25 + 0.75 * dl / avgdl))
        scored.append((score, k.written_at, k.record_id))
    scored.sort(key=lambda s: (s[1], s[2]), reverse=True)
    scored.sort(key=lambda s: -s[0])
    return [record_id for _, _, record_id in scored]


async def seed(provider: LocalProvider, stamps: Stamps, rng: random.Random) -> list[Kept]:
    kept: list[Kept] = []
    for i in range(90):
        memory_id = (M1, M2, M3)[i % 3]
        body = [rng.choice(FILLER) for _ in range(rng.randint(1, 60))]
        if rng.random() < 0.8:
            body += ["pie"] * rng.randint(1, 3)
        for word in rng.sample(ASKED_WORDS[1:], rng.randint(0, 3)):
            body += [word] * rng.choice((1, 1, 2, 5, 17, 40))
        rng.shuffle(body)
        title = [rng.choice(ASKED_WORDS), rng.choice(FILLER)] * rng.randint(1, 3) if rng.random() < 0.3 else []
        written = await provider.remember(
            memory_id, stamps.record(" ".join(body), title=" ".join(title) if title else None)
        )
        kept.append(Kept(written.id, memory_id, written.time.written_at.isoformat(), title, body))
    for k in kept[::7]:  # superseded: the revision's title counts, the first version's no longer does
        revised = await provider.revise(k.memory_id, k.record_id, stamps.revision(title="plum tart"))
        k.title, k.written_at = ["plum", "tart"], revised.time.written_at.isoformat()
    for k in kept[3::11]:
        await provider.forget(k.memory_id, k.record_id, PERSON, stamps.tick())
        k.live = False
    return kept


QUESTIONS = [("pie", False), ("plum tart", False), ("fig jam pie", False), ("plum", True), ("pie tart", True),
             ("fig jam", True), ("jam pie plum", True)]


@pytest.mark.parametrize("seed_value", [3, 11])
async def test_each_memory_ranks_by_bm25_with_the_exact_counts_of_each_word(
    local: LocalProvider, stamps: Stamps, seed_value: int
) -> None:
    """For every question, asked of each memory alone and of all three at once, every memory's records
    come in the order bm25 over that memory gives with the words' exact counts."""
    kept = await seed(local, stamps, random.Random(seed_value))
    for words, every in QUESTIONS:
        asked = RecallQuery(text=words, limit=100) if every else RecallQuery(query=words, limit=100)
        together = await local.recall([M1, M2, M3], asked)
        for memory_id in (M1, M2, M3):
            want = expected(kept, memory_id, words.split(), every)
            alone = await local.recall([memory_id], asked)
            assert [hit.record.id for hit in alone.hits] == want, (words, memory_id)
            assert [hit.record.id for hit in together.hits if hit.record.memory_id == memory_id] == want
