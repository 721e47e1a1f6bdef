"""Recall on the SaaS memory: the fake ranks as the vendor documents (RRF of a lexical and a vector list,
weighted by importance, recency with a 30-day half-life, and tier; the actor privacy rule), and the
adapter maps memfed's signals onto it (query native, text as the lexical half, filters on kind, tier and
category native, the rest judged by memfed)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from adapters.base import Condition, NewRecord, Part, RecallQuery, Writer
from adapters.saas import SaasProvider
from tests.adapters.fake_saas import KEY, FakeSaas, cosine, embed, later, saas_provider

AGENT = Writer(kind="member", id="mbr_agent", type="agent")
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
MEM = "hmem_" + "a" * 32
SCOPE = "memfed-" + MEM


def new(text: str, *, type: str = "fact", **attributes: Any) -> NewRecord:
    return NewRecord(type=type, content=(Part(type="text", text=text),), written_by=AGENT, written_at=T0,
                     attributes=attributes)


def ask(fake: FakeSaas, **body: Any) -> list[dict[str, Any]]:
    """The fake's own recall answer for `body`, through its HTTP handler."""
    import httpx

    request = httpx.Request("POST", "https://memory.example.com/api/memory/v1/recall", json=body,
                            headers={"Authorization": f"Bearer {KEY}"})
    answer = fake.handle(request)
    assert answer.status_code == 200, answer.text
    results: list[dict[str, Any]] = answer.json()["results"]
    return results


@pytest.fixture
def fake() -> FakeSaas:
    return FakeSaas(now=lambda: NOW)


@pytest.fixture
async def saas(fake: FakeSaas) -> AsyncIterator[SaasProvider]:
    async with saas_provider(fake) as provider:
        yield provider


# --------------------------------------------------------------------------- the fake ranks as documented


def test_the_fakes_embedding_is_deterministic_and_spelling_based() -> None:
    """Same text, same vector; shared spelling scores above none (the fake's stand-in for meaning)."""
    assert embed("Acme renewal") == embed("Acme renewal")
    assert cosine(embed("renews"), embed("renewal")) > cosine(embed("renews"), embed("coffee")) >= 0


def test_a_record_found_by_both_lists_outranks_one_found_by_one() -> None:
    """RRF: the record with the query's word (lexical) and its spelling (vector) beats one the vector list
    alone finds, and each result says the ranks it had."""
    fake = FakeSaas(now=lambda: NOW)
    both = fake.put(content="The Acme contract renews in March", kind="semantic", scope_id="s")
    vector_only = fake.put(content="Acmes contracts renewing", kind="semantic", scope_id="s")
    results = ask(fake, query="acme contract", scope_id="s")
    assert [r["record"]["id"] for r in results] == [both, vector_only]
    assert results[0].keys() >= {"lexical_rank", "vector_rank"} and "lexical_rank" not in results[1]


def test_importance_and_recency_weight_the_fused_score() -> None:
    """Equal text: the more important record ranks first; at equal importance the newer one does, and a
    record 30 days old weighs (0.5 + 0.5 x 0.5) / (0.5 + 0.5 x 1) = 0.75 of a new one."""
    fake = FakeSaas(now=lambda: NOW)
    fake.now = lambda: NOW - timedelta(days=30)
    old = fake.put(content="Acme renews in March", kind="semantic", scope_id="s", importance=0.5)
    fake.now = lambda: NOW
    fresh = fake.put(content="Acme renews in March", kind="semantic", scope_id="s2", importance=0.5)
    weighty = fake.put(content="Acme renews in March", kind="semantic", scope_id="s3", importance=1.0)
    score = {r["record"]["id"]: r["score"] for r in ask(fake, query="acme renews")}
    assert score[weighty] > score[fresh] > score[old]
    alone = {scope: ask(fake, query="acme renews", scope_id=scope)[0]["score"] for scope in ("s", "s2")}
    assert alone["s"] / alone["s2"] == pytest.approx(0.75, rel=1e-6)  # each first in its own lists


def test_core_surfaces_first_and_archival_only_on_a_strong_match() -> None:
    """Tier: at equal text core outranks contextual; an archival record is left out of a recall that matches
    it weakly and returned by one that matches every word."""
    fake = FakeSaas(now=lambda: NOW)
    core = fake.put(content="Acme renews in March", kind="semantic", tier="core", scope_id="a")
    plain = fake.put(content="Acme renews in March", kind="semantic", scope_id="b")
    archived = fake.put(content="Acme renews in March", kind="semantic", tier="archival", scope_id="c")
    weak = [r["record"]["id"] for r in ask(fake, query="acme billing dispute escalation")]
    assert weak[:2] == [core, plain] and archived not in weak
    assert archived in [r["record"]["id"] for r in ask(fake, query="acme renews march")]


