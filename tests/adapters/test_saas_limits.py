"""The SaaS memory's refusals and limits through the adapter: a bulk forget is only ever one memory's
scope and never empty, the record cap and the token quota are refusals naming their cause with nothing
stored, a 429 carries its Retry-After, and ingest jobs are polled to their end or fail loudly."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from adapters.base import (
    NewRecord,
    Part,
    ProviderRateLimited,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnauthorized,
    RecordLimit,
    Revision,
    Unsupported,
    Writer,
)
from adapters.saas import SaasProvider
from adapters.saas import wire as w
from tests.adapters.fake_saas import BASE_URL, KEY, FakeSaas, saas_provider

AGENT = Writer(kind="member", id="mbr_agent", type="agent")
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
MEM_A = "hmem_" + "a" * 32
MEM_B = "hmem_" + "b" * 32


def new(text: str, *, type: str = "fact", write_id: str | None = None) -> NewRecord:
    return NewRecord(type=type, content=(Part(type="text", text=text),), written_by=AGENT, written_at=T0,
                     write_id=write_id)


@pytest.fixture
def fake() -> FakeSaas:
    return FakeSaas()


@pytest.fixture
async def saas(fake: FakeSaas) -> AsyncIterator[SaasProvider]:
    async with saas_provider(fake) as provider:
        yield provider


def forget(fake: FakeSaas, body: Any) -> httpx.Response:
    return fake.handle(httpx.Request("POST", BASE_URL + "/forget", json=body,
                                     headers={"Authorization": f"Bearer {KEY}"}))


# --------------------------------------------------------------------------- forget by filter


@pytest.mark.parametrize("body", [{}, {"ids": []}, {"scope_id": None}, {"actor_id": "", "app_id": None}])
def test_the_vendor_rejects_an_empty_selector_and_deletes_nothing(fake: FakeSaas, body: dict[str, Any]) -> None:
    """The documented safety: an empty selector is 400 empty_selector; no record is gone."""
    kept = fake.put(content="Stays.", kind="semantic", scope_id="s")
    answer = forget(fake, body)
    assert (answer.status_code, answer.json()["error"]["code"]) == (400, "empty_selector")
    assert kept in fake.records


def test_a_selector_forgets_only_what_every_field_matches(fake: FakeSaas) -> None:
    """Selector fields combine with AND; `before` compares the creation time."""
    doomed = fake.put(content="a", kind="semantic", scope_id="s", category="x")
    other_scope = fake.put(content="b", kind="semantic", scope_id="t", category="x")
    other_category = fake.put(content="c", kind="semantic", scope_id="s", category="y")
    assert forget(fake, {"scope_id": "s", "category": "x"}).json() == {"forgotten": 1}
    assert doomed not in fake.records and {other_scope, other_category} <= fake.records.keys()
    future = (datetime.now(UTC) + timedelta(days=1)).isoformat()
    assert forget(fake, {"scope_id": "t", "before": future}).json() == {"forgotten": 1}


@pytest.mark.parametrize("scope", [{}, {"scope_id": "s"}, {"scope_id": "", "actor_id": "s", "app_id": "a"},
                                   {"scope_id": "s", "actor_id": "s"}])
def test_memfed_cannot_build_a_bulk_forget_wider_than_one_memory(scope: dict[str, str]) -> None:
    """The wire's only bulk forget needs scope, actor and app all named; and a forget by ids needs an id."""
    with pytest.raises(w.EmptySelector):
        w.forget_scope(scope)
    with pytest.raises(w.EmptySelector):
        w.forget_ids([])


async def test_dropping_a_memory_forgets_its_scope_and_nothing_else(saas: SaasProvider, fake: FakeSaas) -> None:
    """drop_memory sends one selector naming the memory's scope, actor and app; the other memory and a
    record another app keeps under the same scope id are untouched."""
    await saas.remember(MEM_A, new("Goes."))
    await saas.revise(MEM_A, (await saas.list(MEM_A)).items[0].id,
                      Revision(written_by=AGENT, written_at=T0 + timedelta(1), title="Goes too"))
    other = await saas.remember(MEM_B, new("Stays."))
    foreign_app = fake.put(content="Another app's.", kind="semantic", scope_id="memfed-" + MEM_A,
                           actor_id="memfed-" + MEM_A, app_id="billing")

    await saas.drop_memory(MEM_A)

    scope = "memfed-" + MEM_A
    assert fake.bodies("POST", "/forget") == [{"scope_id": scope, "actor_id": scope, "app_id": "memfed"}]
    assert set(fake.records) == {other.id.removeprefix("hrec_"), foreign_app}


