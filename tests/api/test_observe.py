"""observe (§5.1): episodes with roles, written through a durable outbox; jobs for what is written later."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import select

from adapters.base import NewRecord, ProviderTimeout, Record, Unsupported
from gateway.agent import outbox
from gateway.server.app import create_app, open_services
from gateway.services import Services
from gateway.state import harness_schema as h
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway

TURN = [{"type": "text", "text": "Can I return shoes after 30 days?", "role": "user"},
        {"type": "text", "text": "Only with a receipt.", "role": "assistant"},
        {"type": "x.tool_call", "name": "lookup_policy", "role": "tool"}]


class Wrapped:
    """A provider that behaves like the one it wraps, except for the calls a test overrides."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class AnswerLost(Wrapped):
    """Stores the first episode, then loses the answer (a timeout whose request did land)."""

    lost = 0

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        stored = await self.inner.remember(memory_id, record)
        if not self.lost:
            self.lost += 1
            raise ProviderTimeout("the answer was lost on the way back")
        return stored


class DerivesLater(Wrapped):
    """Declares background derivation whose observe answers with a job; stores as the wrapped one does."""

    def capabilities(self) -> Any:
        return replace(self.inner.capabilities(), derivation="background", observe_answers="job")


class Refuses(Wrapped):
    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        raise Unsupported("this provider keeps no episodes")


async def writable_root(gateway: Gateway) -> tuple[str, httpx.AsyncClient, dict[str, Any]]:
    agent_id, agent = await gateway.member("bot", "agent")
    root = await gateway.root("Company")
    await gateway.grant(root["id"], f"member:{agent_id}", "read", "write")
    return agent_id, agent, root


async def test_observe_stores_episodes_with_roles(gateway: Gateway) -> None:
    """Each episode becomes one `episode` record with its parts and roles in order, the caller as writer,
    and an outbox id in its attributes; the embedded provider answers 201 with the records."""
    agent_id, agent, root = await writable_root(gateway)
    answer = await agent.post(f"/v1/memories/{root['id']}/observe", json={"episodes": [
        {"content": TURN, "attributes": {"session": "s1"}}, {"content": "a second, plain episode"}]})
    assert answer.status_code == 201, answer.text
    body = answer.json()
    assert (body["object"], body["job"]) == ("memory.observation", None)
    first, second = body["records"]
    assert first["type"] == second["type"] == "episode"
    assert [(p["type"], p.get("role")) for p in first["content"]] == [
        ("text", "user"), ("text", "assistant"), ("x.tool_call", "tool")]
    assert first["content"][2]["name"] == "lookup_policy"
    assert first["attributes"]["session"] == "s1"
    assert first["attributes"][outbox.OUTBOX_ATTRIBUTE].startswith("hobx_")
    assert first["written_by"] == {"kind": "member", "id": agent_id, "type": "agent"}
    assert second["content"] == [{"type": "text", "text": "a second, plain episode"}]


async def test_observe_needs_write_and_a_well_formed_body(gateway: Gateway) -> None:
    """A reader is refused with memory_forbidden; episodes and content together, an unknown role, or no
    episode at all are refused with memory_invalid."""
    root = await gateway.root("Company")
    reader_id, reader = await gateway.member("rita")
    await gateway.grant(root["id"], f"member:{reader_id}", "read")
    url = f"/v1/memories/{root['id']}/observe"
    assert (await reader.post(url, json={"content": "x"})).json()["error"]["code"] == "memory_forbidden"
    bads: tuple[dict[str, object], ...] = ({"content": "x", "episodes": [{"content": "y"}]}, {"episodes": []},
                                           {"content": [{"type": "text", "text": "x", "role": "narrator"}]}, {})
    for bad in bads:
        answer = await gateway.admin.post(url, json=bad)
        assert answer.status_code == 422, bad
        assert answer.json()["error"]["code"] == "memory_invalid"


async def test_an_idempotent_retry_writes_once(gateway: Gateway) -> None:
    """The same Idempotency-Key replays the first answer and does not write the episode again."""
    _, agent, root = await writable_root(gateway)
    url = f"/v1/memories/{root['id']}/observe"
    headers = {"Idempotency-Key": "turn-42"}
    first = await agent.post(url, json={"content": TURN}, headers=headers)
    again = await agent.post(url, json={"content": TURN}, headers=headers)
    assert first.status_code == again.status_code == 201
    assert first.json() == again.json()
    listed = (await agent.get(f"/v1/memories/{root['id']}/records", params={"type": "episode"})).json()
    assert len(listed["data"]) == 1


