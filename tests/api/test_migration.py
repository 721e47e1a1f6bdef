"""Provider swap (issue item 6): copy every record to another provider, switch, old ids keep working."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from adapters.base import NewRecord, Part, Writer
from gateway.state.migration_schema import migration_records
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.migration_data import aliases, comparable, export_lines, held_by, mem0_gateway, migrate, seed


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway with the default `local` provider and a second local one named `archive`."""
    async with running_gateway(make_config(tmp_path, providers={"archive": {"adapter": "local"}})) as gateway:
        yield gateway


# --------------------------------------------------------------------------- the swap


async def test_migration_copies_every_version_and_switches_the_binding(gw: Gateway) -> None:
    """After a migration the memory is on the target; its export equals the one before, version for
    version (writers, times, statuses, files, forgotten records), with references on the new ids."""
    seeded = await seed(gw)
    before = await export_lines(gw.admin, seeded.memory_id)
    answer = await migrate(gw, seeded.memory_id)
    assert answer.status_code == 200, answer.text
    report = answer.json()
    assert report["object"] == "memory.migration"
    assert report["status"] == "completed"
    assert report["copied"] == 4
    assert report["source_kept"] is True
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}")).json()["provider"] == "archive"
    moved = await aliases(gw, seeded.memory_id)
    assert set(moved) == set(seeded.ids)
    after = await export_lines(gw.admin, seeded.memory_id)
    back = {new: old for old, new in moved.items()}
    assert comparable(after, id_map=back) == comparable(before)
    assert len(await held_by(gw, "archive", seeded.memory_id)) == 4
    # The source keeps its copy; nothing was deleted there.
    assert len(await held_by(gw, "local", seeded.memory_id)) == 4


async def test_old_record_ids_keep_working_through_the_memory(gw: Gateway) -> None:
    """get, history, content, revise and forget on an id from before the swap reach the copy."""
    seeded = await seed(gw)
    assert (await migrate(gw, seeded.memory_id)).status_code == 200
    mid, r = seeded.memory_id, seeded.records
    new = await aliases(gw, mid)

    got = await gw.admin.get(f"/v1/memories/{mid}/records/{r['dana']}")
    assert got.status_code == 200
    assert got.json()["id"] == new[r["dana"]]
    assert got.json()["title"] == "Dana Reyes"
    history = (await gw.admin.get(f"/v1/memories/{mid}/records/{r['dana']}/history")).json()["data"]
    assert [v["version"] for v in history] == [1, 2, 3]
    content = await gw.admin.get(f"/v1/memories/{mid}/records/{r['logo']}/content/1")
    assert content.status_code == 200
    assert content.content == b"\x89PNG-bytes"
    revised = await seeded.agent.patch(f"/v1/memories/{mid}/records/{r['fact']}", json={"title": "Approved"})
    assert revised.status_code == 200, revised.text
    assert revised.json()["version"] == 3
    forgotten = await gw.admin.delete(f"/v1/memories/{mid}/records/{r['logo']}")
    assert forgotten.status_code == 200
    assert forgotten.json()["status"] == "forgotten"
    # The change went to the new provider, not to the old copy.
    assert (await gw.services.providers["archive"].provider.get(mid, new[r["fact"]])).title == "Approved"
    assert (await gw.services.providers["local"].provider.get(mid, r["fact"])).title != "Approved"


async def test_references_are_rewritten_to_the_new_ids(gw: Gateway) -> None:
    """A reference between two moved records names the target's new id, so the graph stays whole."""
    seeded = await seed(gw)
    await migrate(gw, seeded.memory_id)
    new = await aliases(gw, seeded.memory_id)
    fact = (await gw.admin.get(f"/v1/memories/{seeded.memory_id}/records/{new[seeded.records['fact']]}")).json()
    assert [(ref["record_id"], ref["rel"]) for ref in fact["references"]] == [
        (new[seeded.records["dana"]], "subject"), (new[seeded.records["logo"]], "derived_from")]
    graph = await gw.admin.post(f"/v1/memories/{seeded.memory_id}/graph",
                                json={"around": new[seeded.records["fact"]], "hops": 1})
    assert graph.status_code == 200, graph.text
    nodes = {n["record"]["id"] for n in graph.json()["nodes"]}
    assert {new[seeded.records["dana"]], new[seeded.records["logo"]]} <= nodes


