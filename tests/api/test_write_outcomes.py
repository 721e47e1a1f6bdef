"""A write is never doubled and never reported failed when it was applied (issue 10 items 1 and 8).

Every write carries a memfed write id to the vendor. A call that failed after it may have reached the
vendor is first looked for there by that id; what cannot be found yet is answered 503 with
`detail.outcome: "unknown"`, kept with its Idempotency-Key, and looked for again by the next repeat
before anything is written again. The vendor is the mem0 OSS fake at the HTTP layer, which can keep a
write after its client has gone, and the embedded provider with a commit that outlives its timeout.
"""

from __future__ import annotations

import asyncio
import itertools
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.base import NewRecord, Record
from gateway.server.app import create_app, open_services
from tests._postgres import fresh_schema
from tests.adapters.fake_mem0 import FakeMem0
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.test_observe import Wrapped

KEY = "MEMFED_TEST_MEM0_KEY"


def oss_config(tmp_path: Path, fake: FakeMem0, monkeypatch: pytest.MonkeyPatch, **provider: Any) -> Any:
    monkeypatch.setenv(KEY, fake.api_key or "")
    return make_config(tmp_path, providers={"m0": {
        "adapter": "mem0", "variant": "oss", "base_url": fake.base_url, "api_key_env": KEY, **provider}})


async def mem0_memory(gw: Gateway) -> str:
    return str((await gw.root("Customer 7", provider="m0"))["id"])


def adds(fake: FakeMem0) -> int:
    return sum(1 for r in fake.requests if r.method == "POST" and r.url.path == "/memories")


async def test_a_remember_that_lands_after_its_timeout_is_not_doubled_by_a_retry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0 keeps the add although the client timed out, and stores it only later: the first answer is 503
    with outcome unknown, a repeat before the write shows up is 503 again and sends nothing, and the repeat
    after it landed answers 201 with that record. mem0 holds one record."""
    fake = FakeMem0("oss")
    async with running_gateway(oss_config(tmp_path, fake, monkeypatch), http_client=fake.client()) as gw:
        url = f"/v1/memories/{await mem0_memory(gw)}/records"
        headers = {"Idempotency-Key": "renewal-1"}
        fake.fail("late", when=lambda r: r.method == "POST" and r.url.path == "/memories")
        first = await gw.admin.post(url, json={"content": "Acme renews in March"}, headers=headers)
        assert first.status_code == 503, first.text
        error = first.json()["error"]
        assert (error["code"], error["detail"]["outcome"]) == ("memory_unavailable", "unknown")

        early = await gw.admin.post(url, json={"content": "Acme renews in March"}, headers=headers)
        assert early.status_code == 503, early.text
        assert early.json()["error"]["detail"]["outcome"] == "unknown"
        assert int(early.headers["retry-after"]) > 0
        assert adds(fake) == 1

        assert fake.land() == 1
        settled = await gw.admin.post(url, json={"content": "Acme renews in March"}, headers=headers)
        assert settled.status_code == 201, settled.text
        again = await gw.admin.post(url, json={"content": "Acme renews in March"}, headers=headers)
        assert again.json()["id"] == settled.json()["id"]
        assert again.headers["idempotent-replayed"] == "true"
    assert adds(fake) == 1
    [stored] = fake.memories.values()
    assert settled.json()["id"] == "hrec_" + stored["id"]


async def test_a_retry_after_a_write_that_never_landed_writes_it_once_the_outcome_settled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The add timed out and mem0 never stored it: once the provider's settle time has passed, the repeat
    finds nothing under the write id and writes the record, once."""
    fake = FakeMem0("oss")
    config = oss_config(tmp_path, fake, monkeypatch, write_settle=0.05)
    async with running_gateway(config, http_client=fake.client()) as gw:
        url = f"/v1/memories/{await mem0_memory(gw)}/records"
        headers = {"Idempotency-Key": "lost-1"}
        fake.fail("timeout", when=lambda r: r.method == "POST" and r.url.path == "/memories")
        first = await gw.admin.post(url, json={"content": "never arrived"}, headers=headers)
        assert first.json()["error"]["detail"]["outcome"] == "unknown"
        await asyncio.sleep(0.1)
        retried = await gw.admin.post(url, json={"content": "never arrived"}, headers=headers)
        assert retried.status_code == 201, retried.text
    assert [m["memory"] for m in fake.memories.values()] == ["never arrived"]


@pytest.mark.parametrize("mode", ["applied_502", "applied_drop", "applied_timeout"])
async def test_a_remember_applied_but_answered_with_a_failure_is_reported_written(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: Any
) -> None:
    """mem0 stored the add and then answered 502, dropped the connection, or lost its answer: the gateway
    finds the write by its id and answers 201 with the record mem0 holds, once."""
    fake = FakeMem0("oss")
    async with running_gateway(oss_config(tmp_path, fake, monkeypatch), http_client=fake.client()) as gw:
        url = f"/v1/memories/{await mem0_memory(gw)}/records"
        fake.fail(mode, when=lambda r: r.method == "POST" and r.url.path == "/memories")
        made = await gw.admin.post(url, json={"content": "Dana prefers email"})
        assert made.status_code == 201, made.text
    [stored] = fake.memories.values()
    assert made.json()["id"] == "hrec_" + stored["id"]


