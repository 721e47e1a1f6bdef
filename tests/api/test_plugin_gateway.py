"""The gateway over a memory-provider plugin (the fake plugin, a real subprocess) beside the embedded
provider and mem0 OSS (faked at the HTTP layer): one recall from the root ranking every provider's
records, the plugin's capability document, and provider swaps both ways through migrate and
export/import."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from gateway.base.config import ConfigError
from tests.adapters.fake_mem0 import FakeMem0
from tests.adapters.fake_plugin import plugin_options
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.migration_data import aliases, comparable, export_lines, migrate, seed

KEY_ENV = "MEMFED_TEST_MEM0_KEY"


@pytest.fixture
async def gw(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, FakeMem0]]:
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY_ENV, fake.api_key or "")
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    config = make_config(tmp_path, providers={
        "m0": {"adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY_ENV},
        "notes": {"adapter": "plugin", **plugin_options(plugin_dir)},
    })
    async with running_gateway(config, http_client=fake.client()) as gateway:
        yield gateway, fake


async def write(gw: Gateway, memory_id: str, body: dict[str, Any]) -> str:
    made = await gw.admin.post(f"/v1/memories/{memory_id}/records", json=body)
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def test_a_recall_from_the_root_ranks_local_mem0_and_plugin_records_naming_each_memory(
    gw: tuple[Gateway, FakeMem0],
) -> None:
    """Three branches on three providers; one recall at the root with `query` and `text` gives one
    ranking whose results each name their memory. mem0 answers the meaning, the plugin the words (its
    own ranking, emulated), and what each could not do is named for it in degraded."""
    gateway, _ = gw
    root = await gateway.root("Company")
    branches = {name: await gateway.child(gateway.admin, root["id"], f"On {name}", provider=name)
                for name in ("local", "m0", "notes")}
    written = {name: await write(gateway, b["id"], {"type": "fact", "content": f"renewal terms kept on {name}"})
               for name, b in branches.items()}

    answer = await gateway.admin.post(f"/v1/memories/{root['id']}/recall",
                                      json={"query": "renewal terms", "text": "renewal terms", "limit": 10})
    assert answer.status_code == 200, answer.text
    body = answer.json()
    by_memory = {r["memory"]["id"]: r["record"]["id"] for r in body["results"]}
    assert by_memory == {branches[n]["id"]: written[n] for n in branches}
    assert all(0 <= r["score"] <= 1 for r in body["results"])
    assert any("notes" in d and "query" in d for d in body["degraded"]), body["degraded"]


async def test_the_plugins_capability_document_says_what_it_cannot_do(gw: tuple[Gateway, FakeMem0]) -> None:
    """Discovery shows the plugin provider: filtered isolation, no history, text emulated, erase reported."""
    gateway, _ = gw
    listed = (await gateway.admin.get("/v1/memories/providers")).json()
    doc = next(p for p in listed["data"] if p["id"] == "notes")
    assert doc["isolation"] == "enforced_filter"
    assert doc["history"] == {"content": "none", "structure": "none"}
    assert doc["recall"]["signals"] == ["text"] and doc["recall"]["emulated"] == ["text"]
    assert doc["forget"] == "emulated" and doc["erase"] == {"unreachable": "reported"}
    assert doc["x.memfed"]["adapter"] == "plugin"


async def _text_memory(gateway: Gateway, provider: str) -> tuple[str, list[str]]:
    """A memory of single-version text records (what a plugin can hold), one referencing another."""
    memory = await gateway.root(f"Notes on {provider}", provider=provider)
    mid = memory["id"]
    first = await write(gateway, mid, {"type": "fact", "title": "Renewal", "content": "Acme renews in March.",
                                       "attributes": {"account": "acme"}})
    second = await write(gateway, mid, {"type": "note", "content": "Ask Dana before any discount.",
                                        "references": [{"memory_id": mid, "record_id": first, "rel": "about"}]})
    return mid, [first, second]


@pytest.mark.parametrize(("start", "there"), [("local", "notes"), ("notes", "local"), ("m0", "notes"),
                                               ("notes", "m0")])
async def test_a_memory_moves_between_a_plugin_and_another_provider_both_ways(
    gw: tuple[Gateway, FakeMem0], start: str, there: str
) -> None:
    """migrate copies every record to the other provider and back, writers, times, attributes and
    references as they were, and every old id still resolves through the memory."""
    gateway, _ = gw
    mid, ids = await _text_memory(gateway, start)
    before = comparable(await export_lines(gateway.admin, mid))

    moved = await migrate(gateway, mid, to=there)
    assert moved.status_code == 200, moved.text
    assert (await gateway.admin.get(f"/v1/memories/{mid}")).json()["provider"] == there
    new = await aliases(gateway, mid)
    assert comparable(await export_lines(gateway.admin, mid), id_map={v: k for k, v in new.items()}) == before
    for old in ids:
        assert (await gateway.admin.get(f"/v1/memories/{mid}/records/{old}")).json()["id"] == new[old]

    back = await migrate(gateway, mid, to=start)
    assert back.status_code == 200, back.text
    home = await aliases(gateway, mid)
    assert comparable(await export_lines(gateway.admin, mid),
                      id_map={v: k for k, v in home.items() if k in ids}) == before


async def test_a_memory_with_history_or_files_is_not_moved_onto_a_plugin_in_silence(
    gw: tuple[Gateway, FakeMem0],
) -> None:
    """A plugin keeps no versions and no files: moving a memory that has them is refused, naming why,
    and the memory stays where it was."""
    gateway, _ = gw
    seeded = await seed(gateway)
    refused = await migrate(gateway, seeded.memory_id, to="notes")
    assert refused.status_code == 422, refused.text
    error = refused.json()["error"]
    assert error["code"] == "memory_unsupported" and "keeps none of history" in error["message"]
    assert error["detail"]["migration"]["copied"] == 0
    assert (await gateway.admin.get(f"/v1/memories/{seeded.memory_id}")).json()["provider"] == "local"


async def test_export_from_a_plugin_memory_imports_into_a_local_one(gw: tuple[Gateway, FakeMem0]) -> None:
    """export/import: the lines a plugin memory exports are imported into a memory on the embedded
    provider with the same records."""
    gateway, _ = gw
    mid, _ = await _text_memory(gateway, "notes")
    lines = await export_lines(gateway.admin, mid)
    target = await gateway.root("Imported", provider="local")
    body = "".join(json.dumps(line) + "\n" for line in lines).encode()
    imported = await gateway.admin.post(f"/v1/memories/{target['id']}/import", content=body,
                                        headers={"content-type": "application/x-ndjson"})
    assert imported.status_code == 200, imported.text
    after = await export_lines(gateway.admin, target["id"])
    assert sorted(v["versions"][0]["content"][0]["text"] for v in after) == sorted(
        v["versions"][0]["content"][0]["text"] for v in lines)


# --------------------------------------------------------------------------- prime and ratification


async def test_prime_of_a_plugin_memory_places_what_the_plugins_own_recall_chose(
    gw: tuple[Gateway, FakeMem0],
) -> None:
    """Prime asks the plugin's budgeted Recall (no question, as a kernel asks at context assembly), keeps
    this memory's records, and renders them inside the fence; another memory's records stay out."""
    gateway, _ = gw
    mine = await gateway.root("Plugin notes", provider="notes")
    other = await gateway.root("Other notes", provider="notes")
    await write(gateway, mine["id"], {"type": "fact", "content": "Acme renews in March."})
    await write(gateway, other["id"], {"type": "fact", "content": "Globex is out of scope."})

    primed = await gateway.admin.get(f"/v1/memories/{mine['id']}/prime", params={"budget": "1000"})
    assert primed.status_code == 200, primed.text
    text = primed.json()["text"]
    assert "Acme renews in March." in text
    assert "Globex" not in text


@pytest.fixture
async def ratifying(tmp_path: Path) -> AsyncIterator[Gateway]:
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    config = make_config(tmp_path, providers={
        "drafts": {"adapter": "plugin", **plugin_options(plugin_dir, "--ratification", "--pending")}})
    async with running_gateway(config) as gateway:
        yield gateway


async def test_drafts_are_marked_kept_out_of_recall_and_approved_or_rejected_by_writers(
    ratifying: Gateway,
) -> None:
    """A plugin that ratifies answers every write as a draft: the record says so in
    attributes["x.ratification"], is listed but never recalled; a reader cannot approve it (403), a writer
    can, and it is then recalled; a rejected draft is gone."""
    gateway = ratifying
    memory = await gateway.root("Drafts", provider="drafts")
    mid = memory["id"]
    kept = await write(gateway, mid, {"type": "fact", "content": "Acme renews in March."})
    dropped = await write(gateway, mid, {"type": "fact", "content": "Acme renews in June."})
    got = (await gateway.admin.get(f"/v1/memories/{mid}/records/{kept}")).json()
    assert got["attributes"] == {"x.ratification": "pending"}
    assert len((await gateway.admin.get(f"/v1/memories/{mid}/records")).json()["data"]) == 2

    async def recalled() -> list[str]:
        answer = await gateway.admin.post(f"/v1/memories/{mid}/recall", json={"text": "Acme renews"})
        return [r["record"]["id"] for r in answer.json()["results"]]

    assert await recalled() == []
    reader_id, reader = await gateway.member("reader")
    await gateway.grant(mid, f"member:{reader_id}", "read")
    refused = await reader.post(f"/v1/memories/{mid}/records/{kept}/ratification", json={"decision": "approve"})
    assert refused.status_code == 403, refused.text

    approved = await gateway.admin.post(f"/v1/memories/{mid}/records/{kept}/ratification",
                                        json={"decision": "approve"})
    assert approved.status_code == 200, approved.text
    assert approved.json()["record"]["attributes"] == {}
    assert await recalled() == [kept]
    rejected = await gateway.admin.post(f"/v1/memories/{mid}/records/{dropped}/ratification",
                                        json={"decision": "reject"})
    assert rejected.status_code == 200, rejected.text
    assert (await gateway.admin.get(f"/v1/memories/{mid}/records/{dropped}")).status_code == 404
    doc = next(p for p in (await gateway.admin.get("/v1/memories/providers")).json()["data"] if p["id"] == "drafts")
    assert doc["x.memfed"]["plugin"]["ratification_supported"] is True


async def test_ratification_where_the_provider_keeps_no_drafts_is_unsupported(gw: tuple[Gateway, FakeMem0]) -> None:
    """On a plugin that does not ratify, and on the embedded provider, the route is 422 memory_unsupported."""
    gateway, _ = gw
    for provider in ("notes", "local"):
        memory = await gateway.root(f"No drafts on {provider}", provider=provider)
        rid = await write(gateway, memory["id"], {"type": "fact", "content": "Plain."})
        answer = await gateway.admin.post(f"/v1/memories/{memory['id']}/records/{rid}/ratification",
                                          json={"decision": "approve"})
        assert answer.status_code == 422, answer.text
        assert answer.json()["error"]["code"] == "memory_unsupported"


async def test_what_a_plugin_cannot_hold_is_refused_as_the_callers_mistake(gw: tuple[Gateway, FakeMem0]) -> None:
    """A file part (a plugin keeps text only), an extension part, or the draft marker written by a
    caller: each is a 422 in the envelope, never a 500 nor a provider failure, and nothing is written."""
    gateway, _ = gw
    memory = await gateway.root("Text only", provider="notes")
    mid = memory["id"]
    upload = await gateway.admin.post("/v1/files", files={"file": ("a.txt", b"plain words", "text/plain")})
    assert upload.status_code == 201, upload.text
    for body in ({"content": [{"type": "file", "file": {"id": upload.json()["id"]}}]},
                 {"content": [{"type": "x.sketch", "strokes": [1, 2]}]},
                 {"content": "Words.", "attributes": {"x.ratification": "pending"}}):
        answer = await gateway.admin.post(f"/v1/memories/{mid}/records", json={"type": "note", **body})
        assert answer.status_code == 422, answer.text
        assert set(answer.json()["error"]) >= {"type", "code", "message"}
    assert (await gateway.admin.get(f"/v1/memories/{mid}/records")).json()["data"] == []
    assert gateway.services.providers["notes"].breaker.failures == 0


# --------------------------------------------------------------------------- process life


async def test_a_plugin_that_dies_degrades_recall_refuses_writes_and_comes_back(
    gw: tuple[Gateway, FakeMem0],
) -> None:
    """While the plugin is down a recall over it and another provider answers 200 naming
    provider:notes:unavailable, a write is 503 memory_unavailable (never lost in silence); once the
    supervisor has restarted it, the records it kept are recalled again."""
    gateway, _ = gw
    root = await gateway.root("Company")
    on_local = await gateway.child(gateway.admin, root["id"], "On local", provider="local")
    on_plugin = await gateway.child(gateway.admin, root["id"], "On the plugin", provider="notes")
    await write(gateway, on_local["id"], {"type": "fact", "content": "renewal terms on local"})
    kept = await write(gateway, on_plugin["id"], {"type": "fact", "content": "renewal terms on the plugin"})
    provider = gateway.services.providers["notes"].provider
    plugin = provider._supervisor.plugin  # type: ignore[attr-defined]
    plugin.proc.kill()
    await plugin.proc.wait()

    recalled = (await gateway.admin.post(f"/v1/memories/{root['id']}/recall", json={"text": "renewal"})).json()
    assert "provider:notes:unavailable" in recalled["degraded"]
    assert [r["memory"]["id"] for r in recalled["results"]] == [on_local["id"]]
    refused = await gateway.admin.post(f"/v1/memories/{on_plugin['id']}/records", json={"content": "x"})
    assert refused.status_code == 503 and refused.json()["error"]["code"] == "memory_unavailable"

    for _ in range(600):  # the restart runs in the background; bounded so a broken one fails
        if provider._supervisor.state() == "running":  # type: ignore[attr-defined]
            break
        await asyncio.sleep(0.05)
    gateway.services.providers["notes"].breaker.succeeded()
    again = (await gateway.admin.post(f"/v1/memories/{on_plugin['id']}/recall", json={"text": "renewal"})).json()
    assert [r["record"]["id"] for r in again["results"]] == [kept]


async def test_stopping_the_gateway_shuts_the_plugin_down_through_its_controller(tmp_path: Path) -> None:
    """On stop the plugin is asked to shut down and exits by itself (code 0), not killed."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    config = make_config(tmp_path, providers={"notes": {"adapter": "plugin", **plugin_options(plugin_dir)}})
    async with running_gateway(config) as gateway:
        plugin = gateway.services.providers["notes"].provider._supervisor.plugin  # type: ignore[attr-defined]
        assert plugin.alive
    assert plugin.proc.returncode == 0