async def test_recall_after_the_swap_answers_from_the_new_provider(gw: Gateway) -> None:
    """Recall reads the target: it finds the copies by their new ids, and a record written to the old
    provider's leftover copy after the swap is not found."""
    seeded = await seed(gw)
    await migrate(gw, seeded.memory_id)
    new = await aliases(gw, seeded.memory_id)
    stray = NewRecord(type="fact", content=(Part("text", text="procurement stray"),),
                      written_by=Writer("member", "mbr_x", "human"), written_at=datetime.now(UTC))
    await gw.services.providers["local"].provider.remember(seeded.memory_id, stray)
    answer = await gw.admin.post(f"/v1/memories/{seeded.memory_id}/recall", json={"text": "procurement"})
    assert answer.status_code == 200, answer.text
    ids = [hit["record"]["id"] for hit in answer.json()["results"]]
    assert ids == [new[seeded.records["dana"]]]


async def test_only_an_admin_may_migrate(gw: Gateway) -> None:
    """A member who holds every privilege on the memory is still refused: moving records is an
    operator's act. Unknown memories are 404 and unknown providers 422, and nothing changes."""
    seeded = await seed(gw)
    refused = await seeded.agent.post(f"/v1/memories/{seeded.memory_id}/migrate", json={"to": "archive"})
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "memfed_admin_required"
    missing = await migrate(gw, "hmem_" + "0" * 32)
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "memory_not_found"
    unknown = await migrate(gw, seeded.memory_id, to="nowhere")
    assert unknown.status_code == 422
    assert unknown.json()["error"]["param"] == "to"
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}")).json()["provider"] == "local"


async def test_a_memory_already_on_the_target_is_left_alone(gw: Gateway) -> None:
    """Migrating to the provider a memory is on copies nothing and completes."""
    seeded = await seed(gw)
    answer = await migrate(gw, seeded.memory_id, to="local")
    assert answer.status_code == 200
    assert answer.json()["memories"] == []
    assert await aliases(gw, seeded.memory_id) == {}


# --------------------------------------------------------------------------- shapes of a swap


async def test_a_round_trip_clears_the_stale_copy_and_every_old_id_still_resolves(gw: Gateway) -> None:
    """local -> archive -> local: the first swap's leftover at local is cleared before the copy back,
    so no stale record shadows an alias; ids from both earlier lives resolve to the current record."""
    seeded = await seed(gw)
    before = await export_lines(gw.admin, seeded.memory_id)
    assert (await migrate(gw, seeded.memory_id)).status_code == 200
    middle = await aliases(gw, seeded.memory_id)
    revised = await gw.admin.patch(f"/v1/memories/{seeded.memory_id}/records/{seeded.records['fact']}",
                                   json={"title": "Revised on archive"})
    assert revised.status_code == 200
    back = await migrate(gw, seeded.memory_id, to="local")
    assert back.status_code == 200, back.text
    assert back.json()["memories"][0]["dropped_leftovers"] == 4
    final = await aliases(gw, seeded.memory_id)
    assert len(await held_by(gw, "local", seeded.memory_id)) == 4
    for name, first_id in seeded.records.items():
        for old in (first_id, middle[first_id]):
            got = await gw.admin.get(f"/v1/memories/{seeded.memory_id}/records/{old}")
            assert got.status_code == 200, (name, got.text)
            assert got.json()["id"] == final[first_id]
    fact = (await gw.admin.get(f"/v1/memories/{seeded.memory_id}/records/{seeded.records['fact']}")).json()
    assert fact["title"] == "Revised on archive"
    after = comparable(await export_lines(gw.admin, seeded.memory_id),
                       id_map={new: old for old, new in final.items() if old in seeded.records.values()})
    original = comparable(before)
    assert {k: v for k, v in after.items() if k != seeded.records["fact"]} == \
        {k: v for k, v in original.items() if k != seeded.records["fact"]}
    # The fact gained a version on archive, which closed its previous one; all else is as it was.
    fact_after, fact_before = after[seeded.records["fact"]], original[seeded.records["fact"]]
    assert len(fact_after) == len(fact_before) + 1
    assert fact_after[:-2] == fact_before[:-1]
    assert {**fact_after[-2], "time": {}, "status": ""} == {**fact_before[-1], "time": {}, "status": ""}
    assert fact_after[-1]["title"] == "Revised on archive"


