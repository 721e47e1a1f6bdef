"""The observe outbox under writes whose outcome is unknown, and rows that can never be delivered
(issue 10 items 1 and 6).

An episode's outbox id is its write id at the provider. A send that timed out is not sent again before
the provider's write could have settled, and is looked for first; a row that keeps failing at the
provider ends `failed` with its reason after a bounded number of attempts, so the memory's later
episodes are no longer held behind it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from adapters.base import NewRecord, Record
from gateway.agent import outbox
from gateway.base import clock
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.test_observe import TURN, Wrapped, writable_root

KEY = "MEMFED_TEST_MEM0_KEY"


class Clock:
    """Moves the outbox's clock forward, so a test can stand after a backoff or a settle time."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.offset_ms = 0
        real = clock.now_ms  # what the outbox reads its time from
        monkeypatch.setattr(outbox, "now_ms", lambda: real() + self.offset_ms)

    def advance(self, seconds: float) -> None:
        self.offset_ms += int(seconds * 1000)


def episode_adds(fake: FakeMem0) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.url.path == "/memories")


async def test_an_episode_that_landed_after_its_send_timed_out_is_delivered_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0 keeps the episode although the send timed out, and stores it only later. Passes of the worker
    right after (a restart's first pass included) send nothing again; once the write could have settled,
    the next pass finds the episode by its outbox id: one episode at mem0, and the job names it."""
    clock = Clock(monkeypatch)
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY, fake.api_key or "")
    config = make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY}})
    async with running_gateway(config, http_client=fake.client()) as gw:
        agent_id, agent = await gw.member("bot", "agent")
        memory = (await gw.root("Customer 7", provider="m0"))["id"]
        await gw.grant(memory, f"member:{agent_id}", "read", "write")
        fake.fail("late", when=lambda r: r.method == "POST" and r.url.path == "/memories")
        answer = await agent.post(f"/v1/memories/{memory}/observe", json={"content": TURN})
        assert answer.status_code == 202, answer.text
        job_url = f"/v1/memories/{memory}/jobs/{answer.json()['job']['id']}"

        for _ in range(3):
            clock.advance(2)
            assert await outbox.deliver_due(gw.services, ignore_schedule=True) == 0
        assert episode_adds(fake) == 1

        assert fake.land() == 1
        clock.advance(120)
        assert await outbox.deliver_due(gw.services, ignore_schedule=True) == 1
        job = (await agent.get(job_url)).json()
    assert episode_adds(fake) == 1
    [stored] = fake.memories.values()
    assert job["status"] == "completed"
    assert job["record_ids"] == ["hrec_" + stored["id"]]


class Poisoned(Wrapped):
    """Fails on one episode every time, as an adapter does on a value it cannot carry; others go through."""

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        if any(p.text == "poison" for p in record.content):
            raise RuntimeError("the adapter cannot encode this episode")
        return await self.inner.remember(memory_id, record)


async def test_an_episode_that_can_never_be_delivered_fails_with_its_reason(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An episode the provider fails on every time is tried a bounded number of times and then ends
    `failed` with its reason; its job says so, nothing stays pending, and the memory's next observe is
    answered 201 at once instead of queueing behind it."""
    clock = Clock(monkeypatch)
    _, agent, root = await writable_root(gateway)
    handle = gateway.services.providers["local"]
    handle.provider = Poisoned(handle.provider)
    url = f"/v1/memories/{root['id']}/observe"
    stuck = await agent.post(url, json={"content": "poison"})
    assert stuck.status_code == 202, stuck.text
    for _ in range(60):
        clock.advance(600)
        await outbox.deliver_due(gateway.services)
    job = (await agent.get(f"/v1/memories/{root['id']}/jobs/{stuck.json()['job']['id']}")).json()
    assert job["status"] == "failed"
    # The reason names the failure by its kind only: an unexpected exception's text is not shown to callers.
    assert "RuntimeError" in job["error"] and f"{outbox.MAX_ATTEMPTS} attempts" in job["error"]
    assert await outbox.pending_count(gateway.services) == 0
    later = await agent.post(url, json={"content": "a later turn"})
    assert later.status_code == 201, later.text


async def test_an_unreachable_provider_does_not_use_up_an_episode_s_attempts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0 refuses connections for longer than the attempts allowed to a failing episode: refused
    connections never reached it, so the episode stays pending and arrives once mem0 is back."""
    clock = Clock(monkeypatch)
    fake = FakeMem0("oss")
    monkeypatch.setenv(KEY, fake.api_key or "")
    config = make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY,
        "failure_threshold": 1_000_000}})  # the breaker's own rest is not what this test is about
    fake.fail("connect", times=1_000_000)
    async with running_gateway(config, http_client=fake.client()) as gw:
        agent_id, agent = await gw.member("bot", "agent")
        memory = (await gw.root("Customer 7", provider="m0"))["id"]
        await gw.grant(memory, f"member:{agent_id}", "read", "write")
        answer = await agent.post(f"/v1/memories/{memory}/observe", json={"content": TURN})
        assert answer.status_code == 202
        for _ in range(40):
            clock.advance(600)
            await outbox.deliver_due(gw.services)
        assert await outbox.pending_count(gw.services) == 1
        fake._failures.clear()
        clock.advance(600)
        assert await outbox.deliver_due(gw.services) == 1
        job: dict[str, Any] = (await agent.get(f"/v1/memories/{memory}/jobs/{answer.json()['job']['id']}")).json()
    assert job["status"] == "completed"
    assert len(fake.memories) == 1