async def test_concurrent_writes_of_one_title_each_get_their_own_slug(gw: tuple[Gateway, FakeMem0]) -> None:
    """Ten writes of one title at once: the kernel's probe-then-record runs one at a time, so none
    overwrites another at the plugin and all ten are read back."""
    gateway, _ = gw
    memory = await gateway.root("Busy", provider="notes")
    ids = await asyncio.gather(*(write(gateway, memory["id"], {"type": "fact", "title": "Same title",
                                                               "content": f"Record {i}."}) for i in range(10)))
    listed = (await gateway.admin.get(f"/v1/memories/{memory['id']}/records", params={"limit": "50"})).json()
    assert sorted(r["id"] for r in listed["data"]) == sorted(ids)
    assert sorted(r["content"][0]["text"] for r in listed["data"]) == sorted(f"Record {i}." for i in range(10))


@pytest.mark.parametrize(("flag", "said"), [
    ("--bad-handshake", "bad handshake line: core protocol '2' is not 1"),
    ("--crash-at-start", "exited (code 2) before its handshake"),
])
async def test_a_plugin_that_cannot_start_stops_the_gateway_in_one_line(tmp_path: Path, flag: str, said: str) -> None:
    """Opening the providers fails with one configuration line naming the provider, not a hang and not a
    traceback; nothing is left running."""
    plugin_dir = tmp_path / "plugin"
    plugin_dir.mkdir()
    config = make_config(tmp_path, providers={"notes": {"adapter": "plugin", **plugin_options(plugin_dir, flag)}})
    with pytest.raises(ConfigError) as caught:
        async with running_gateway(config):
            pass
    assert str(caught.value) == f"providers.notes: plugin provider notes: {said}"