def test_without_a_query_recall_lists_by_tier_then_importance_then_recency() -> None:
    fake = FakeSaas(now=lambda: NOW)
    low = fake.put(content="one", kind="semantic", importance=0.1)
    high = fake.put(content="two", kind="semantic", importance=0.9)
    core = fake.put(content="three", kind="semantic", tier="core", importance=0.0)
    assert [r["record"]["id"] for r in ask(fake)] == [core, high, low]


def test_an_actors_recall_sees_its_own_and_shared_records_never_another_actors() -> None:
    """The privacy rule, through both lists: another actor's record matching the query best is never
    returned, by words or by spelling."""
    fake = FakeSaas(now=lambda: NOW)
    mine = fake.put(content="Acme renewal notes", kind="semantic", actor_id="ann")
    shared = fake.put(content="Acme renewal policy", kind="semantic")
    theirs = fake.put(content="Acme renewal Acme renewal", kind="semantic", actor_id="bob")
    found = {r["record"]["id"] for r in ask(fake, query="acme renewal", actor_id="ann")}
    assert found == {mine, shared} and theirs not in found


def test_expired_and_superseded_records_only_when_asked() -> None:
    fake = FakeSaas(now=lambda: NOW)
    expired = fake.put(content="Acme old terms", kind="semantic", expires_at=(NOW - timedelta(1)).isoformat())
    live = fake.put(content="Acme terms", kind="semantic")
    assert [r["record"]["id"] for r in ask(fake, query="acme terms")] == [live]
    shown = {r["record"]["id"] for r in ask(fake, query="acme terms", include_expired=True)}
    assert shown == {live, expired}


# --------------------------------------------------------------------------- the adapter's signals


async def test_query_is_the_vendors_fused_recall_in_its_order(saas: SaasProvider) -> None:
    """The hits come in the vendor's order with its scores, `why` query; the more important record of two
    equally worded ones comes first."""
    low = await saas.remember(MEM, new("Acme renews in March.", importance=0.2))
    high = await saas.remember(MEM, new("Acme renews in March!", importance=0.9))
    answer = await saas.recall([MEM], RecallQuery(query="Acme renews"))
    assert [h.record.id for h in answer.hits] == [high.id, low.id]
    assert all(h.why == ("query",) for h in answer.hits) and answer.degraded == ()


async def test_text_keeps_only_what_the_lexical_list_found(saas: SaasProvider) -> None:
    """`text` is the lexical half: a record the vector list alone finds (shared spelling, no shared word)
    is not a text hit."""
    worded = await saas.remember(MEM, new("The renewal is due."))
    spelled = await saas.remember(MEM, new("Renewals renewing renewed."))
    assert {h.record.id for h in (await saas.recall([MEM], RecallQuery(query="renewal"))).hits} == {
        worded.id, spelled.id}
    assert [h.record.id for h in (await saas.recall([MEM], RecallQuery(text="renewal"))).hits] == [worded.id]


async def test_with_vectors_off_at_the_vendor_the_capabilities_declare_query_emulated(fake: FakeSaas) -> None:
    """Configured with vector search on, a vendor answering `embedding: false` makes the capability
    document declare `query` emulated (the gateway words the entry), not a note of the adapter's own; the
    vendor embedding again declares it native again; configured off, it is emulated whatever the vendor says."""
    fake.embedding = False
    async with saas_provider(fake) as saas:
        await saas.remember(MEM, new("Acme renews in March."))
        assert saas.capabilities().emulated_signals == ("text",)
        answer = await saas.recall([MEM], RecallQuery(query="Acme"))
        assert len(answer.hits) == 1 and answer.degraded == ()
        assert saas.capabilities().emulated_signals == ("query", "text")
        fake.embedding = True
        await saas.recall([MEM], RecallQuery(query="Acme"))
        assert saas.capabilities().emulated_signals == ("text",)
    async with saas_provider(fake, vector_search=False) as saas:
        assert (await saas.recall([MEM], RecallQuery(query="Acme"))).degraded == ()
        assert "query" in saas.capabilities().emulated_signals


async def test_the_start_up_probe_learns_whether_the_vendor_embeds(fake: FakeSaas) -> None:
    """The probe asks one recall of a scope no memory has: with the vendor's embedding off, `query` is
    declared emulated before any recall; nothing is written and no memory's scope is named."""
    fake.embedding = False
    async with saas_provider(fake) as saas:
        assert "query" not in saas.capabilities().emulated_signals
        await saas.probe()
        assert "query" in saas.capabilities().emulated_signals
    (asked,) = fake.bodies("POST", "/recall")
    assert asked["scope_id"] == asked["actor_id"] == "memfed-_probe" and fake.records == {}


async def test_kind_tier_and_category_filters_go_to_the_vendor(saas: SaasProvider, fake: FakeSaas) -> None:
    """Conditions on tier and category and the asked types' kind are sent as the vendor's own filters, and
    what it answers is checked again here."""
    core = await saas.remember(MEM, new("Core billing fact.", tier="core", category="billing"))
    await saas.remember(MEM, new("Other billing fact.", category="billing"))
    await saas.remember(MEM, new("A core note.", type="note", tier="core", category="billing"))
    query = RecallQuery(filters=(Condition("attributes.tier", "eq", "core"),
                                 Condition("attributes.category", "eq", "billing")), types=("fact",))
    answer = await saas.recall([MEM], query)
    assert [h.record.id for h in answer.hits] == [core.id]
    sent = fake.bodies("POST", "/recall")[-1]
    assert (sent["tier"], sent["category"], sent["kind"], "query" in sent) == ("core", "billing", "semantic", False)


