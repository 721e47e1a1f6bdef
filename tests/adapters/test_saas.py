"""The SaaS memory adapter against the fake service: configuration, isolation by scope and actor, how a
record maps onto the vendor's fields, supersession chains, forget as expiry, erase over the chain, and the
key staying out of everything the adapter says."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

import adapters
from adapters.base import NewRecord, Part, ProviderRejected, RecallQuery, RecordNotFound, Revision, Writer
from adapters.saas import SaasProvider
from tests.adapters.fake_saas import BASE_URL, KEY, FakeSaas, saas_provider

AGENT = Writer(kind="member", id="mbr_agent", type="agent")
PERSON = Writer(kind="member", id="mbr_person", type="human")
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
MEM_A = "hmem_" + "a" * 32
MEM_B = "hmem_" + "b" * 32
SCOPE_A = "memfed-" + MEM_A


def new(text: str, *, type: str = "note", minutes: int = 0, **fields: Any) -> NewRecord:
    return NewRecord(type=type, content=(Part(type="text", text=text),), written_by=AGENT,
                     written_at=T0 + timedelta(minutes=minutes), **fields)


@pytest.fixture
def fake() -> FakeSaas:
    return FakeSaas()


@pytest.fixture
async def saas(fake: FakeSaas) -> AsyncIterator[SaasProvider]:
    async with saas_provider(fake) as provider:
        yield provider


def vendor(fake: FakeSaas, record_id: str) -> dict[str, Any]:
    return fake.records[record_id.removeprefix("hrec_")]


# --------------------------------------------------------------------------- configuration


async def test_factory_opens_the_adapter_from_its_provider_table(tmp_path: Path) -> None:
    """`adapter = "saas"` names this package; its options are base_url, app_id, scope_prefix, timeout,
    vector_search, derivation and the ingest polling, and what it writes lands under them."""
    fake = FakeSaas()
    async with fake.client() as client:
        provider = await adapters.factory("saas")(
            {"base_url": BASE_URL, "app_id": "crm", "scope_prefix": "team-", "timeout": 1.5,
             "vector_search": False, "derivation": "agent"},
            client=client, data_dir=tmp_path, api_key=KEY)
        written = await provider.remember(MEM_A, new("Scoped."))
    stored = vendor(fake, written.id)
    assert (stored["app_id"], stored["scope_id"], stored["actor_id"]) == ("crm", "team-" + MEM_A, "team-" + MEM_A)
    caps = provider.capabilities()
    assert (caps.derivation, caps.emulated_signals) == ("agent", ("query", "text"))


async def test_the_example_configs_saas_table_opens_the_adapter(tmp_path: Path) -> None:
    """config.example.toml's `[providers.saas]`, uncommented, is a table the adapter accepts as it stands."""
    from gateway.base.config import load

    example = Path(__file__).resolve().parents[2] / "config.example.toml"
    enabled = re.sub(r"(?m)^# ?(\[|[a-z_]+ = )", r"\1", example.read_text())
    (tmp_path / "all.toml").write_text(enabled)
    table = load(tmp_path / "all.toml").providers["saas"]
    assert (table.adapter, table.api_key_env, table.timeout) == ("saas", "SAAS_MEMORY_KEY", 5.0)
    async with httpx.AsyncClient() as client:
        provider = await adapters.factory("saas")({**table.options, "base_url": table.base_url},
                                                  client=client, data_dir=tmp_path, api_key=KEY)
    assert provider.capabilities().derivation == "none"


@pytest.mark.parametrize("options, api_key, says", [
    ({"base_url": BASE_URL, "tenant": "t1"}, KEY, "unknown saas options: tenant"),
    ({}, KEY, "base_url"),
    ({"base_url": BASE_URL}, None, "API key"),
    ({"base_url": BASE_URL, "vector_search": "yes"}, KEY, "vector_search"),
    ({"base_url": BASE_URL, "derivation": "background"}, KEY, "derivation"),
    ({"base_url": BASE_URL, "scope_prefix": "a b"}, KEY, "scope_prefix"),
])  # fmt: skip
async def test_factory_refuses_a_table_it_cannot_use(tmp_path: Path, options: dict[str, Any], api_key: str | None,
                                                     says: str) -> None:
    """A bad provider table fails at start with a ValueError naming the setting (a tenant is never one)."""
    async with httpx.AsyncClient() as client:
        with pytest.raises(ValueError, match=says):
            await adapters.factory("saas")(options, client=client, data_dir=tmp_path, api_key=api_key)


