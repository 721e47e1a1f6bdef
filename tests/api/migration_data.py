"""A memory worth moving, written through the API, and ways to compare two copies of it.

The memory holds: an entity with three versions by two writers, a fact that references it (and a note)
and was revised, a note with a file part, and a forgotten record. `records` maps a name to its id.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.base import Record
from gateway.state import schema as t
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway


@dataclass
class Seeded:
    memory_id: str
    records: dict[str, str]
    file_id: str
    agent_id: str
    agent: httpx.AsyncClient
    ids: list[str] = field(default_factory=list)


async def seed(gw: Gateway, name: str = "Accounts", parent_id: str | None = None) -> Seeded:
    memory = await gw.root(name) if parent_id is None else await gw.child(gw.admin, parent_id, name)
    mid = memory["id"]
    agent_id, agent = await gw.member(f"{name}-agent", "agent")
    await gw.grant(mid, f"member:{agent_id}", "read", "write")
    upload = await gw.admin.post("/v1/files", files={"file": ("logo.png", b"\x89PNG-bytes", "image/png")})
    assert upload.status_code == 201, upload.text
    file_id = upload.json()["id"]

    async def write(client: httpx.AsyncClient, body: dict[str, Any]) -> str:
        made = await client.post(f"/v1/memories/{mid}/records", json=body)
        assert made.status_code == 201, made.text
        return str(made.json()["id"])

    async def revise(client: httpx.AsyncClient, rid: str, body: dict[str, Any]) -> None:
        changed = await client.patch(f"/v1/memories/{mid}/records/{rid}", json=body)
        assert changed.status_code == 200, changed.text

    dana = await write(gw.admin, {"type": "entity", "title": "Dana", "content": "Dana works at Quillon.",
                                  "attributes": {"kind": "person"}})
    await revise(agent, dana, {"title": "Dana Reyes"})
    await revise(gw.admin, dana, {"content": "Dana Reyes heads procurement at Quillon Freight.",
                                  "time": {"valid_from": "2026-01-01T00:00:00Z"}})
    logo = await write(gw.admin, {"type": "note", "title": "The logo", "content": [
        {"type": "text", "text": "Final logo, approved in October."},
        {"type": "file", "file": {"id": file_id}, "text": "A blue circle.", "text_source": "stated"},
        {"type": "x.sketch", "strokes": [1, 2, 3]},
    ]})
    fact = await write(agent, {"type": "fact", "title": "Dana approved the logo", "content": "She approved it.",
                               "references": [{"memory_id": mid, "record_id": dana, "rel": "subject"},
                                              {"memory_id": mid, "record_id": logo, "rel": "derived_from"}]})
    await revise(gw.admin, fact, {"attributes": {"confidence": "high"}})
    gone = await write(agent, {"type": "fact", "title": "Renewal slips to April", "content": "It slipped."})
    forgotten = await gw.admin.delete(f"/v1/memories/{mid}/records/{gone}")
    assert forgotten.status_code == 200, forgotten.text
    records = {"dana": dana, "logo": logo, "fact": fact, "gone": gone}
    return Seeded(mid, records, file_id, agent_id, agent, list(records.values()))


async def export_lines(client: httpx.AsyncClient, memory_id: str) -> list[dict[str, Any]]:
    answer = await client.get(f"/v1/memories/{memory_id}/export")
    assert answer.status_code == 200, answer.text
    assert answer.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in answer.text.splitlines() if line.strip()]


def comparable(lines: list[dict[str, Any]], *, id_map: dict[str, str] | None = None,
               memory_map: dict[str, str] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every version by record, with ids mapped (copy id -> original id) so two copies compare equal."""
    id_map = id_map or {}
    memory_map = memory_map or {}
    out = {}
    for line in lines:
        versions = []
        for version in line["versions"]:
            v = dict(version)
            v["references"] = [{**r, "record_id": id_map.get(r["record_id"], r["record_id"]),
                                "memory_id": memory_map.get(r["memory_id"], r["memory_id"])}
                               for r in version["references"]]
            versions.append(v)
        out[id_map.get(line["id"], line["id"])] = versions
    return out


async def aliases(gw: Gateway, memory_id: str) -> dict[str, str]:
    """old id -> new id, as the alias table holds them."""
    rows = await gw.services.store.rows.fetch_all(t.record_aliases, memory_id=memory_id)
    return {r.old_id: r.new_id for r in rows}


async def held_by(gw: Gateway, provider: str, memory_id: str) -> list[Record]:
    """Every record (forgotten too) the named provider holds for the memory, read around the gateway."""
    page = await gw.services.providers[provider].provider.list(memory_id, include="all", limit=1000)
    return list(page.items)


async def migrate(gw: Gateway, memory_id: str, to: str = "archive", **body: Any) -> httpx.Response:
    return await gw.admin.post(f"/v1/memories/{memory_id}/migrate", json={"to": to, **body})


@asynccontextmanager
async def mem0_gateway(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[tuple[Gateway, FakeMem0]]:
    """A gateway with the default local provider and `m0`, a mem0 OSS server faked at the HTTP layer."""
    fake = FakeMem0("oss")
    monkeypatch.setenv("MEMFED_TEST_MEM0_KEY", fake.api_key or "")
    config = make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": "MEMFED_TEST_MEM0_KEY"}})
    async with running_gateway(config, http_client=fake.client()) as gateway:
        yield gateway, fake