async def test_recursive_moves_the_subtree_and_rewrites_references_across_it(gw: Gateway) -> None:
    """With recursive every memory below is copied and switched; a reference from a child's record to
    the parent's record names the parent record's new id."""
    parent = await seed(gw, "Company")
    child = await gw.child(gw.admin, parent.memory_id, "Acme")
    made = await gw.admin.post(f"/v1/memories/{child['id']}/records", json={
        "type": "fact", "content": "Acme's buyer is Dana.",
        "references": [{"memory_id": parent.memory_id, "record_id": parent.records["dana"], "rel": "about"}]})
    assert made.status_code == 201
    answer = await migrate(gw, parent.memory_id, recursive=True)
    assert answer.status_code == 200, answer.text
    assert sorted(m["id"] for m in answer.json()["memories"]) == sorted([parent.memory_id, child["id"]])
    for memory_id in (parent.memory_id, child["id"]):
        assert (await gw.admin.get(f"/v1/memories/{memory_id}")).json()["provider"] == "archive"
    new_dana = (await aliases(gw, parent.memory_id))[parent.records["dana"]]
    new_fact = (await aliases(gw, child["id"]))[made.json()["id"]]
    fact = (await gw.admin.get(f"/v1/memories/{child['id']}/records/{new_fact}")).json()
    assert fact["references"][0]["record_id"] == new_dana


async def test_purge_source_drops_the_old_copy_after_the_switch(gw: Gateway) -> None:
    """purge_source leaves nothing of the memory at the old provider once it is switched."""
    seeded = await seed(gw)
    answer = await migrate(gw, seeded.memory_id, purge_source=True)
    assert answer.status_code == 200
    assert answer.json()["source_kept"] is False
    assert await held_by(gw, "local", seeded.memory_id) == []
    got = await gw.admin.get(f"/v1/memories/{seeded.memory_id}/records/{seeded.records['dana']}")
    assert got.status_code == 200


async def test_the_log_records_each_copied_record_once(gw: Gateway) -> None:
    """The per-migration log has one row per source record, naming its copy."""
    seeded = await seed(gw)
    report = (await migrate(gw, seeded.memory_id)).json()
    rows = await gw.services.store.rows.fetch_all(migration_records, migration_id=report["id"])
    assert sorted(r.old_id for r in rows) == sorted(seeded.ids)
    assert {r.new_id for r in rows} == set((await aliases(gw, seeded.memory_id)).values())


# --------------------------------------------------------------------------- through mem0


@pytest.fixture
async def with_mem0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, FakeMem0]]:
    """The default local provider and `m0`, a mem0 OSS server faked at the HTTP layer."""
    async with mem0_gateway(tmp_path, monkeypatch) as pair:
        yield pair


async def test_a_round_trip_through_mem0_keeps_every_version(with_mem0: tuple[Gateway, FakeMem0]) -> None:
    """local -> mem0 -> local: mem0 declares revise and forget (emulated) and keeps versions, so the
    memory comes back with every version, writer, time, file part and reference as it left."""
    gw, fake = with_mem0
    seeded = await seed(gw)
    before = await export_lines(gw.admin, seeded.memory_id)
    there = await migrate(gw, seeded.memory_id, to="m0")
    assert there.status_code == 200, there.text
    on_mem0 = await aliases(gw, seeded.memory_id)
    assert comparable(await export_lines(gw.admin, seeded.memory_id),
                      id_map={v: k for k, v in on_mem0.items()}) == comparable(before)
    assert len([m for m in fake.memories.values() if m["user_id"].endswith(seeded.memory_id)]) == 4
    back = await migrate(gw, seeded.memory_id, to="local")
    assert back.status_code == 200, back.text
    home = await aliases(gw, seeded.memory_id)
    assert comparable(await export_lines(gw.admin, seeded.memory_id),
                      id_map={v: k for k, v in home.items() if k in seeded.ids}) == comparable(before)
    got = await gw.admin.get(f"/v1/memories/{seeded.memory_id}/records/{on_mem0[seeded.records['dana']]}")
    assert got.json()["id"] == home[seeded.records["dana"]]


# --------------------------------------------------------------------------- the operator's command


