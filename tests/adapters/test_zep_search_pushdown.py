"""memfed's `filters` sent to Zep in a recall that also searches (`query` or `text`): the listing the
`filters` list is judged on is narrowed as for a recall by `filters` alone (v4 `metadata_filters` on an
episodes-only listing, `date_filters` on the edge listing), and the searched hits that listing left out are
read through their own chains (a listing by `memfed_record`). The search itself is never filtered: each
signal ranks on its own, so a record that matches the question and not the filters is still answered
(`why` = query). memfed judges every condition on what comes back, and `emulated` names only what it
judged alone."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import httpx
import pytest

from adapters.base import Condition, ProviderUnavailable, RecallQuery
from adapters.zep import _pushdown
from tests.adapters import _fake_zep_routes as routes
from tests.adapters.fake_zep import FakeZep, zep_provider
from tests.adapters.harnesses import M1, Stamps
from tests.adapters.test_zep_pushdown import ACCOUNT, NOTES, edge_listings, episode_filters, seed

ACME = Condition("attributes.account", "eq", "acme")
EPISODE_TYPES = ("note", "procedure")


async def searched(zep: Any, fake: FakeZep, words: str, *conditions: Condition, **asked: Any
                   ) -> tuple[dict[str, tuple[str, ...]], Any, int]:
    """The answer's records with the signals that found each, the answer, and the objects Zep sent."""
    fake.requests.clear()
    fake.listed = 0
    answer = await zep.recall([M1], RecallQuery(query=words, filters=conditions, limit=50, **asked))
    return {h.record.id: h.why for h in answer.hits}, answer, fake.listed


def searches_sent(fake: FakeZep) -> list[dict[str, Any]]:
    return [json.loads(r.content) for r in fake.requests if "/search/" in r.url.path]


async def test_a_searched_recall_sends_its_filters_to_the_listing_which_answers_fewer() -> None:
    """`query` with `attributes.account eq acme` over episode types: the episode listing carries the
    `memfed_attr_account` group, Zep answers fewer objects than when nothing is sent, the answer (records
    and why) is the same, and nothing is said emulated."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        sent, answer, objects = await searched(zep, fake, "Acme", ACME, types=EPISODE_TYPES)
        listed = episode_filters(fake)
    async with zep_provider("v4", fake) as unnamed:  # the same graph, the key not named: judged by memfed
        judged, judged_answer, all_objects = await searched(unnamed, fake, "Acme", ACME, types=EPISODE_TYPES)
    assert sent == judged
    assert set(sent) == {ids["acme"], ids["how"]} and sent[ids["how"]] == ("query", "filters")
    assert listed[0]["metadata_filters"]["groups"] == [{"type": "or", "filters": [
        {"property_name": "memfed_attr_account", "operator": "eq", "value": "acme"},
        {"property_name": "memfed_attr_account", "operator": "is_null"}]}]
    assert objects < all_objects
    assert answer.emulated == ()
    assert judged_answer.emulated == ("filters",)


async def test_a_hit_matching_the_question_and_not_the_filters_is_still_answered() -> None:
    """The narrowed listing leaves the Globex notes out, yet the search found them: they are read through
    their own chains (a listing by `memfed_record`) and answered with `why` = query, exactly as when
    nothing is sent; the search itself carries no `memfed_attr_` filter."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        sent, answer, _ = await searched(zep, fake, "Globex", ACME, types=EPISODE_TYPES)
        chains = [f for f in episode_filters(fake) if f and "memfed_record" in json.dumps(f)]
        searches = searches_sent(fake)
    async with zep_provider("v4", fake) as unnamed:
        judged, _, _ = await searched(unnamed, fake, "Globex", ACME, types=EPISODE_TYPES)
    globex = {ids[f"x{i}"] for i in range(6)}
    assert sent == judged
    assert {r for r, why in sent.items() if why == ("query",)} == globex
    assert {r for r, why in sent.items() if "filters" in why} == {ids["acme"], ids["how"]}
    assert chains and globex <= set(chains[0]["metadata_filters"]["groups"][0]["filters"][0]["value"])
    assert searches and all("memfed_attr_" not in json.dumps(s) for s in searches)
    assert answer.emulated == ()