# --------------------------------------------------------------------------- isolation


async def test_every_call_names_the_scope_and_never_the_tenant(saas: SaasProvider, fake: FakeSaas) -> None:
    """Writes carry scope_id = actor_id = prefix + memory id and the app; no request names a tenant."""
    first = await saas.remember(MEM_A, new("Acme renews in March."))
    await saas.revise(MEM_A, first.id, Revision(written_by=PERSON, written_at=T0 + timedelta(minutes=1),
                                                title="Renewal"))
    await saas.recall([MEM_A], RecallQuery(query="Acme renewal"))
    await saas.list(MEM_A)
    for body in fake.bodies("POST", "/records") + fake.bodies("POST", "/recall"):
        assert (body["scope_id"], body["actor_id"], body["app_id"]) == (SCOPE_A, SCOPE_A, "memfed")
    for _, _, params, body in fake.requests:
        assert "tenant" not in str(params) and "tenant" not in str(body)


async def test_records_not_filed_under_the_memorys_actor_are_never_read(saas: SaasProvider, fake: FakeSaas) -> None:
    """A tenant-shared record (no actor) and another actor's record placed in the memory's scope are not
    the memory's: list, recall and get all leave them out (enforced_filter)."""
    mine = await saas.remember(MEM_A, new("Acme renewal is in March."))
    shared = fake.put(content="Acme renewal shared with the whole tenant.", kind="semantic",
                      scope_id=SCOPE_A, app_id="memfed")
    other = fake.put(content="Acme renewal of another actor.", kind="semantic", scope_id=SCOPE_A,
                     app_id="memfed", actor_id="someone-else")

    assert [r.id for r in (await saas.list(MEM_A, include="all")).items] == [mine.id]
    for signal in ({"query": "Acme renewal"}, {"text": "Acme renewal"}):
        hits = (await saas.recall([MEM_A], RecallQuery(**signal))).hits  # type: ignore[arg-type]
        assert [h.record.id for h in hits] == [mine.id]
    for vendor_id in (shared, other):
        with pytest.raises(RecordNotFound):
            await saas.get(MEM_A, "hrec_" + vendor_id)


async def test_another_tenants_key_sees_nothing(fake: FakeSaas) -> None:
    """The tenant is the key's: the same memory id under another key is another store."""
    fake.keys["sk-other"] = "tenant-b"
    async with saas_provider(fake) as saas:
        written = await saas.remember(MEM_A, new("Tenant A's record."))
    async with fake.client() as client:
        other = SaasProvider(client, base_url=BASE_URL, api_key="sk-other", ingest_poll=0)
        assert (await other.list(MEM_A)).items == ()
        with pytest.raises(RecordNotFound):
            await other.get(MEM_A, written.id)


# --------------------------------------------------------------------------- records


@pytest.mark.parametrize("record_type, kind, category", [
    ("fact", "semantic", None), ("entity", "semantic", None), ("link", "semantic", None),
    ("episode", "episodic", None), ("procedure", "procedural", None), ("note", "semantic", "note"),
])  # fmt: skip
async def test_types_map_onto_kinds_and_read_back_as_written(saas: SaasProvider, fake: FakeSaas, record_type: str,
                                                             kind: str, category: str | None) -> None:
    """fact, entity, link: semantic; episode: episodic; procedure: procedural; note: semantic with
    category note. The type, title and parts come back from memfed's metadata unchanged."""
    written = await saas.remember(MEM_A, new("Words.", type=record_type, title="A title"))
    stored = vendor(fake, written.id)
    assert (stored["kind"], stored.get("category")) == (kind, category)
    read = await saas.get(MEM_A, written.id)
    assert (read.type, read.title, read.content) == (record_type, "A title", (Part(type="text", text="Words."),))


