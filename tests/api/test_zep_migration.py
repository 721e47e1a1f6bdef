"""Provider swaps and export between Zep and the embedded provider, and between Zep and mem0, both ways:
every version, writer, valid time and reference survives; what Zep derived travels as the provider's."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api.migration_data import aliases, comparable, export_lines, migrate, seed
from tests.api.zep_data import Three, three_providers


@pytest.fixture
async def three(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[Three]:
    async with three_providers(tmp_path, monkeypatch) as made:
        yield made


def original_ids(alias_rows: dict[str, str], ids: list[str]) -> dict[str, str]:
    """new id -> original id, following chains of aliases from the seeded ids."""
    out = {}
    for first in ids:
        current = first
        while current in alias_rows:
            current = alias_rows[current]
            out[current] = first
    return out


async def round_trip(three: Three, there: str, back: str) -> None:
    gw = three.gw
    seeded = await seed(gw)
    if back != "local":
        moved = await migrate(gw, seeded.memory_id, to=back)
        assert moved.status_code == 200, moved.text
    before = await export_lines(gw.admin, seeded.memory_id)
    start = original_ids(await aliases(gw, seeded.memory_id), seeded.ids)
    for step in (there, back):
        moved = await migrate(gw, seeded.memory_id, to=step)
        assert moved.status_code == 200, moved.text
        now = original_ids(await aliases(gw, seeded.memory_id), seeded.ids)
        assert comparable(await export_lines(gw.admin, seeded.memory_id), id_map=now) == comparable(
            before, id_map=start)


async def test_local_to_zep_and_back_keeps_every_version(three: Three) -> None:
    """local -> zep -> local: every version of every record (an entity revised twice, a fact naming it,
    a note with a file part and an extension part, a forgotten fact) with writer, times and references."""
    await round_trip(three, "zep", "local")
    assert [e for e in three.zep.edges.values() if e["attributes"]]  # it was at Zep on the way


async def test_mem0_to_zep_and_back_keeps_every_version(three: Three) -> None:
    await round_trip(three, "zep", "m0")


async def test_zep_to_mem0_and_back_keeps_every_version(three: Three) -> None:
    await round_trip(three, "m0", "zep")


async def test_zep_to_local_and_back_keeps_every_version(three: Three) -> None:
    await round_trip(three, "local", "zep")


async def test_what_zep_derived_is_exported_and_moved_as_the_providers_never_as_stated(three: Three) -> None:
    """A fact Zep derived from an episode is exported written by the provider; moved to the embedded
    provider it stays the provider's (not re-stated by a member), and moving back keeps it so."""
    gw = three.gw
    memory = await gw.root("Support", provider="zep")
    observed = await gw.admin.post(f"/v1/memories/{memory['id']}/observe", json={"content": "Dana moved to Berlin."})
    assert observed.status_code == 202, observed.text
    three.zep.process()
    lines = await export_lines(gw.admin, memory["id"])
    derived = [line for line in lines if line["versions"][0]["written_by"]["kind"] == "provider"]
    assert {line["versions"][0]["type"] for line in derived} == {"fact", "entity"}
    assert all(line["versions"][0]["written_by"]["id"] == "zep" for line in derived)

    for step in ("local", "zep"):
        moved = await migrate(gw, memory["id"], to=step)
        assert moved.status_code == 200, moved.text
        after = await export_lines(gw.admin, memory["id"])
        writers = sorted((line["versions"][0]["type"], line["versions"][0]["written_by"]["kind"]) for line in after)
        assert writers == sorted((line["versions"][0]["type"], line["versions"][0]["written_by"]["kind"])
                                 for line in lines)