async def test_a_send_that_landed_but_lost_its_answer_is_not_doubled(gateway: Gateway) -> None:
    """The provider stored the episode but the answer was lost: observe answers 202 pending, a later
    observe queues behind it, and the retry finds the first episode by its outbox id instead of writing
    it again. The job then reports completed with the record ids."""
    _, agent, root = await writable_root(gateway)
    handle = gateway.services.providers.get("local")
    assert handle is not None
    handle.provider = AnswerLost(handle.provider)
    url = f"/v1/memories/{root['id']}/observe"
    lost = await agent.post(url, json={"content": TURN})
    assert lost.status_code == 202, lost.text
    job = lost.json()["job"]
    assert job["status"] == "pending" and job["id"].startswith("hjob_")
    queued = await agent.post(url, json={"content": "asked later"})
    assert queued.status_code == 202
    assert await outbox.deliver_due(gateway.services, ignore_schedule=True) == 2
    listed = (await agent.get(f"/v1/memories/{root['id']}/records", params={"type": "episode"})).json()
    assert sorted(r["content"][0]["text"] for r in listed["data"]) == ["Can I return shoes after 30 days?",
                                                                      "asked later"]
    done = (await agent.get(f"/v1/memories/{root['id']}/jobs/{job['id']}")).json()
    assert done["status"] == "completed"
    assert [r["id"] for r in done["records"]] == done["record_ids"]
    assert done["records"][0]["content"][0]["role"] == "user"


async def test_a_provider_that_derives_later_answers_with_a_job(gateway: Gateway) -> None:
    """A provider whose observe answers with a job (derivation in the background) gets 202 and no records;
    the job at its route carries the records written."""
    _, agent, root = await writable_root(gateway)
    handle = gateway.services.providers.get("local")
    assert handle is not None
    handle.provider = DerivesLater(handle.provider)
    answer = await agent.post(f"/v1/memories/{root['id']}/observe", json={"content": TURN})
    assert answer.status_code == 202
    assert answer.json()["records"] == []
    job = (await agent.get(f"/v1/memories/{root['id']}/jobs/{answer.json()['job']['id']}")).json()
    assert job["status"] == "completed" and len(job["record_ids"]) == 1


async def test_a_refused_episode_is_an_error_not_a_retry(gateway: Gateway) -> None:
    """A provider that refuses episodes outright is answered with memory_unsupported; nothing is kept
    pending to be retried."""
    _, agent, root = await writable_root(gateway)
    handle = gateway.services.providers.get("local")
    assert handle is not None
    handle.provider = Refuses(handle.provider)
    answer = await agent.post(f"/v1/memories/{root['id']}/observe", json={"content": "x"})
    assert answer.status_code == 422
    assert answer.json()["error"]["code"] == "memory_unsupported"
    assert await outbox.pending_count(gateway.services) == 0


async def test_a_job_is_read_only_through_its_memory(gateway: Gateway) -> None:
    """A job id asked through another memory, or an unknown one, is memfed_job_not_found; reading a job
    needs read on its memory."""
    _, agent, root = await writable_root(gateway)
    handle = gateway.services.providers.get("local")
    assert handle is not None
    handle.provider = AnswerLost(handle.provider)
    job_id = (await agent.post(f"/v1/memories/{root['id']}/observe", json={"content": "x"})).json()["job"]["id"]
    other = await gateway.root("Other")
    for path in (f"/v1/memories/{other['id']}/jobs/{job_id}", f"/v1/memories/{root['id']}/jobs/hjob_nope"):
        answer = await gateway.admin.get(path)
        assert answer.status_code == 404
        assert answer.json()["error"]["code"] == "memfed_job_not_found"
    _, stranger = await gateway.member("sam")
    assert (await stranger.get(f"/v1/memories/{root['id']}/jobs/{job_id}")).status_code == 404


# ------------------------------------------------------------------ the outbox across a restart


def mem0_config(tmp_path: Path, fake: FakeMem0, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("MEMFED_TEST_MEM0_KEY", fake.api_key or "")
    return make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": "MEMFED_TEST_MEM0_KEY",
        "failure_threshold": 3, "reset_after": 0.05}})


async def until_job_is(client: httpx.AsyncClient, url: str, status: str) -> dict[str, Any]:
    """Read the job until it reaches `status` (bounded, so a broken worker fails the test, not hangs it)."""
    async with asyncio.timeout(20):
        while True:
            job = (await client.get(url)).json()
            if job.get("status") == status:
                return job
            await asyncio.sleep(0.02)