async def test_importance_tier_and_expiry_come_from_the_record(saas: SaasProvider, fake: FakeSaas) -> None:
    """attributes.importance and attributes.tier become the vendor's fields (defaults 0.5, contextual);
    attributes.category its category; time.valid_to its expiry; everything else stays in metadata."""
    until = datetime(2030, 1, 1, tzinfo=UTC)
    ranked = await saas.remember(MEM_A, new("Key fact.", type="fact", valid_to=until,
                                            attributes={"importance": 0.9, "tier": "core", "category": "billing"}))
    plain = await saas.remember(MEM_A, new("Plain fact.", type="fact"))

    stored = vendor(fake, ranked.id)
    assert (stored["importance"], stored["tier"], stored["category"]) == (0.9, "core", "billing")
    assert datetime.fromisoformat(stored["expires_at"]) == until
    assert (vendor(fake, plain.id)["importance"], vendor(fake, plain.id)["tier"]) == (0.5, "contextual")
    assert dict((await saas.get(MEM_A, ranked.id)).attributes) == {"importance": 0.9, "tier": "core",
                                                                   "category": "billing"}


@pytest.mark.parametrize("attributes", [{"importance": 2}, {"importance": "high"}, {"importance": True},
                                        {"importance": float("nan")}, {"tier": "top"}, {"category": 7},
                                        {"score": float("nan")}, {"nested": {"x": float("inf")}}])
async def test_an_attribute_the_vendor_cannot_hold_is_refused_before_sending(
        saas: SaasProvider, fake: FakeSaas, attributes: dict[str, Any]) -> None:
    """A bad importance, tier or category is the caller's mistake: refused, and nothing reaches the vendor."""
    with pytest.raises(ProviderRejected):
        await saas.remember(MEM_A, new("Words.", attributes=attributes))
    assert fake.requests == []


async def test_revise_supersedes_and_the_chain_is_the_history(saas: SaasProvider, fake: FakeSaas) -> None:
    """Each revise is a vendor supersede: the old vendor record is kept, superseded by the new; the memfed
    id stays the chain's first; history is the chain; the vendor hides the old one from recall."""
    first = await saas.remember(MEM_A, new("Acme renews in March."))
    text = (Part(type="text", text="Acme renews in April."),)
    second = await saas.revise(MEM_A, first.id, Revision(written_by=PERSON, written_at=T0 + timedelta(1),
                                                         content=text))
    third = await saas.revise(MEM_A, first.id, Revision(written_by=AGENT, written_at=T0 + timedelta(2),
                                                        title="Renewal month"))

    assert second.id == third.id == first.id and third.version == 3
    root = vendor(fake, first.id)
    middle = fake.records[root["superseded_by"]]
    head = fake.records[middle["superseded_by"]]
    assert (middle["supersedes"], head["supersedes"], head["superseded_by"]) == (root["id"], middle["id"], None)
    assert [(v.version, v.status, v.written_by) for v in await saas.history(MEM_A, first.id)] == [
        (1, "superseded", AGENT), (2, "superseded", PERSON), (3, "active", AGENT)]
    with pytest.raises(RecordNotFound):  # a later link does not name a record of its own
        await saas.get(MEM_A, "hrec_" + middle["id"])
    hits = (await saas.recall([MEM_A], RecallQuery(text="Acme"))).hits
    assert [(h.record.id, h.record.version) for h in hits] == [(first.id, 3)]
    everything = (await saas.recall([MEM_A], RecallQuery(text="Acme", include="all"))).hits
    assert [(h.record.id, h.record.version) for h in everything] == [(first.id, 3)]


async def test_forget_expires_the_head_and_keeps_history(saas: SaasProvider, fake: FakeSaas) -> None:
    """Forget sets the head's expiry to the forget time: the vendor calls it expired and leaves it out of
    recall; memfed lists it with include all, shows it forgotten, and history keeps what was forgotten."""
    kept = await saas.remember(MEM_A, new("Acme stays."))
    gone = await saas.remember(MEM_A, new("Acme goes."))
    at = T0 + timedelta(hours=1)

    closed = await saas.forget(MEM_A, gone.id, PERSON, at)

    assert (closed.status, closed.version, closed.written_by) == ("forgotten", 2, PERSON)
    assert datetime.fromisoformat(vendor(fake, gone.id)["expires_at"]) == at
    assert fake._public(vendor(fake, gone.id))["status"] == "expired"
    assert [h.record.id for h in (await saas.recall([MEM_A], RecallQuery(text="Acme"))).hits] == [kept.id]
    assert {r.id for r in (await saas.list(MEM_A, include="all")).items} == {kept.id, gone.id}
    chain = await saas.history(MEM_A, gone.id)
    assert [(v.status, v.content) for v in chain] == [("superseded", gone.content), ("forgotten", gone.content)]
    again = await saas.revise(MEM_A, gone.id, Revision(written_by=AGENT, written_at=at + timedelta(1),
                                                       title="Back"))
    assert (again.status, again.version) == ("active", 3)


