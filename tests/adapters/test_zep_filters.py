"""memfed's `filters` on a Zep memory: what Zep can judge is asked of its listing, the rest judged here.

The record type is addressable at Zep on episodes (`memfed_type` in their metadata, v4
`metadata_filters`; the attribute keys a provider names and facts' `valid_from` are in
test_zep_pushdown.py). A recall whose every list can
hold only episode types (its `type` conditions and `types`) lists the graph's episodes alone, asking v4 for
those types; anything else lists all three kinds, since Zep's derived edges and nodes reference the
objects they came from. Every condition is still judged by memfed on what comes back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from adapters.base import Condition, RecallQuery
from tests.adapters.fake_zep import FakeZep, zep_provider
from tests.adapters.harnesses import M1, Stamps

BOTH = pytest.mark.parametrize("variant", ["v4", "v3"])


def listings(fake: FakeZep) -> list[tuple[str, Any]]:
    """The graph listings sent, each as (the kind's path segment, the JSON body or None)."""
    out = []
    for r in fake.requests:
        parts = r.url.path.split("/")
        if parts[-1] == "list" or "/graph/edge/graph/" in r.url.path or "/graph/node/graph/" in r.url.path \
                or "/graph/episodes/graph/" in r.url.path:
            kind = parts[-2] if parts[-1] == "list" else parts[3]
            out.append((kind, json.loads(r.content) if r.content else None))
    return out


async def seeded(zep: Any, fake: FakeZep) -> dict[str, str]:
    stamps = Stamps()
    made = {
        "note": await zep.remember(M1, stamps.record("Note on Acme.", type="note", attributes={"account": "acme"})),
        "other": await zep.remember(M1, stamps.record("Note on Globex.", type="note", attributes={"account": "x"})),
        "procedure": await zep.remember(M1, stamps.record("How to renew.", type="procedure",
                                                         attributes={"account": "acme"})),
        "fact": await zep.remember(M1, stamps.record("Acme renews.", type="fact", attributes={"account": "acme"})),
    }
    fake.process()  # Zep derives a fact and entities from each text episode
    fake.requests.clear()
    return {k: v.id for k, v in made.items()}


async def test_a_type_filter_on_episode_types_is_asked_of_zeps_episode_listing() -> None:
    """`type in [note]` with an attribute condition: v4 lists the episodes alone with `metadata_filters`
    on `memfed_type`, no edge or node listing; memfed judges the attribute; the answer is the one note."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        ids = await seeded(zep, fake)
        answer = await zep.recall([M1], RecallQuery(filters=(
            Condition("type", "in", ["note"]), Condition("attributes.account", "eq", "acme"))))
    assert [h.record.id for h in answer.hits] == [ids["note"]]
    assert listings(fake) == [("episodes", {"filters": {"metadata_filters": {"type": "and", "filters": [
        {"property_name": "memfed_type", "operator": "in", "value": ["note"]}]}}})]


async def test_the_episode_type_itself_lists_every_episode_unfiltered() -> None:
    """Zep's own episodes (another client's) read as type `episode` and carry no `memfed_type`, so a
    condition admitting `episode` asks the episode listing without a metadata filter."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        await seeded(zep, fake)
        await zep.recall([M1], RecallQuery(filters=(Condition("type", "in", ["note", "episode"]),)))
    assert listings(fake) == [("episodes", {})]


@BOTH
async def test_a_filter_that_admits_facts_or_entities_lists_the_whole_graph(variant: str) -> None:
    """A fact's or entity's record may reference any object of the graph, so a filter admitting them (or
    no type condition) lists edges, nodes and episodes; the answer is memfed's judgement of them all,
    Zep's derived facts included when they match."""
    fake = FakeZep(variant)  # type: ignore[arg-type]
    async with zep_provider(variant, fake) as zep:  # type: ignore[arg-type]
        ids = await seeded(zep, fake)
        answer = await zep.recall([M1], RecallQuery(filters=(Condition("attributes.account", "eq", "acme"),)))
        facts = await zep.recall([M1], RecallQuery(filters=(Condition("type", "eq", "fact"),), limit=50))
    assert {h.record.id for h in answer.hits} == {ids["note"], ids["procedure"], ids["fact"]}
    assert len(listings(fake)) == 6
    written = {h.record.written_by.kind for h in facts.hits}
    assert ids["fact"] in {h.record.id for h in facts.hits} and written == {"member", "provider"}