async def test_an_episode_observed_while_the_provider_is_down_survives_a_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0 refuses connections: observe answers 202 pending and keeps the episode. The gateway is
    restarted while mem0 is still down (its first delivery fails too), mem0 comes back, and the
    episode arrives exactly once, roles kept; the job reports completed with the record id, and a
    further restart sends nothing again."""
    monkeypatch.setattr(outbox, "BACKOFF_FIRST", 0.02)
    fake = FakeMem0("oss")
    config = mem0_config(tmp_path, fake, monkeypatch)
    fake.fail("connect", times=1_000_000)
    async with running_gateway(config, http_client=fake.client()) as gw:
        agent_id, agent = await gw.member("bot", "agent")
        memory = await gw.root("Customer 7", provider="m0")
        await gw.grant(memory["id"], f"member:{agent_id}", "read", "write")
        answer = await agent.post(f"/v1/memories/{memory['id']}/observe", json={"content": TURN})
        assert answer.status_code == 202, answer.text
        job_url = f"/v1/memories/{memory['id']}/jobs/{answer.json()['job']['id']}"
        pending = (await agent.get(job_url)).json()
        assert (pending["status"], pending["record_ids"]) == ("pending", [])
        admin_key = gw.admin_key
    assert fake.memories == {}

    asked_before_restart = len(fake.requests)
    services = await open_services(config, http_client=fake.client())
    try:
        worker = await outbox.start_background(services)
        await asyncio.wait_for(worker.idle(), 20)  # the first pass after the restart has tried, and failed
        assert len(fake.requests) > asked_before_restart
        assert fake.memories == {}
        fake._failures.clear()  # mem0 is back
        admin = _client(services, config, admin_key)
        job = await until_job_is(admin, job_url, "completed")
        await admin.aclose()
    finally:
        await outbox.stop_background(services)
        await services.close()

    assert len(fake.memories) == 1
    [stored] = fake.memories.values()
    assert stored["user_id"].endswith(memory["id"])
    assert job["record_ids"] == [job["records"][0]["id"]]
    assert [p.get("role") for p in job["records"][0]["content"]] == ["user", "assistant", "tool"]

    again = await open_services(config, http_client=fake.client())
    try:
        await outbox.deliver_due(again, ignore_schedule=True)
        assert await outbox.pending_count(again) == 0
    finally:
        await again.close()
    assert len(fake.memories) == 1


def _client(services: Services, config: Any, key: str) -> httpx.AsyncClient:
    app = create_app(config, services=services)
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed",
                             headers={"Authorization": f"Bearer {key}"})


async def test_a_delivered_episode_leaves_no_copy_in_the_outbox(gateway: Gateway) -> None:
    """Once the provider has the episode, the outbox row keeps its record id but not its content, so an
    erase at the provider is not undone by a copy kept in the gateway's state."""
    _, agent, root = await writable_root(gateway)
    answer = await agent.post(f"/v1/memories/{root['id']}/observe", json={"content": "private words"})
    assert answer.status_code == 201
    async with gateway.services.store.engine.connect() as conn:
        rows = list(await conn.execute(select(h.observe_outbox)))
    assert [(r.status, r.record_id, r.payload) for r in rows] == [
        ("delivered", answer.json()["records"][0]["id"], "")]


async def test_an_episode_for_a_deleted_memory_fails_its_job(gateway: Gateway) -> None:
    """A pending episode whose memory was deleted meanwhile is not sent anywhere: its job fails."""
    _, agent, root = await writable_root(gateway)
    handle = gateway.services.providers.get("local")
    assert handle is not None
    handle.provider = AnswerLost(handle.provider)
    job_id = (await agent.post(f"/v1/memories/{root['id']}/observe", json={"content": "x"})).json()["job"]["id"]
    assert (await gateway.admin.delete(f"/v1/memories/{root['id']}")).status_code == 200
    assert await outbox.deliver_due(gateway.services, ignore_schedule=True) == 0
    job = await outbox.job_row(gateway.services, job_id)
    assert (job.status, job.error) == ("failed", "the memory was deleted")


def test_the_app_lifespan_runs_the_outbox_worker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A served app starts the delivery worker with its services and stops it when it stops."""
    from starlette.testclient import TestClient

    monkeypatch.setenv("MEMFED_ADMIN_KEY", "mf_lifespan-test-key")
    app = create_app(make_config(tmp_path))
    with TestClient(app) as client:
        services = app.state.services
        assert outbox.worker_for(services) is not None
        assert client.get("/v1/harnesses", headers={"Authorization": "Bearer mf_lifespan-test-key"}).status_code == 200
    assert outbox.worker_for(services) is None