def test_cli_migrate_shows_progress_and_switches(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """`memfed migrate` on a stopped gateway: a progress bar on stderr, the report on stdout, the
    binding switched in the state store; an unknown provider exits 1 and changes nothing."""
    import asyncio

    from gateway.cli import main
    from gateway.server.app import open_services

    config = make_config(tmp_path, providers={"archive": {"adapter": "local"}})

    async def setup() -> str:
        async with running_gateway(config) as gw:
            return (await seed(gw)).memory_id

    async def provider_of(memory_id: str) -> str:
        services = await open_services(config)
        try:
            node = services.store.tree.get(memory_id)
            assert node is not None
            return node.provider
        finally:
            await services.close()

    memory_id = asyncio.run(setup())
    toml = tmp_path / "memfed.toml"
    toml.write_text(f'[server]\ndata_dir = "{(tmp_path / "data").as_posix()}"\n\n'
                    '[providers.archive]\nadapter = "local"\n')
    capsys.readouterr()
    assert main(["migrate", memory_id, "--to", "nowhere", "--config", str(toml)]) == 1
    assert "nowhere" in capsys.readouterr().err
    assert asyncio.run(provider_of(memory_id)) == "local"

    assert main(["migrate", memory_id, "--to", "archive", "--config", str(toml)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["status"] == "completed"
    assert "copying" in out.err
    assert "4/4" in out.err
    assert f"{memory_id} is now on archive" in out.err
    assert asyncio.run(provider_of(memory_id)) == "archive"


async def test_an_old_id_erases_the_record_it_now_names(tmp_path) -> None:
    """After a swap, erase with a pre-migration id erases the copy and answers with the id that was given."""
    from tests.api._gateway import make_config, running_gateway

    async with running_gateway(make_config(tmp_path, providers={"archive": {"adapter": "local"}})) as gw:
        root = await gw.root()
        old = (await gw.admin.post(f"/v1/memories/{root['id']}/records", json={"content": "to be erased"})).json()
        moved = await gw.admin.post(f"/v1/memories/{root['id']}/migrate", json={"to": "archive"})
        assert moved.status_code == 200, moved.text
        erased = (await gw.admin.post(f"/v1/memories/{root['id']}/erase", json={"record_ids": [old["id"]]})).json()
        assert erased["erased"] == [old["id"]]
        assert (await gw.admin.get(f"/v1/memories/{root['id']}/records/{old['id']}")).status_code == 404
        archive = gw.services.providers["archive"].provider
        assert (await archive.list(root["id"], include="all")).items == ()


async def test_a_swaps_progress_is_readable_while_it_runs_and_after(gw: Gateway) -> None:
    """GET .../migrate answers 404 before any swap; while one copies it says `running` with records done
    of the pass's total; afterwards `completed`, every record done, with the swap's report. A second swap
    started meanwhile is refused as busy and leaves the first one's progress on the board."""
    import asyncio

    seeded = await seed(gw)
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}/migrate")).status_code == 404
    archive = gw.services.providers.get("archive")
    assert archive is not None
    original, gate, first_written = archive.provider.remember, asyncio.Event(), asyncio.Event()

    async def held_remember(*args: Any, **kwargs: Any) -> Any:
        result = await original(*args, **kwargs)
        first_written.set()
        await gate.wait()
        return result

    archive.provider.remember = held_remember  # type: ignore[method-assign]
    running = asyncio.create_task(migrate(gw, seeded.memory_id))
    await asyncio.wait_for(first_written.wait(), 10)
    during = (await gw.admin.get(f"/v1/memories/{seeded.memory_id}/migrate")).json()
    assert during["state"] == "running" and during["to"] == "archive"
    assert during["total"] == 4 and 0 <= during["done"] < during["total"]
    busy = await migrate(gw, seeded.memory_id)
    assert busy.status_code == 409
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}/migrate")).json()["state"] == "running"
    gate.set()
    assert (await running).status_code == 200
    after = (await gw.admin.get(f"/v1/memories/{seeded.memory_id}/migrate")).json()
    assert after["state"] == "completed" and after["done"] == after["total"]
    assert after["report"]["copied"] == 4 and after["passes"] >= 1
    _, stranger = await gw.member("stranger")
    assert (await stranger.get(f"/v1/memories/{seeded.memory_id}/migrate")).status_code == 403