async def test_an_empty_memory_id_is_refused_before_any_call(saas: SaasProvider, fake: FakeSaas) -> None:
    """No memory id, no scope: refused as the caller's mistake, nothing sent."""
    with pytest.raises(ProviderRejected):
        await saas.drop_memory("")
    assert fake.requests == []


# --------------------------------------------------------------------------- limits


async def test_the_record_cap_refuses_the_write_naming_its_cause(saas: SaasProvider, fake: FakeSaas) -> None:
    """Past the cap a store and a supersede are refused with RecordLimit (unsupported, not a failure)
    naming record_cap_exceeded; nothing is stored, nothing evicted, the record keeps its history."""
    fake.cap = 1
    first = await saas.remember(MEM_A, new("One."))
    with pytest.raises(RecordLimit, match="record_cap_exceeded") as refused:
        await saas.remember(MEM_A, new("Two."))
    assert isinstance(refused.value, Unsupported) and not refused.value.maybe_applied
    with pytest.raises(RecordLimit, match="record_cap_exceeded"):
        await saas.revise(MEM_A, first.id, Revision(written_by=AGENT, written_at=T0 + timedelta(1), title="v2"))
    assert len(fake.records) == 1 and len(await saas.history(MEM_A, first.id)) == 1


async def test_the_token_quota_refuses_before_anything_is_written(saas: SaasProvider, fake: FakeSaas) -> None:
    fake.token_quota = 4
    await saas.remember(MEM_A, new("Four words fit here."))
    with pytest.raises(Unsupported, match="token_quota_exceeded"):
        await saas.remember(MEM_A, new("These five words do not."))
    assert [r["content"] for r in fake.records.values()] == ["Four words fit here."]


async def test_a_429_carries_its_retry_after_and_a_bad_key_is_unauthorized(saas: SaasProvider,
                                                                           fake: FakeSaas) -> None:
    fake.fail("429", retry_after=12)
    with pytest.raises(ProviderRateLimited) as limited:
        await saas.list(MEM_A)
    assert limited.value.retry_after == 12
    async with fake.client() as client:
        wrong = SaasProvider(client, base_url=BASE_URL, api_key="sk-wrong")
        with pytest.raises(ProviderUnauthorized):
            await wrong.list(MEM_A)


# --------------------------------------------------------------------------- ingest


async def test_an_ingest_job_that_fails_at_the_cap_is_the_refusal(saas: SaasProvider, fake: FakeSaas) -> None:
    """A raw ingest whose job fails with record_cap_exceeded is answered as the cap refusal, not a success."""
    fake.cap = 0
    with pytest.raises(RecordLimit, match="record_cap_exceeded"):
        await saas.remember(MEM_A, new("An episode.", type="episode"))
    assert fake.records == {}


async def test_a_job_that_never_ends_times_out_loudly(fake: FakeSaas) -> None:
    """Polled `ingest_polls` times without an end, the write is a timeout that may have been applied."""
    async with saas_provider(fake, ingest_polls=1) as saas:
        with pytest.raises(ProviderTimeout) as late:
            await saas.remember(MEM_A, new("An episode.", type="episode"))
    assert late.value.maybe_applied
    assert [job["status"] for job in fake.jobs.values()] == ["running"]


async def test_an_episode_sent_again_is_the_same_job_and_record(saas: SaasProvider, fake: FakeSaas) -> None:
    """The answer to the metadata attach is lost; the episode sent again with its write id reuses the
    vendor's job (Idempotency-Key) and record, so there is one episode, with memfed's metadata."""
    episode = new("The customer called about the invoice.", type="episode", write_id="wr_ep")
    fake.fail("applied_timeout", path="/records/")
    with pytest.raises(ProviderTimeout):
        await saas.remember(MEM_A, episode)
    again = await saas.remember(MEM_A, episode)
    assert len(fake.records) == 1 and len(fake.jobs) == 1
    assert (again.type, again.write_id) == ("episode", "wr_ep")
    assert (await saas.find_write(MEM_A, "wr_ep")) == again


async def test_an_episode_cancelled_while_its_job_runs_is_finished_by_sending_it_again(fake: FakeSaas) -> None:
    """The gateway's timeout cancels the write between two polls of its job; sent again with the same write
    id, it polls the same job to its end: one job, one record, with memfed's metadata."""
    import asyncio

    episode = new("The customer asked for a refund.", type="episode", write_id="wr_cancel")
    async with saas_provider(fake, ingest_poll=0.05) as saas:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(saas.remember(MEM_A, episode), timeout=0.02)
        assert [job["status"] for job in fake.jobs.values()] == ["running"]
        again = await saas.remember(MEM_A, episode)
    assert len(fake.jobs) == 1 and len(fake.records) == 1
    assert (again.type, again.write_id, again.written_by) == ("episode", "wr_cancel", AGENT)
