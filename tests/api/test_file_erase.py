"""A file's bytes go only when no record anywhere names them; a file id from a provider is checked first."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.api._gateway import Gateway, make_config, running_gateway


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with running_gateway(make_config(tmp_path, providers={"archive": {"adapter": "local"}})) as gateway:
        yield gateway


async def _upload(client: httpx.AsyncClient, data: bytes = b"the shared bytes") -> str:
    answer = await client.post("/v1/files", files={"file": ("shared.txt", data, "text/plain")})
    assert answer.status_code == 201, answer.text
    return str(answer.json()["id"])


async def _with_file(client: httpx.AsyncClient, memory_id: str, file_id: str) -> str:
    made = await client.post(f"/v1/memories/{memory_id}/records",
                             json={"content": [{"type": "file", "file": {"id": file_id}}]})
    assert made.status_code == 201, made.text
    return str(made.json()["id"])


async def _bytes(client: httpx.AsyncClient, memory_id: str, record_id: str) -> httpx.Response:
    return await client.get(f"/v1/memories/{memory_id}/records/{record_id}/content/0")


async def test_erasing_a_record_keeps_bytes_a_hidden_record_elsewhere_still_uses(gw: Gateway) -> None:
    """An eraser holding delete on one memory erases its record; the same file, named by a record in a
    memory the eraser cannot see, still reads back; erased there too, the bytes go."""
    root = await gw.root()
    shared = await gw.child(gw.admin, root["id"], "Shared")
    hidden = await gw.child(gw.admin, root["id"], "Hidden", restricted=True)
    owner_id, owner = await gw.member("owner")
    eraser_id, eraser = await gw.member("eraser")
    for memory in (shared, hidden):
        await gw.grant(memory["id"], f"member:{owner_id}", "read", "write")
    await gw.grant(shared["id"], f"member:{eraser_id}", "read", "delete")
    file_id = await _upload(owner)
    seen = await _with_file(owner, shared["id"], file_id)
    unseen = await _with_file(owner, hidden["id"], file_id)
    assert (await eraser.get(f"/v1/memories/{hidden['id']}")).status_code == 404
    erased = await eraser.post(f"/v1/memories/{shared['id']}/erase", json={"record_ids": [seen]})
    assert erased.status_code == 200 and erased.json()["erased"] == [seen], erased.text
    still = await _bytes(owner, hidden["id"], unseen)
    assert still.status_code == 200 and still.content == b"the shared bytes"
    await gw.admin.post(f"/v1/memories/{hidden['id']}/erase", json={"record_ids": [unseen]})
    assert await gw.services.files.read(file_id) is None
    assert (await owner.get(f"/v1/files/{file_id}")).status_code == 404


async def test_two_records_of_one_memory_and_a_revision_share_a_file_until_the_last_goes(gw: Gateway) -> None:
    """A file named by two records (one of them revised, keeping it in its history) keeps its bytes until
    every record naming it is erased."""
    root = await gw.root()
    file_id = await _upload(gw.admin)
    first = await _with_file(gw.admin, root["id"], file_id)
    second = await _with_file(gw.admin, root["id"], file_id)
    revised = await gw.admin.patch(f"/v1/memories/{root['id']}/records/{second}", json={"content": "words now"})
    assert revised.status_code == 200, revised.text
    await gw.admin.post(f"/v1/memories/{root['id']}/erase", json={"record_ids": [first]})
    assert await gw.services.files.read(file_id) == b"the shared bytes"
    await gw.admin.post(f"/v1/memories/{root['id']}/erase", json={"record_ids": [second]})
    assert await gw.services.files.read(file_id) is None


async def test_an_imported_copy_keeps_the_bytes_its_original_s_erasure_would_remove(gw: Gateway) -> None:
    """Export a record with a file and import it into another memory: erasing the original leaves the
    copy's bytes."""
    source = await gw.root("Source")
    target = await gw.root("Target", provider="archive")
    file_id = await _upload(gw.admin)
    original = await _with_file(gw.admin, source["id"], file_id)
    exported = await gw.admin.get(f"/v1/memories/{source['id']}/export")
    assert exported.status_code == 200, exported.text
    imported = await gw.admin.post(f"/v1/memories/{target['id']}/import", content=exported.content,
                                   headers={"content-type": "application/x-ndjson"})
    assert imported.status_code == 200, imported.text
    copy = (await gw.admin.get(f"/v1/memories/{target['id']}/records")).json()["data"][0]["id"]
    await gw.admin.post(f"/v1/memories/{source['id']}/erase", json={"record_ids": [original]})
    kept = await _bytes(gw.admin, target["id"], copy)
    assert kept.status_code == 200 and kept.content == b"the shared bytes"