@BOTH
async def test_the_listing_narrowed_to_episodes_answers_as_the_whole_one_did(variant: str) -> None:
    """The same recall answers the same records whether memfed lists episodes alone or the whole graph:
    a query over notes (types) with a note-type filter, and with include: all a forgotten note too."""
    fake = FakeZep(variant)  # type: ignore[arg-type]
    async with zep_provider(variant, fake) as zep:  # type: ignore[arg-type]
        ids = await seeded(zep, fake)
        narrow = RecallQuery(query="note", types=("note",), filters=(Condition("type", "eq", "note"),), limit=20)
        wide = RecallQuery(query="note", types=("note",), filters=(Condition("type", "ne", "procedure"),),
                           limit=20)
        asked_narrow = await zep.recall([M1], narrow)
        asked_wide = await zep.recall([M1], wide)
    assert [(h.record.id, h.why) for h in asked_narrow.hits] == [(h.record.id, h.why) for h in asked_wide.hits]
    assert {h.record.id for h in asked_narrow.hits} == {ids["note"], ids["other"]}


async def test_zeps_own_episodes_are_found_when_the_episode_type_is_asked() -> None:
    """An episode another client wrote in the graph carries no `memfed_type`: asked for type `episode`,
    the search sends no metadata filter on it, so Zep's own episode is found (as an episode written by
    the provider), beside memfed's."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        stamps = Stamps()
        mine = await zep.remember(M1, stamps.record("Acme renewal call.", type="episode"))
        (graph,) = fake.graphs
        theirs = fake._episode(graph, "Acme renewal by the other client.", "text", {}, "", None)
        answer = await zep.recall([M1], RecallQuery(query="Acme renewal", types=("episode",)))
    found = {h.record.id: h.record.written_by.kind for h in answer.hits}
    assert found == {mine.id: "member", "hrec_" + theirs["uuid"].replace("-", ""): "provider"}


async def test_the_fakes_episode_listing_judges_metadata_groups_and_refuses_other_filters() -> None:
    """The fake's v4 episode listing keeps what a metadata filter group admits (and/or, nested groups,
    `in`, `is_null`), and answers a filter field it does not judge with 400 unsupported_filter."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        ids = await seeded(zep, fake)
    (graph,) = fake.graphs
    fake._episode(graph, "Another client's episode.", "text", {}, "", None)
    url = f"{fake.base_url}/api/v4/graphs/{graph}/episodes/list"
    headers = {"Authorization": f"Api-Key {fake.api_key}"}

    async def listed(filters: dict[str, Any]) -> Any:
        async with fake.client() as client:
            return await client.post(url, json={"filters": filters}, headers=headers)

    notes = await listed({"metadata_filters": {"type": "and", "filters": [
        {"property_name": "memfed_type", "operator": "in", "value": ["note"]}]}})
    assert sorted(e["metadata"]["memfed_record"] for e in notes.json()["items"]) == sorted(
        [ids["note"], ids["other"]])
    either = await listed({"metadata_filters": {"type": "or", "filters": [
        {"property_name": "memfed_type", "operator": "eq", "value": "procedure"}],
        "groups": [{"type": "and", "filters": [{"property_name": "memfed_type", "operator": "is_null"}]}]}})
    # without memfed_type: the other client's episode and the fact_triple episode Zep keeps for the fact
    assert sorted(e["metadata"].get("memfed_type", "-") for e in either.json()["items"]) == ["-", "-", "procedure"]
    refused = await listed({"edge_types": ["WORKS_AT"]})
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "unsupported_filter")