async def test_other_filters_are_judged_by_memfed_over_the_whole_scope(saas: SaasProvider, fake: FakeSaas) -> None:
    """A condition the vendor cannot filter on is judged here on every record of the scope (read in one
    export), so none past the vendor's recall limit is missed."""
    planted = [await saas.remember(MEM, new(f"Record {i}.", account="acme" if i % 40 == 0 else "x"))
               for i in range(120)]
    answer = await saas.recall([MEM], RecallQuery(filters=(Condition("attributes.account", "eq", "acme"),),
                                                  limit=10))
    assert {h.record.id for h in answer.hits} == {planted[i].id for i in (0, 40, 80)}
    assert fake.bodies("POST", "/recall") == [] and answer.degraded == ()


async def test_a_list_cut_by_the_vendor_then_narrowed_here_says_so(fake: FakeSaas) -> None:
    """Types narrow a list after the vendor ranked it (a note is semantic, like a fact). Asked again at the
    vendor's largest limit and still full of what memfed drops, the answer says
    `filters:applied_after_ranking` rather than pretend there is nothing more."""
    fake.embedding = False  # ranks by words alone, so the order is plain: the notes come first
    async with saas_provider(fake, vector_search=False) as saas:
        for i in range(120):
            await saas.remember(MEM, new(f"Acme note {i}.", type="note"))
        await saas.remember(MEM, new("Acme fact."))
        answer = await saas.recall([MEM], RecallQuery(text="acme", types=("fact",), limit=5))
    assert answer.hits == () and "filters:applied_after_ranking" in answer.degraded
    assert [b["limit"] for b in fake.bodies("POST", "/recall")] == [15, 100]


async def test_signals_together_are_fused_and_why_names_each(saas: SaasProvider) -> None:
    """query, text and filters rank on their own and are fused: the record all three find comes first."""
    all_three = await saas.remember(MEM, new("Acme renewal terms.", tier="core"))
    words_only = await saas.remember(MEM, new("Acme lunch menu."))
    answer = await saas.recall([MEM], RecallQuery(query="Acme renewal", text="renewal",
                                                  filters=(Condition("attributes.tier", "eq", "core"),)))
    why = {h.record.id: h.why for h in answer.hits}
    assert answer.hits[0].record.id == all_three.id and why[all_three.id] == ("query", "text", "filters")
    assert "filters" not in why.get(words_only.id, ())


async def test_recency_at_the_vendor_uses_its_own_clock(fake: FakeSaas) -> None:
    """The weighting is the vendor's, from its own record times: a record stored 60 days earlier at the
    vendor ranks below the same words stored now."""
    fake.now = later(NOW, days=-60)
    async with saas_provider(fake) as saas:
        old = await saas.remember(MEM, new("Acme renews in March."))
        fake.now = lambda: NOW
        fresh = await saas.remember(MEM, new("Acme renews in March!"))
        assert [h.record.id for h in (await saas.recall([MEM], RecallQuery(query="Acme"))).hits] == [fresh.id, old.id]


async def test_a_text_list_crowded_by_vector_hits_is_asked_again(saas: SaasProvider, fake: FakeSaas) -> None:
    """`text` keeps the lexical hits of the vendor's fused list. When what only the vector half found
    crowds them out of a full answer, the vendor is asked again at its largest limit (100)."""
    for i in range(40):
        await saas.remember(MEM, new(f"Renewals renewing renewed {i}.", importance=1.0))
    worded = await saas.remember(MEM, new("The renewal is due.", importance=0.0))
    answer = await saas.recall([MEM], RecallQuery(text="renewal", limit=5))
    assert [h.record.id for h in answer.hits] == [worded.id] and answer.degraded == ()
    assert [b["limit"] for b in fake.bodies("POST", "/recall")] == [15, 100]


async def test_native_filters_full_of_what_memfed_drops_are_judged_over_the_scope(saas: SaasProvider) -> None:
    """A tier filter with types=fact: the vendor's filter listing (notes and facts alike are semantic) is
    full of notes, so the facts are judged over the whole scope instead, and none is missed."""
    for i in range(30):
        await saas.remember(MEM, new(f"Core note {i}.", type="note", tier="core", importance=1.0))
    fact = await saas.remember(MEM, new("Core fact.", tier="core", importance=0.0))
    answer = await saas.recall([MEM], RecallQuery(filters=(Condition("attributes.tier", "eq", "core"),),
                                                  types=("fact",), limit=5))
    assert [h.record.id for h in answer.hits] == [fact.id] and answer.degraded == ()