async def test_sixty_concurrent_revises_applied_at_mem0_are_never_reported_failed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """60 revises at once through memfed on the mem0 OSS fake, 10 of whose updates the server applies and
    still answers 502 (as the real server did): every revise answers 200 and each record holds its revision."""
    fake = FakeMem0("oss")
    async with running_gateway(oss_config(tmp_path, fake, monkeypatch), http_client=fake.client()) as gw:
        memory = await mem0_memory(gw)
        url = f"/v1/memories/{memory}/records"
        made = [(await gw.admin.post(url, json={"content": f"plan {i}"})).json()["id"] for i in range(60)]
        puts = itertools.count()
        fake.fail("applied_502", times=10, when=lambda r: r.method == "PUT" and next(puts) % 6 == 5)
        answers = await asyncio.gather(*(gw.admin.patch(f"{url}/{rid}", json={"content": f"plan {i} revised"})
                                         for i, rid in enumerate(made)))
        assert [a.status_code for a in answers] == [200] * 60, [a.text for a in answers if a.status_code != 200]
        assert [a.json()["version"] for a in answers] == [2] * 60
        texts = {(await gw.admin.get(f"{url}/{rid}")).json()["content"][0]["text"] for rid in made}
    assert texts == {f"plan {i} revised" for i in range(60)}
    assert all(f.times == 0 for f in fake._failures), "the fake applied-and-failed fewer updates than asked"


async def test_a_local_write_committed_then_timed_out_is_reported_written_and_not_doubled(tmp_path: Path) -> None:
    """The embedded provider commits the record and the call is then cancelled by the provider timeout: the
    answer is 201 with the committed record, and a repeat with the same key replays it; one record."""
    config = make_config(tmp_path, providers={"local": {"adapter": "local", "timeout": 0.3}})
    async with running_gateway(config) as gw:
        memory = (await gw.root("Notes"))["id"]
        stalled = stall_after_commit(gw)
        url = f"/v1/memories/{memory}/records"
        headers = {"Idempotency-Key": "committed-once"}
        first = await gw.admin.post(url, json={"content": "kept once"}, headers=headers)
        again = await gw.admin.post(url, json={"content": "kept once"}, headers=headers)
        listing = (await gw.admin.get(url)).json()["data"]
    assert stalled == ["COMMIT"]
    assert [r["content"][0]["text"] for r in listing] == ["kept once"]
    assert first.status_code == 201, first.text
    assert again.json()["id"] == first.json()["id"] == listing[0]["id"]


def stall_after_commit(gw: Gateway) -> list[str]:
    """The next COMMIT of the embedded provider's writer lands, then its call hangs until the provider
    timeout cancels it. Returns the list the stalled statement is put in."""
    db = gw.services.providers["local"].provider._db  # type: ignore[attr-defined]
    execute = db.execute
    stalled: list[str] = []

    async def commit_then_stall(sql: str, *args: Any, **kwargs: Any) -> Any:
        result = await execute(sql, *args, **kwargs)
        if sql == "COMMIT" and not stalled:
            stalled.append(sql)
            await asyncio.sleep(30)
        return result

    db.execute = commit_then_stall
    return stalled


async def test_an_erase_whose_outcome_is_unknown_still_removes_the_file_bytes(tmp_path: Path) -> None:
    """The embedded provider commits an erase and the call is then cancelled by its timeout: the answer is
    503 with the outcome unknown, and the bytes of the record's file part are gone all the same (they must
    not outlive the record); a repeat with the same key finds nothing left and answers 200."""
    config = make_config(tmp_path, providers={"local": {"adapter": "local", "timeout": 0.3}})
    async with running_gateway(config) as gw:
        memory = (await gw.root("Notes"))["id"]
        upload = await gw.admin.post("/v1/files", files={"file": ("plan.txt", b"secret plan", "text/plain")},
                                     data={"purpose": "memory"})
        file_id = upload.json()["id"]
        made = await gw.admin.post(f"/v1/memories/{memory}/records",
                                   json={"content": [{"type": "file", "file": {"id": file_id}}]})
        assert made.status_code == 201, made.text
        stalled = stall_after_commit(gw)
        headers = {"Idempotency-Key": "erase-once"}
        body = {"record_ids": [made.json()["id"]]}
        first = await gw.admin.post(f"/v1/memories/{memory}/erase", json=body, headers=headers)
        assert stalled == ["COMMIT"]
        assert first.status_code == 503, first.text
        assert first.json()["error"]["detail"]["outcome"] == "unknown"
        assert await gw.services.files.read(file_id) is None
        assert (await gw.admin.get(f"/v1/memories/{memory}/records/{made.json()['id']}")).status_code == 404
        again = await gw.admin.post(f"/v1/memories/{memory}/erase", json=body, headers=headers)
        assert again.status_code == 200, again.text