async def test_a_searched_mixed_filter_names_only_what_memfed_judged() -> None:
    """Type and a named attribute are sent with a search; an unnamed attribute is judged by memfed, and
    `emulated` names that field alone."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        sent, answer, _ = await searched(zep, fake, "Acme", NOTES, ACME, Condition("attributes.n", "eq", 8),
                                         types=EPISODE_TYPES)
        listed = episode_filters(fake)
    assert sent == {ids["how"]: ("query", "filters"), ids["acme"]: ("query",)}
    assert answer.emulated == ("filters.attributes.n",) and answer.degraded == ()
    assert [g["filters"][0]["property_name"] for g in listed[0]["metadata_filters"]["groups"]] == [
        "memfed_attr_account"]


async def test_a_vendor_that_ignores_the_filter_with_a_search_leaks_nothing(monkeypatch: pytest.MonkeyPatch
                                                                              ) -> None:
    """A Zep whose listings answer everything whatever the filter: only the records that match are said
    found by `filters`; the others the search found stay `query` alone."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        monkeypatch.setattr(routes, "_list_filters", lambda kind, filters: lambda _: True)
        sent, answer, _ = await searched(zep, fake, "Acme", Condition("attributes.account", "eq", "globex"),
                                         types=EPISODE_TYPES)
    assert {r for r, why in sent.items() if "filters" in why} == {ids[f"x{i}"] for i in range(6)}
    assert sent[ids["acme"]] == sent[ids["how"]] == ("query",)
    assert answer.emulated == ()


async def test_v3_sends_nothing_for_a_searched_recall_with_filters() -> None:
    """v3's listings take no filter: the episodes are listed without one and every condition is judged
    by memfed (the capability document declares the whole signal emulated)."""
    fake = FakeZep("v3")
    async with zep_provider("v3", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        sent, answer, _ = await searched(zep, fake, "Acme", ACME, types=EPISODE_TYPES)
        searches = searches_sent(fake)
    assert set(sent) == {ids["acme"], ids["how"]} and answer.emulated == ()
    assert all(not r.content for r in fake.requests if "/episodes/graph/" in r.url.path)
    assert all("memfed_attr_" not in json.dumps(s) for s in searches)


async def test_a_searched_recall_sends_valid_from_to_the_edge_listing(monkeypatch: pytest.MonkeyPatch) -> None:
    """`query` with `time.valid_from gte D` over every kind: the edge listing carries `date_filters` on
    `valid_at` and answers fewer edges; a fact the search found that is valid from before D is still
    answered (`why` = query) through its chain, and the answer is the whole listing's."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        starts = [stamps.tick() + timedelta(days=i) for i in range(6)]
        facts = [await zep.remember(M1, stamps.record(f"Subject{i} renewed.", type="fact", valid_from=at))
                 for i, at in enumerate(starts)]
        fake.process()
        since = Condition("time.valid_from", "gte", starts[5].isoformat())
        sent, answer, objects = await searched(zep, fake, "Subject0", since)
        edges = edge_listings(fake)
        monkeypatch.setattr(_pushdown, "edge_dates", lambda _: ())
        whole, whole_answer, all_objects = await searched(zep, fake, "Subject0", since)
    assert sent == whole
    assert sent[facts[0].id][0] == "query" and "filters" not in sent[facts[0].id]
    assert "filters" in sent[facts[5].id]
    assert [h.record for h in answer.hits] == [h.record for h in whole_answer.hits]
    assert edges[0] is not None and "date_filters" in edges[0]
    assert objects < all_objects and answer.emulated == ("filters",)


async def test_the_narrowed_listing_is_asked_while_the_searches_are_outstanding(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the chains of the hits wait for the searches: the episode listing is asked before any search
    answers (the searches here answer only once it has been), so the searched recall costs search and
    listing at once, then the chains; the answer is the one memfed judges."""
    fake = FakeZep("v4")
    listed = asyncio.Event()
    armed = False
    respond = fake.respond

    async def held(request: httpx.Request) -> httpx.Response:
        if armed and request.url.path.endswith("/episodes/list"):
            listed.set()
        elif armed and "/search/" in request.url.path:
            await listed.wait()
        return await respond(request)

    monkeypatch.setattr(fake, "respond", held)
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        armed = True
        sent, answer, _ = await asyncio.wait_for(searched(zep, fake, "Acme", ACME, types=EPISODE_TYPES), timeout=10)
    assert set(sent) == {ids["acme"], ids["how"]} and answer.emulated == ()


async def test_a_listing_that_fails_leaves_no_search_running(monkeypatch: pytest.MonkeyPatch) -> None:
    """The listing refused while the searches are still out (here they never answer): the recall fails as
    the listing did and the searches are cancelled with it, not left running after the recall."""
    fake = FakeZep("v4")
    armed = False
    respond = fake.respond

    async def unanswered(request: httpx.Request) -> httpx.Response:
        if armed and "/search/" in request.url.path:
            await asyncio.Event().wait()
        return await respond(request)

    monkeypatch.setattr(fake, "respond", unanswered)
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        await seed(zep, fake, Stamps())
        fake.fail("500", times=100, when=lambda r: r.url.path.endswith("/episodes/list"))
        armed = True
        with pytest.raises(ProviderUnavailable):
            await asyncio.wait_for(searched(zep, fake, "Acme", ACME, types=EPISODE_TYPES), timeout=10)
        await asyncio.sleep(0)  # the cancelled searches end on the loop's next turn
        others = [t for t in asyncio.all_tasks() if t is not asyncio.current_task() and not t.done()]
    assert others == []
