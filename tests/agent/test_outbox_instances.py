"""The observe outbox with two gateways on one PostgreSQL: each row is delivered once, by whichever worker
leases it, and no worker fails a row because its own view of the tree is behind."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from gateway.agent import outbox
from gateway.server.app import open_services
from gateway.services import Services
from tests._postgres import fresh_schema
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway

pytestmark = pytest.mark.postgres

EPISODE = [{"type": "text", "text": "Can I return shoes after 30 days?", "role": "user"}]


@asynccontextmanager
async def two_gateways(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                       fake: FakeMem0) -> AsyncIterator[tuple[Gateway, Services]]:  # fmt: skip
    """Gateway A (over HTTP, in-process) and the services of gateway B, opened first: B's view of the
    tree is from before anything A makes."""
    monkeypatch.setattr(outbox, "BACKOFF_FIRST", 0.02)
    monkeypatch.setenv("MEMFED_TEST_MEM0_KEY", fake.api_key or "")
    async with fresh_schema("outbox") as (_engine, schema):
        raw: dict[str, Any] = {
            "state": {"url": "postgresql://postgres@127.0.0.1:5432/test", "schema": schema},
            "providers": {"m0": {"adapter": "mem0", "variant": "oss", "base_url": fake.base_url,
                                 "api_key_env": "MEMFED_TEST_MEM0_KEY", "reset_after": 0.05}}}
        async with running_gateway(make_config(tmp_path / "a", **raw), http_client=fake.client()) as gw_a:
            services_b = await open_services(make_config(tmp_path / "b", **raw), http_client=fake.client())
            try:
                yield gw_a, services_b
            finally:
                await services_b.close()


async def observed_while_down(gw: Gateway, fake: FakeMem0) -> tuple[str, str]:
    """A memory made on A and an episode observed there while mem0 refuses connections: (memory, job)."""
    fake.fail("connect", times=1_000_000)
    memory = await gw.root("Customer 7", provider="m0")
    answer = await gw.admin.post(f"/v1/memories/{memory['id']}/observe", json={"content": EPISODE})
    assert answer.status_code == 202, answer.text
    fake._failures.clear()  # mem0 is back
    return memory["id"], answer.json()["job"]["id"]


async def test_a_worker_whose_view_is_behind_delivers_the_row_instead_of_failing_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """B opened before A made the memory; B's worker takes A's row: it catches up and delivers it (it
    used to fail it "the memory was deleted")."""
    fake = FakeMem0("oss")
    async with two_gateways(tmp_path, monkeypatch, fake) as (gw_a, services_b):
        memory_id, job_id = await observed_while_down(gw_a, fake)
        assert not services_b.store.tree.exists(memory_id)
        await outbox.deliver_due(services_b, ignore_schedule=True)
        job = (await gw_a.admin.get(f"/v1/memories/{memory_id}/jobs/{job_id}")).json()
        assert job["status"] == "completed", job
        assert len(fake.memories) == 1


async def test_one_row_and_two_workers_make_one_delivery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A's and B's workers run at once over the same due row: the episode reaches mem0 once."""
    fake = FakeMem0("oss")
    async with two_gateways(tmp_path, monkeypatch, fake) as (gw_a, services_b):
        memory_id, job_id = await observed_while_down(gw_a, fake)
        await asyncio.gather(outbox.deliver_due(gw_a.services, ignore_schedule=True),
                             outbox.deliver_due(services_b, ignore_schedule=True))
        job = (await gw_a.admin.get(f"/v1/memories/{memory_id}/jobs/{job_id}")).json()
        assert job["status"] == "completed", job
        assert len(fake.memories) == 1
        assert await outbox.pending_count(services_b) == 0