async def test_erase_forgets_every_record_of_the_chain_for_good(saas: SaasProvider, fake: FakeSaas) -> None:
    """Erase is the vendor's permanent forget by ids over the whole chain; nothing is left to report
    unreachable, and the vendor holds none of the chain afterwards."""
    doomed = await saas.remember(MEM_A, new("Secret plan."))
    await saas.revise(MEM_A, doomed.id, Revision(written_by=PERSON, written_at=T0 + timedelta(1), title="v2"))
    chain_ids = {i for i, r in fake.records.items() if "Secret" in r["content"] or r["content"].startswith("v2")}
    assert len(chain_ids) == 2

    erasure = await saas.erase(MEM_A, [doomed.id])

    assert (erasure.erased, erasure.unreachable) == ((doomed.id,), ())
    assert set(fake.bodies("POST", "/forget")[0]["ids"]) == chain_ids
    assert not chain_ids & fake.records.keys()


async def test_a_repeated_write_is_answered_once_by_its_idempotency_key(saas: SaasProvider, fake: FakeSaas) -> None:
    """A store whose answer was lost and is sent again with the same write id makes one vendor record."""
    fake.fail("applied_timeout", path="/records")
    record = new("Acme renews in March.", write_id="wr_1")
    with pytest.raises(Exception, match="did not answer"):
        await saas.remember(MEM_A, record)
    found = await saas.find_write(MEM_A, "wr_1")
    again = await saas.remember(MEM_A, record)
    assert found is not None and found.id == again.id
    assert len(fake.records) == 1


