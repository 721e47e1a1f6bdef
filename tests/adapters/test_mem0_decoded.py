"""mem0 memories decoded once per content: a memory asked again is not decoded again, a changed one is."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from adapters.base import NewRecord, Part, ProviderRejected, RecallQuery, Writer
from adapters.mem0 import _records as records
from tests.adapters.fake_mem0 import FakeMem0, mem0_provider

KEY = "m0-SECRET-test-key-7f3a9c"
AGENT = Writer(kind="member", id="mbr_agent", type="agent")
MEM = "hmem_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"


def note(text: str, title: str | None = None) -> NewRecord:
    return NewRecord(type="note", title=title, content=(Part(type="text", text=text),), written_by=AGENT,
                     written_at=datetime(2026, 10, 1, 9, 0, tzinfo=UTC))


@pytest.mark.parametrize("variant", ["platform", "oss"])
async def test_a_memory_found_again_is_not_decoded_again(variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two recalls finding the same records decode them on the first only, and answer the same records."""
    fake = FakeMem0(variant, KEY)  # type: ignore[arg-type]
    decoded: list[str] = []
    real = records.decode

    def counting(item: object, *, record_id: str, memory_id: str) -> records.Stored:
        decoded.append(record_id)
        return real(item, record_id=record_id, memory_id=memory_id)  # type: ignore[arg-type]

    monkeypatch.setattr(records, "decode", counting)
    async with mem0_provider(variant, fake) as mem0:  # type: ignore[arg-type]
        for n in range(3):
            await mem0.remember(MEM, note(f"renewal terms {n}"))
        query = RecallQuery(query="renewal terms", limit=5)
        first = await mem0.recall([MEM], query)
        after_first = len(decoded)
        second = await mem0.recall([MEM], query)
    assert len(first.hits) == 3 and after_first >= 3
    assert len(decoded) == after_first
    assert [h.record for h in second.hits] == [h.record for h in first.hits]


@pytest.mark.parametrize("variant", ["platform", "oss"])
async def test_a_memory_changed_at_mem0_after_it_was_read_reads_changed(variant: str) -> None:
    """An edit of the text or of memfed's metadata at mem0, after a read, shows on the next read."""
    fake = FakeMem0(variant, KEY)  # type: ignore[arg-type]
    async with mem0_provider(variant, fake) as mem0:  # type: ignore[arg-type]
        record = await mem0.remember(MEM, note("Acme renews in March", title="Acme"))
        assert (await mem0.get(MEM, record.id)).title == "Acme"
        stored = fake.memories[record.id.removeprefix("hrec_")]
        stored["metadata"][records.NAMESPACE]["current"]["title"] = "Acme Corp"
        assert (await mem0.get(MEM, record.id)).title == "Acme Corp"
        stored["memory"] = "Acme renews in May"
        changed = await mem0.get(MEM, record.id)
    assert (changed.version, changed.written_by.kind, changed.content[0].text) == (2, "provider", "Acme renews in May")


async def test_the_entities_of_a_recalls_memories_are_worked_out_once() -> None:
    """Two recalls over the same few hundred memories look up each memory's entity on the first only; a
    memory id mem0 cannot hold is still refused, every time."""
    fake = FakeMem0("platform", KEY)
    memories = [f"hmem_{n:032x}" for n in range(300)]
    async with mem0_provider("platform", fake) as mem0:
        await mem0.remember(memories[7], note("renewal terms"))
        looked: list[str] = []
        real = mem0._entity

        def counting(memory_id: str) -> str:
            looked.append(memory_id)
            return real(memory_id)

        mem0._entity = counting
        query = RecallQuery(query="renewal terms", limit=5)
        first = await mem0.recall(memories, query)
        after_first = len(looked)
        second = await mem0.recall(memories, query)
        assert after_first >= len(memories)
        assert len(looked) - after_first < 10  # the hits' own checks, not one per memory
        assert [h.record for h in second.hits] == [h.record for h in first.hits] and len(first.hits) == 1
        for _ in range(2):
            with pytest.raises(ProviderRejected):
                await mem0.recall([*memories, "hmem_not a memory"], query)
