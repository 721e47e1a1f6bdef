"""Write ids: every write carries one to the vendor, and `find_write` finds what a write left there
(adapters/base.py `FindsWrites`), for each adapter in HARNESSES, plus what each adapter keeps of it.

The gateway looks a write up by its id after a call that failed once it may have reached the vendor, and
before it writes again, so a write that landed is reported written and never made twice.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import aiosqlite

from adapters.base import FindsWrites, Part, Provider
from adapters.local import LocalProvider
from tests.adapters.fake_mem0 import FakeMem0, mem0_provider
from tests.adapters.harnesses import AGENT, M1, M2, PERSON, Stamps


async def test_every_adapter_finds_a_write_by_its_id(provider: Provider, stamps: Stamps) -> None:
    """A remember's write id finds its record in its memory only; an unknown id finds nothing."""
    assert isinstance(provider, FindsWrites)
    made = await provider.remember(M1, stamps.record("Dana prefers email.", write_id="hwri_remember"))
    await provider.remember(M1, stamps.record("unrelated", write_id="hwri_other"))
    found = await provider.find_write(M1, "hwri_remember")
    assert found is not None
    assert (found.id, found.version, found.content) == (made.id, 1, made.content)
    assert await provider.find_write(M2, "hwri_remember") is None
    assert await provider.find_write(M1, "hwri_never_written") is None


async def test_a_revision_and_a_forget_are_found_by_their_write_ids_once_superseded(
    provider: Provider, stamps: Stamps
) -> None:
    """Each version is found by the write that made it, with or without the record id, also after later
    versions superseded it. A provider that keeps no history (history.content "none") has no superseded
    version to find, so there only the latest write, the forget, is looked for."""
    assert isinstance(provider, FindsWrites)
    keeps_history = provider.capabilities().history_content != "none"
    made = await provider.remember(M1, stamps.record("v1", write_id="hwri_v1"))
    await provider.revise(M1, made.id, stamps.revision(content=(Part("text", text="v2"),), write_id="hwri_v2"))
    await provider.forget(M1, made.id, PERSON, stamps.tick(), write_id="hwri_v3")
    for record_id in (made.id, None):
        second = await provider.find_write(M1, "hwri_v2", record_id=record_id)
        third = await provider.find_write(M1, "hwri_v3", record_id=record_id)
        assert third is not None
        assert (third.id, third.version, third.status) == (made.id, 3, "forgotten")
        if keeps_history:
            assert second is not None
            assert (second.id, second.version, second.content[0].text) == (made.id, 2, "v2")
    assert await provider.find_write(M2, "hwri_v2", record_id=made.id) is None


async def test_a_revision_sent_again_with_its_write_id_makes_no_second_version(
    provider: Provider, stamps: Stamps
) -> None:
    """A revise repeated with the write id of the version it already made returns that version and
    appends nothing: a retry of an applied revision is not a new statement."""
    made = await provider.remember(M1, stamps.record("v1"))
    revision = stamps.revision(content=(Part("text", text="v2"),), write_id="hwri_once")
    first = await provider.revise(M1, made.id, revision)
    again = await provider.revise(M1, made.id, revision)
    assert (again.version, again.content) == (first.version, first.content) == (2, (Part("text", text="v2"),))
    # Without history (history.content "none") the current version is all history shows.
    kept = [1, 2] if provider.capabilities().history_content != "none" else [2]
    assert [v.version for v in await provider.history(M1, made.id)] == kept


async def test_the_local_provider_writes_a_remember_once_per_write_id(tmp_path: Path, stamps: Stamps) -> None:
    """On the embedded provider a write id is unique in its memory: a remember repeated with it returns the
    first record instead of a second one."""
    provider = await LocalProvider.open(tmp_path / "records.sqlite3")
    try:
        first = await provider.remember(M1, stamps.record("once", write_id="hwri_same"))
        again = await provider.remember(M1, stamps.record("once", write_id="hwri_same"))
        listing = await provider.list(M1)
    finally:
        await provider.close()
    assert again.id == first.id
    assert [r.id for r in listing.items] == [first.id]


async def test_a_local_file_from_before_write_ids_gains_them_when_opened(tmp_path: Path, stamps: Stamps) -> None:
    """A records file written before write ids existed (no such column) opens, keeps its records, and
    finds the writes made from then on."""
    path = tmp_path / "records.sqlite3"
    async with aiosqlite.connect(path) as db:
        await db.executescript("""
            CREATE TABLE versions (seq INTEGER PRIMARY KEY, memory_id TEXT NOT NULL, record_id TEXT NOT NULL,
                version INTEGER NOT NULL, forgets INTEGER NOT NULL DEFAULT 0, supersedes INTEGER,
                type TEXT NOT NULL, title TEXT, content TEXT NOT NULL, attributes TEXT NOT NULL,
                refs TEXT NOT NULL, follows TEXT, written_by TEXT NOT NULL, written_at TEXT NOT NULL,
                invalidated_at TEXT, valid_from TEXT, valid_to TEXT, UNIQUE (record_id, version));
            CREATE VIRTUAL TABLE versions_fts USING fts5(title, body,
                tokenize = 'porter unicode61 remove_diacritics 2');
            INSERT INTO versions (memory_id, record_id, version, type, content, attributes, refs, written_by,
                written_at) VALUES ('""" + M1 + """', 'hrec_old', 1, 'note', '[{"type":"text","text":"old"}]',
                '{}', '[]', '{"kind":"member","id":"mbr_agent"}', '2026-01-01T00:00:00.000000Z');
        """)
    provider = await LocalProvider.open(path)
    try:
        old = await provider.get(M1, "hrec_old")
        made = await provider.remember(M1, stamps.record("new", write_id="hwri_new"))
        found = await provider.find_write(M1, "hwri_new")
    finally:
        await provider.close()
    assert old.write_id is None and old.content == (Part("text", text="old"),)
    assert found is not None and found.id == made.id


async def test_mem0_carries_the_write_id_in_memfed_s_metadata() -> None:
    """The write id travels to mem0 inside the record's memfed metadata, version by version."""
    fake = FakeMem0("oss")
    async with mem0_provider("oss", fake) as provider:
        made = await provider.remember(M1, Stamps().record("x", write_id="hwri_m0"))
        await provider.forget(M1, made.id, AGENT, datetime(2026, 12, 1, tzinfo=UTC), write_id="hwri_gone")
    [stored] = fake.memories.values()
    meta = stored["metadata"]["memfed"]
    assert meta["current"]["write_id"] == "hwri_gone"
    assert [v["write_id"] for v in meta["past"]] == ["hwri_m0"]