async def test_the_key_is_never_in_what_the_adapter_says(saas: SaasProvider, fake: FakeSaas,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    """Neither the adapter's repr, a failure's message nor a log line carries the API key, even when the
    vendor's own error message echoes it."""
    import logging

    caplog.set_level(logging.DEBUG)
    fake.fail("500")
    with pytest.raises(Exception) as caught:
        await saas.remember(MEM_A, new("Words."))
    assert "[redacted]" in str(caught.value)
    assert KEY not in repr(saas) and KEY not in str(caught.value) and KEY not in caplog.text


async def test_concurrent_revises_from_two_gateways_are_all_kept_in_turn(fake: FakeSaas) -> None:
    """Six revises at once, three through each of two gateways: within a gateway they take turns; across
    them both read the same head, the vendor takes one supersede of it and refuses the other (409
    conflict), which reads the chain again, so all six are kept, one after another."""
    import asyncio

    async with saas_provider(fake) as one, saas_provider(fake) as two:
        first = await one.remember(MEM_A, new("Plan zero."))
        answers = await asyncio.gather(*(
            (one if i % 2 else two).revise(MEM_A, first.id, Revision(
                written_by=PERSON, written_at=T0 + timedelta(minutes=i), title=f"Plan {i}")) for i in range(1, 7)))
        chain = await one.history(MEM_A, first.id)
        hits = (await two.recall([MEM_A], RecallQuery(text="Plan"))).hits
    assert sorted(a.version for a in answers) == [2, 3, 4, 5, 6, 7]
    assert sorted(v.title for v in chain[1:] if v.title) == [f"Plan {i}" for i in range(1, 7)]
    assert sum(1 for r in fake.records.values() if r["superseded_by"] is None) == 1
    assert [(h.record.version, h.record.title) for h in hits] == [(chain[-1].version, chain[-1].title)]
    assert any(b == "conflict" for b in _error_codes(fake)), "the race never happened: the test proves nothing"


@pytest.mark.parametrize("forget_first, patch_turns", [(True, 0), (False, 0), (False, 6)])
async def test_a_forget_racing_a_revise_leaves_one_consistent_history(fake: FakeSaas, forget_first: bool,
                                                                      patch_turns: int) -> None:
    """A forget through one gateway and a revise through another at once, either starting first: the
    chain numbers its versions 1..n without a gap, get and a recall hit agree on the current version (a
    revise that superseded a head forgotten after its read renumbers itself), and a forget whose head was
    superseded meanwhile is put back and applied to the new head."""
    import asyncio

    fake.slow["PATCH"] = patch_turns  # 6: the forget lands after the revise has superseded and looked
    async with saas_provider(fake) as one, saas_provider(fake) as two:
        for word in ("alpha", "bravo", "charlie", "delta"):
            record = await one.remember(MEM_A, new(f"The {word} plan."))
            forget = one.forget(MEM_A, record.id, PERSON, T0 + timedelta(hours=1))
            revise = two.revise(MEM_A, record.id, Revision(written_by=AGENT, written_at=T0 + timedelta(hours=2),
                                                           title=f"{word} revised"))
            await asyncio.gather(*((forget, revise) if forget_first else (revise, forget)))
            chain = await one.history(MEM_A, record.id)
            assert [v.version for v in chain] == list(range(1, len(chain) + 1))
            current = await two.get(MEM_A, record.id)
            # The head alone, as a recall reads it: active ones by default, a forgotten one with include all.
            include: Literal["active", "all"] = "active" if current.status == "active" else "all"
            hits = (await one.recall([MEM_A], RecallQuery(text=word, include=include))).hits
            assert [(h.record.id, h.record.version) for h in hits] == [(record.id, current.version)]
            assert [v.status for v in chain[:-1]] == ["superseded"] * (len(chain) - 1)
            assert [v.status for v in chain].count("forgotten") == (chain[-1].status == "forgotten")
            assert _stored_numbers(fake, record.id) == _places(fake, record.id)


def _chain_at(fake: FakeSaas, record_id: str) -> list[dict[str, Any]]:
    chain = [vendor(fake, record_id)]
    while chain[-1]["superseded_by"]:
        chain.append(fake.records[chain[-1]["superseded_by"]])
    return chain


def _stored_numbers(fake: FakeSaas, record_id: str) -> list[int]:
    return [r["metadata"]["memfed"]["version"]["number"] for r in _chain_at(fake, record_id)]


def _places(fake: FakeSaas, record_id: str) -> list[int]:
    """Where each vendor record's first version stands in the chain (a forgotten one holds two)."""
    places, place = [], 1
    for r in _chain_at(fake, record_id):
        places.append(place)
        place += 2 if "forgotten" in r["metadata"]["memfed"] else 1
    return places


def _error_codes(fake: FakeSaas) -> list[str]:
    return [code for code in fake.answered_codes]


async def test_a_recall_over_two_memories_answers_from_both_and_no_third(saas: SaasProvider) -> None:
    """One scope per vendor recall (searches_many_memories: false), so the adapter asks each memory's scope
    in turn: both memories answer, a third holding the same words does not."""
    mem_c = "hmem_" + "c" * 32
    found = {m: await saas.remember(m, new(f"Acme renewal for {m[-1]}.")) for m in (MEM_A, MEM_B, mem_c)}
    hits = (await saas.recall([MEM_A, MEM_B], RecallQuery(query="Acme renewal"))).hits
    assert {(h.record.memory_id, h.record.id) for h in hits} == {(m, found[m].id) for m in (MEM_A, MEM_B)}


async def test_the_start_up_probe_asks_the_vendor_with_memfeds_key(fake: FakeSaas) -> None:
    """probe is GET /stats (then one recall to learn whether the vendor embeds): it passes with the right key
    and is ProviderUnauthorized with a wrong one, which is refused at the first call."""
    from adapters.base import ProviderUnauthorized

    async with saas_provider(fake) as saas:
        await saas.probe()
    async with fake.client() as client:
        with pytest.raises(ProviderUnauthorized):
            await SaasProvider(client, base_url=BASE_URL, api_key="sk-wrong").probe()
    assert [(m, p) for m, p, _, _ in fake.requests] == [("GET", "/stats"), ("POST", "/recall"), ("GET", "/stats")]