@pytest.mark.parametrize("bad_id", ["../victim.txt", "../../victim.txt", "/tmp/victim.txt", "file_../../x",
                                    "FILE_" + "A" * 32])
async def test_a_file_id_a_provider_returns_never_reaches_outside_the_file_store(gw: Gateway, tmp_path: Path,
                                                                                 bad_id: str) -> None:  # fmt: skip
    """A record whose stored file part names a path (what a vendor's metadata could hold) reads as bytes
    no longer kept, and erasing it deletes nothing outside the file store."""
    memory = await gw.root("Archive", provider="archive")
    file_id = await _upload(gw.admin)
    record = await _with_file(gw.admin, memory["id"], file_id)
    victim = tmp_path / "data" / "victim.txt"
    victim.write_text("not the file store's")
    outside = Path("/tmp/victim.txt")
    outside.write_text("not the file store's")
    with sqlite3.connect(tmp_path / "data" / "providers" / "archive" / "records.sqlite3") as db:  # edited there
        (content,) = db.execute("SELECT content FROM versions").fetchone()
        parts = json.loads(content)
        parts[0]["file"]["id"] = bad_id
        db.execute("UPDATE versions SET content = ?", (json.dumps(parts),))
    read = await _bytes(gw.admin, memory["id"], record)
    assert read.status_code == 404 and b"not the file store" not in read.content
    erased = await gw.admin.post(f"/v1/memories/{memory['id']}/erase", json={"record_ids": [record]})
    assert erased.status_code == 200, erased.text
    assert victim.read_text() == "not the file store's" and outside.exists()
    outside.unlink()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def any_gw(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Gateway]:
    from tests._postgres import fresh_schema

    if request.param == "sqlite":
        async with running_gateway(make_config(tmp_path)) as gateway:
            yield gateway
        return
    async with fresh_schema("memfed_files") as (_engine, schema):
        config = make_config(tmp_path, state={"url": "postgresql://postgres@127.0.0.1:5432/test", "schema": schema})
        async with running_gateway(config) as gateway:
            yield gateway


async def test_a_write_racing_the_erasure_of_a_file_s_last_record_never_names_lost_bytes(any_gw: Gateway) -> None:
    """A record naming a file, written while the file's only other record is erased: either the write is
    refused (the file went first) or its bytes stay; never a record whose file is gone."""
    import asyncio

    gw = any_gw
    root = await gw.root()
    for _ in range(8):
        file_id = await _upload(gw.admin)
        last = await _with_file(gw.admin, root["id"], file_id)
        erase = gw.admin.post(f"/v1/memories/{root['id']}/erase", json={"record_ids": [last]})
        write = gw.admin.post(f"/v1/memories/{root['id']}/records",
                              json={"content": [{"type": "file", "file": {"id": file_id}}]})
        erased, written = await asyncio.gather(erase, write)
        assert erased.status_code == 200, erased.text
        if written.status_code == 201:
            kept = await _bytes(gw.admin, root["id"], written.json()["id"])
            assert kept.status_code == 200 and kept.content == b"the shared bytes"
        else:
            assert written.status_code == 404 and written.json()["error"]["code"] == "memfed_file_not_found"