async def test_a_write_that_never_left_is_run_again_by_its_repeat(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mem0 refused the connection: nothing can have been written, so the answer is a plain 503 (no unknown
    outcome) and the repeat with the same key writes the record at once."""
    fake = FakeMem0("oss")
    async with running_gateway(oss_config(tmp_path, fake, monkeypatch), http_client=fake.client()) as gw:
        url = f"/v1/memories/{await mem0_memory(gw)}/records"
        headers = {"Idempotency-Key": "refused-1"}
        fake.fail("connect", when=lambda r: r.method == "POST" and r.url.path == "/memories")
        refused = await gw.admin.post(url, json={"content": "try again"}, headers=headers)
        assert refused.status_code == 503
        assert "outcome" not in refused.json()["error"]["detail"]
        again = await gw.admin.post(url, json={"content": "try again"}, headers=headers)
        assert again.status_code == 201, again.text
    assert [m["memory"] for m in fake.memories.values()] == ["try again"]


# ------------------------------------------------------------------ the Idempotency-Key itself


class Slow(Wrapped):
    """Takes its time over a remember, so that requests made together overlap."""

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        await asyncio.sleep(0.3)
        return await self.inner.remember(memory_id, record)


@pytest.mark.parametrize("state", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def test_one_key_repeated_on_two_gateways_at_once_writes_once(tmp_path: Path, state: str) -> None:
    """Two gateways on one state database and one provider file, the same Idempotency-Key sent to both at
    once, three times each: the key is claimed in the database, so one request writes and the five others
    wait and replay its answer. No 500, one record."""
    async def scenario(state_table: dict[str, Any]) -> None:
        def config(name: str) -> Any:
            return make_config(tmp_path / name, state=state_table, audit={"enabled": False},
                               providers={"local": {"adapter": "local", "path": str(tmp_path / "records.sqlite3")}})

        async with running_gateway(config("a")) as first:
            memory = (await first.root("Shared"))["id"]
            second_services = await open_services(config("b"))
            try:
                app = create_app(config("b"), services=second_services)
                second = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://memfed",
                                           headers={"Authorization": f"Bearer {first.admin_key}"})
                for services in (first.services, second_services):
                    handle = services.providers["local"]
                    handle.provider = Slow(handle.provider)
                url = f"/v1/memories/{memory}/records"
                headers = {"Idempotency-Key": "both-gateways"}
                answers = await asyncio.gather(*(client.post(url, json={"content": "once"}, headers=headers)
                                                 for client in (first.admin, second) * 3))
                await second.aclose()
            finally:
                await second_services.close()
            assert [a.status_code for a in answers] == [201] * 6, [a.text for a in answers]
            assert len({a.json()["id"] for a in answers}) == 1
            assert sum(a.headers.get("idempotent-replayed") == "true" for a in answers) == 5
            assert len((await first.admin.get(url)).json()["data"]) == 1

    if state == "sqlite":
        await scenario({"url": f"sqlite:///{tmp_path}/state.sqlite3"})
        return
    async with fresh_schema("idem") as (_, schema):
        await scenario({"url": "postgresql://postgres@127.0.0.1:5432/test", "schema": schema})


async def test_a_failed_keyed_request_leaves_no_lock_behind(gateway: Gateway) -> None:
    """A keyed write that fails (a forget of a record that does not exist) releases what it held, and its
    answer is kept: a repeat answers the same 404 at once."""
    memory = (await gateway.root("Notes"))["id"]
    url = f"/v1/memories/{memory}/records/hrec_{'0' * 32}"
    headers = {"Idempotency-Key": "forget-nothing"}
    first = await gateway.admin.delete(url, headers=headers)
    assert first.status_code == 404
    assert gateway.services.idempotency._locks == {}
    again = await gateway.admin.delete(url, headers=headers)
    assert (again.status_code, again.json()) == (404, first.json())
    assert gateway.services.idempotency._locks == {}


async def test_a_keyed_request_cancelled_mid_write_is_taken_over_by_its_repeat(tmp_path: Path) -> None:
    """A keyed remember is cancelled while its provider call runs (the client's task goes away): nothing
    is left held in memory, its claim runs out with its lease, and the repeat takes the key over, looks for
    the write, finds none and writes the record once."""
    config = make_config(tmp_path, idempotency={"lease_seconds": 0.3})
    async with running_gateway(config) as gw:
        memory = (await gw.root("Notes"))["id"]
        handle = gw.services.providers["local"]
        inner = handle.provider
        handle.provider = Slow(inner)
        url = f"/v1/memories/{memory}/records"
        headers = {"Idempotency-Key": "cancelled-1"}
        request = asyncio.create_task(gw.admin.post(url, json={"content": "once"}, headers=headers))
        await asyncio.sleep(0.1)  # inside Slow.remember, before it writes
        request.cancel()
        with pytest.raises(asyncio.CancelledError):
            await request
        assert gw.services.idempotency._locks == {}
        handle.provider = inner
        again = await gw.admin.post(url, json={"content": "once"}, headers=headers)
        assert again.status_code == 201, again.text
        listing = (await gw.admin.get(url)).json()["data"]
    assert [r["id"] for r in listing] == [again.json()["id"]]
