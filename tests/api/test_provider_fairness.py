"""One member cannot take a provider away from everyone (issue 9 item 2).

The breaker counts only the vendor's own faults: a free query waiting for one of the embedded provider's
few statement runners, or running its statement under its own budget, is not the provider failing. And
per-member limits (`[limits]`) answer a member past them 429 `rate_limit_error` with Retry-After, while
other members go on.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import httpx

from tests.api._gateway import Gateway, make_config, running_gateway

# Never ends on its own: stopped by the statement's time budget, with the rows so far.
ENDLESS = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) AS n FROM c"
# The provider's timeout: a statement's budget is half of it, and four statements run at once, so
# sixteen queued statements take four budgets, twice the timeout.
TIMEOUT = 0.6


async def _two_members(gw: Gateway) -> tuple[httpx.AsyncClient, httpx.AsyncClient, str, str]:
    root = await gw.root("Company")
    noisy_memory = await gw.child(gw.admin, root["id"], "Noisy")
    quiet_memory = await gw.child(gw.admin, root["id"], "Quiet")
    noisy_id, noisy = await gw.member("noisy", "agent")
    quiet_id, quiet = await gw.member("quiet", "agent")
    await gw.grant(noisy_memory["id"], f"member:{noisy_id}", "read")
    await gw.grant(quiet_memory["id"], f"member:{quiet_id}", "read")
    for memory in (noisy_memory, quiet_memory):
        made = await gw.admin.post(f"/v1/memories/{memory['id']}/records",
                                   json={"type": "fact", "content": "renewal terms for the quarter"})
        assert made.status_code == 201, made.text
    return noisy, quiet, noisy_memory["id"], quiet_memory["id"]


def _flood(client: httpx.AsyncClient, memory_id: str, n: int) -> list[Any]:
    return [client.post(f"/v1/memories/{memory_id}/query", json={"language": "sql", "statement": ENDLESS})
            for _ in range(n)]


async def test_sixteen_free_queries_of_one_member_leave_the_breaker_closed(tmp_path: Path) -> None:
    """Sixteen concurrent free queries that each use their whole budget, queued behind the provider's
    four statement runners for twice its timeout: every one is answered (cut by its budget, said in
    degraded), the embedded provider's breaker stays closed with no failure counted, and another member
    reads and recalls its own memory meanwhile and after."""
    config = make_config(tmp_path, providers={"local": {"adapter": "local", "timeout": TIMEOUT}})
    async with running_gateway(config) as gw:
        noisy, quiet, noisy_memory, quiet_memory = await _two_members(gw)
        flood = [asyncio.ensure_future(f) for f in _flood(noisy, noisy_memory, 16)]
        await asyncio.sleep(TIMEOUT)  # the runners are taken and the rest wait
        during = await quiet.post(f"/v1/memories/{quiet_memory}/recall", json={"text": "renewal"})
        answers = await asyncio.gather(*flood)
        handle = gw.services.providers["local"]
        after = await quiet.get(f"/v1/memories/{quiet_memory}/records")

    assert [a.status_code for a in answers] == [200] * 16, [a.text for a in answers if a.status_code != 200]
    assert all(a.json()["degraded"] == [f"query:time_limit_{TIMEOUT / 2:g}s"] for a in answers)
    assert handle.breaker.state == "closed" and handle.breaker.failures == 0
    assert during.status_code == 200 and [r["memory"]["id"] for r in during.json()["results"]] == [quiet_memory]
    assert not [d for d in during.json()["degraded"] if d.startswith("provider:local:")], during.json()
    assert after.status_code == 200 and len(after.json()["data"]) == 1


async def test_a_member_past_its_concurrency_is_answered_429_with_retry_after(tmp_path: Path) -> None:
    """With `member_concurrency = 2`, six concurrent queries of one member: two run, four are 429
    `rate_limit_error` with Retry-After in the header and the envelope, before any work; another member
    is not held back by them, and an administrator is not limited."""
    config = make_config(tmp_path, limits={"member_concurrency": 2},
                         providers={"local": {"adapter": "local", "timeout": TIMEOUT}})
    async with running_gateway(config) as gw:
        noisy, quiet, noisy_memory, quiet_memory = await _two_members(gw)
        flood = [asyncio.ensure_future(f) for f in _flood(noisy, noisy_memory, 6)]
        await asyncio.sleep(0.05)
        during = await quiet.get(f"/v1/memories/{quiet_memory}/records")
        as_admin = await asyncio.gather(*_flood(gw.admin, noisy_memory, 3))
        answers = await asyncio.gather(*flood)

    statuses = sorted(a.status_code for a in answers)
    assert statuses == [200, 200, 429, 429, 429, 429]
    for refused in (a for a in answers if a.status_code == 429):
        error = refused.json()["error"]
        assert error["type"] == "rate_limit_error" and error["code"] == "memfed_rate_limited"
        assert error["detail"] == {"retry_after": 1, "limit": "member_concurrency"}
        assert refused.headers["retry-after"] == "1"
    assert during.status_code == 200
    assert [a.status_code for a in as_admin] == [200, 200, 200]


async def test_a_member_past_its_rate_is_answered_429_until_a_token_returns(tmp_path: Path) -> None:
    """With `member_rate = 0.5` and `member_burst = 2`, a member's third request in a row is 429 with
    the seconds until its next token (2), and the refusal changes nothing: another member's requests go on."""
    config = make_config(tmp_path, limits={"member_rate": 0.5, "member_burst": 2})
    async with running_gateway(config) as gw:
        noisy, quiet, noisy_memory, quiet_memory = await _two_members(gw)
        answers = [await noisy.get(f"/v1/memories/{noisy_memory}/records") for _ in range(3)]
        other = await quiet.get(f"/v1/memories/{quiet_memory}/records")

    assert [a.status_code for a in answers] == [200, 200, 429]
    refused = answers[2]
    assert refused.json()["error"]["type"] == "rate_limit_error"
    assert refused.json()["error"]["detail"] == {"retry_after": 2, "limit": "member_rate"}
    assert refused.headers["retry-after"] == "2"
    assert other.status_code == 200
