"""memfed's `filters` sent to Zep: on v4, a recall by `filters` alone over episode types sends `type` and
the attribute keys named in `filter_attributes` as `metadata_filters` on the episode listing; Zep answers
fewer candidates, memfed judges every condition on what comes back, and `degraded` names only the
conditions memfed judged alone. Records written before those keys existed are still found; v3, whose
listings take no filter, judges everything as before."""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import timedelta
from typing import Any

import pytest

from adapters.base import Condition, Part, RecallQuery
from adapters.zep import _pushdown
from tests.adapters import _fake_zep_routes as routes
from tests.adapters.fake_zep import FakeZep, zep_provider
from tests.adapters.harnesses import M1, Stamps

ACCOUNT = ("account",)
NOTES = Condition("type", "in", ["note", "procedure"])


def episode_filters(fake: FakeZep) -> list[Any]:
    """The `filters` of every v4 episode listing sent (None for a listing without)."""
    return [(json.loads(r.content) if r.content else {}).get("filters") for r in fake.requests
            if r.url.path.endswith("/episodes/list")]


async def seed(zep: Any, fake: FakeZep, stamps: Stamps) -> dict[str, str]:
    made = {}
    for i in range(6):
        made[f"x{i}"] = (await zep.remember(M1, stamps.record(f"Note {i} on Globex.", type="note",
                                                              attributes={"account": "globex", "n": i}))).id
    made["acme"] = (await zep.remember(M1, stamps.record("Note on Acme.", type="note",
                                                         attributes={"account": "acme", "n": 7}))).id
    made["how"] = (await zep.remember(M1, stamps.record("How to renew Acme.", type="procedure",
                                                        attributes={"account": "acme", "n": 8}))).id
    made["fact"] = (await zep.remember(M1, stamps.record("Acme renews.", type="fact",
                                                         attributes={"account": "acme"}))).id
    fake.process()  # Zep derives a fact and entities from each text episode
    fake.requests.clear()
    fake.listed = 0
    return made


async def recall(zep: Any, fake: FakeZep, *conditions: Condition, **asked: Any) -> tuple[list[str], Any, int]:
    fake.requests.clear()
    fake.listed = 0
    answer = await zep.recall([M1], RecallQuery(filters=conditions, limit=50, **asked))
    return sorted(h.record.id for h in answer.hits), answer, fake.listed


async def test_an_attribute_filter_is_sent_to_zep_which_answers_fewer_candidates() -> None:
    """`attributes.account eq acme` on a named key: the episode listing carries `memfed_attr_account eq
    acme` (or the key absent), Zep answers fewer episodes than without it, the answer is the same, and
    nothing is said emulated."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        sent, answer, candidates = await recall(zep, fake, NOTES, Condition("attributes.account", "eq", "acme"))
        first = episode_filters(fake)[0]
    async with zep_provider("v4", fake) as unnamed:  # the same graph, the key not named: judged by memfed
        judged, judged_answer, all_candidates = await recall(
            unnamed, fake, NOTES, Condition("attributes.account", "eq", "acme"))
    assert sent == judged == sorted([ids["acme"], ids["how"]])
    assert first["metadata_filters"]["groups"] == [{"type": "or", "filters": [
        {"property_name": "memfed_attr_account", "operator": "eq", "value": "acme"},
        {"property_name": "memfed_attr_account", "operator": "is_null"}]}]
    assert candidates < all_candidates
    assert answer.emulated == answer.degraded == ()
    assert judged_answer.emulated == ("filters.attributes.account",) and judged_answer.degraded == ()


@pytest.mark.parametrize(("condition", "expected"), [
    (Condition("attributes.n", "gte", 7), ["acme", "how"]),
    (Condition("attributes.n", "in", [1, 2]), ["x1", "x2"]),
    (Condition("attributes.n", "lt", 1), ["x0"]),
])
async def test_each_operator_sent_answers_what_memfed_alone_answers(condition: Condition,
                                                                    expected: list[str]) -> None:
    """Ranges on numbers and `in` on a named key are sent (nothing said emulated) and answer exactly the
    records memfed's own judgement finds."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=("n",)) as zep:
        ids = await seed(zep, fake, Stamps())
        found, answer, candidates = await recall(zep, fake, NOTES, condition)
        sent = episode_filters(fake)[0]["metadata_filters"]["groups"][0]["filters"][0]
    async with zep_provider("v4", fake) as unnamed:
        judged, _, all_candidates = await recall(unnamed, fake, NOTES, condition)
        unsent = episode_filters(fake)[0]["metadata_filters"]
    assert found == judged == sorted(ids[k] for k in expected)
    assert answer.emulated == ()
    # Zep answers the matching versions, then every version of those records again (their chains): fewer
    # candidates than the whole listing when the filter is selective, more when it admits nearly all.
    assert candidates == 2 * len(expected) and all_candidates == 8  # the six globex notes, acme, how
    assert sent == {"property_name": "memfed_attr_n", "operator": condition.op, "value": condition.value}
    assert "groups" not in unsent


async def test_a_mixed_filter_sends_what_zep_can_judge_and_names_only_the_rest() -> None:
    """Type and a named attribute are sent; a time condition and an unnamed attribute are judged by
    memfed, and `degraded` names exactly those two fields."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, stamps)
        after = stamps.tick() - timedelta(days=365)
        found, answer, _ = await recall(zep, fake, NOTES, Condition("attributes.account", "eq", "acme"),
                                        Condition("time.written_at", "gte", after.isoformat()),
                                        Condition("attributes.n", "eq", 8))
    assert found == [ids["how"]]
    assert answer.emulated == ("filters.time.written_at", "filters.attributes.n") and answer.degraded == ()
    (sent,) = episode_filters(fake)[:1]
    assert [f["filters"][0]["property_name"] for f in sent["metadata_filters"]["groups"]] == [
        "memfed_attr_account"]


async def test_nothing_sent_says_the_signal_emulated_as_before() -> None:
    """A filter with no type narrowing (every kind listed) sends nothing, and says `filters:emulated`."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        found, answer, _ = await recall(zep, fake, Condition("attributes.account", "eq", "acme"))
    assert found == sorted([ids["acme"], ids["how"], ids["fact"]])
    assert answer.emulated == ("filters",)
    assert all(f is None for f in episode_filters(fake))


async def test_v3_lists_unfiltered_and_judges_every_condition() -> None:
    """v3's listings take no filter: the same recall lists episodes without one, answers the same
    records, and says the whole signal emulated."""
    fake = FakeZep("v3")
    async with zep_provider("v3", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        found, answer, _ = await recall(zep, fake, NOTES, Condition("attributes.account", "eq", "acme"))
        caps = zep.capabilities()
    assert found == sorted([ids["acme"], ids["how"]])
    assert answer.emulated == answer.degraded == ()  # the capability document says the whole signal
    assert all(not r.content for r in fake.requests if "/episodes/graph/" in r.url.path)
    assert "filters" in caps.emulated_signals and all(s == "emulated" for _, s in caps.filter_fields)


async def test_records_written_before_the_keys_existed_are_still_found() -> None:
    """Episodes written without `memfed_attr_*` (before the option, or by an older memfed) lack the key,
    which the sent filter admits: they are found, and memfed's judgement keeps only the matching one."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as old:
        ids = await seed(old, fake, Stamps())
    assert not any(k.startswith("memfed_attr_") for e in fake.episodes.values() for k in e["metadata"])
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        found, answer, _ = await recall(zep, fake, NOTES, Condition("attributes.account", "eq", "acme"))
    assert found == sorted([ids["acme"], ids["how"]]) and answer.emulated == ()


async def test_a_record_revised_away_from_the_value_is_not_found_and_its_past_is() -> None:
    """The listing Zep filters holds the version that matched, not the one that changed the value after
    it: memfed lists the candidates' versions whole, so the record is not found now, and is at an
    instant before the revise."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        note = await zep.remember(M1, stamps.record("Note on Acme.", type="note", attributes={"account": "acme"}))
        before = stamps.tick()
        await zep.revise(M1, note.id, stamps.revision(attributes={"account": "globex"},
                                                      content=(Part("text", "Note on Globex."),)))
        acme = Condition("attributes.account", "eq", "acme")
        now, _, _ = await recall(zep, fake, NOTES, acme)
        chains = [f for f in episode_filters(fake) if f and "memfed_record" in json.dumps(f)]
        then, _, _ = await recall(zep, fake, NOTES, acme, as_of=before)
        globex, answer, _ = await recall(zep, fake, NOTES, Condition("attributes.account", "eq", "globex"))
    assert now == [] and then == [note.id] and globex == [note.id]
    assert chains, "the candidates' versions were listed by record"
    assert answer.hits[0].record.version == 2


async def test_a_vendor_that_ignores_the_filter_leaks_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """A Zep that answers every episode whatever the filter: memfed's judgement still answers only the
    matching records."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, filter_attributes=ACCOUNT) as zep:
        ids = await seed(zep, fake, Stamps())
        monkeypatch.setattr(routes, "_list_filters", lambda kind, filters: lambda _: True)
        found, answer, _ = await recall(zep, fake, NOTES, Condition("attributes.account", "eq", "acme"))
    assert found == sorted([ids["acme"], ids["how"]]) and answer.emulated == ()


@pytest.mark.parametrize("condition", [
    Condition("attributes.account", "gt", "a"),  # how Zep orders strings is not documented
    Condition("attributes.account", "in", ["a,b"]),  # Zep's grammar refuses a comma in an `in` member
    Condition("attributes.account", "eq", True),
    Condition("attributes.account", "ne", None),
    Condition("attributes.account", "ne", 1),  # memfed meets it with "1", a vendor that coerces would not
])
def test_what_zep_might_judge_otherwise_is_left_to_memfed(condition: Condition) -> None:
    """A condition Zep could answer differently from memfed (a string range, a value its grammar
    refuses, a boolean, `ne` on an attribute, `ne null` which admits everything) is not sent."""
    planned = _pushdown.plan([condition], ACCOUNT, narrowed=True, types_listed=True)
    assert planned.sent == () and planned.judged == (condition,) and planned.groups == ()


def test_a_type_condition_admitting_zeps_own_episodes_admits_the_key_absent() -> None:
    """`type ne note` admits Zep's own episodes (type `episode`, no `memfed_type`); `type ne episode`
    does not."""
    lax = _pushdown.plan([Condition("type", "ne", "note")], (), narrowed=True, types_listed=False)
    strict = _pushdown.plan([Condition("type", "ne", "episode")], (), narrowed=True, types_listed=False)
    assert lax.groups == ({"type": "or", "filters": [
        {"property_name": "memfed_type", "operator": "ne", "value": "note"},
        {"property_name": "memfed_type", "operator": "is_null"}]},)
    assert strict.groups == ({"type": "and", "filters": [
        {"property_name": "memfed_type", "operator": "ne", "value": "episode"}]},)


def doc_filters(caps: Any) -> dict[str, str]:
    return dict(caps.document("zep")["x.memfed"]["filters"])


async def test_the_capability_document_says_per_field_what_zep_judges() -> None:
    """v4: `type` and the named attributes native, other attributes and times emulated, the signal not
    emulated as a whole; v3: every field emulated and the signal emulated."""
    async with zep_provider("v4", FakeZep("v4"), filter_attributes=ACCOUNT) as v4:
        four = v4.capabilities()
    async with zep_provider("v3", FakeZep("v3")) as v3:
        three = v3.capabilities()
    assert doc_filters(four) == {"type": "native", "attributes.account": "native", "attributes.*": "emulated",
                                 "time.*": "emulated"}
    assert four.emulated_signals == ("text",)
    assert doc_filters(three) == {"type": "emulated", "attributes.*": "emulated", "time.*": "emulated"}
    assert three.emulated_signals == ("text", "filters")


@pytest.mark.parametrize("names", [("a", "b", "c"), ("bad key",), ("",)])
async def test_filter_attributes_beyond_the_metadata_keys_or_not_a_name_are_refused(names: Sequence[str]) -> None:
    """Three keys would take v4 past its ten metadata keys (memfed keeps six, a close adds two); a key
    that is not letters, digits and `_` is refused."""
    from adapters.zep import ZepProvider

    with pytest.raises(ValueError, match="filter_attributes"):
        async with FakeZep("v4").client() as client:
            await ZepProvider.from_config({"filter_attributes": list(names)}, client=client,
                                          data_dir=None, api_key="k")  # type: ignore[arg-type]


@pytest.mark.parametrize("variant", ["v4", "v3"])
async def test_a_recall_whose_filters_exclude_facts_does_not_list_edges(
        variant: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """`type in [note, entity]` cannot hold a fact, and no other record references an edge: the edges
    are not listed, and the answer (derived entities referencing their episodes included) is the one the
    whole listing gives."""
    fake = FakeZep(variant)  # type: ignore[arg-type]
    stamps = Stamps()
    async with zep_provider(variant, fake) as zep:  # type: ignore[arg-type]
        await seed(zep, fake, stamps)
        await zep.remember(M1, stamps.record("Ada.", type="entity", title="Ada"))
        wanted = Condition("type", "in", ["note", "entity"])
        narrow = await zep.recall([M1], RecallQuery(filters=(wanted,), limit=50))
        edges_asked = [r for r in fake.requests if "/edges/list" in r.url.path or "/edge/graph/" in r.url.path]
        monkeypatch.setattr(_pushdown, "admits_type", lambda *_: True)
        fake.requests.clear()
        whole = await zep.recall([M1], RecallQuery(filters=(wanted,), limit=50))
        edges_listed = [r for r in fake.requests if "/edges/list" in r.url.path or "/edge/graph/" in r.url.path]
    assert edges_asked == [] and edges_listed
    assert [(h.record, h.why) for h in narrow.hits] == [(h.record, h.why) for h in whole.hits]
    derived = [h.record for h in narrow.hits if h.record.written_by.kind == "provider"]
    assert any(r.rel == "derived_from" for d in derived for r in d.references)


@pytest.mark.parametrize(("conditions", "types", "fact"), [
    ((Condition("type", "in", ["note", "entity"]),), (), False),
    ((Condition("type", "ne", "fact"),), (), False),
    ((Condition("type", "eq", None),), (), False),
    ((Condition("type", "gte", "f"),), (), True),
    ((Condition("type", "lt", "f"),), (), False),
    ((Condition("attributes.x", "eq", 1),), ("note",), False),
    ((Condition("attributes.x", "eq", 1),), (), True),
])
def test_whether_a_fact_can_pass_is_judged_as_memfed_judges_type(
        conditions: tuple[Condition, ...], types: tuple[str, ...], fact: bool) -> None:
    """`admits_type` follows memfed's semantics of `type` conditions and `types`."""
    assert _pushdown.admits_type(conditions, types, "fact") is fact


def edge_listings(fake: FakeZep) -> list[Any]:
    return [(json.loads(r.content) if r.content else {}).get("filters") for r in fake.requests
            if r.url.path.endswith("/edges/list")]


async def test_a_valid_from_condition_is_sent_to_the_edge_listing_as_date_filters(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """`time.valid_from gte D`: v4's edge listing carries `date_filters` on `valid_at` (from D less a
    second: Zep may keep coarser times), answers fewer edges, and the answer is the whole listing's;
    nodes and episodes are still judged by memfed alone, so the signal is said emulated."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        starts = [stamps.tick() + timedelta(days=i) for i in range(4)]
        facts = [await zep.remember(M1, stamps.record(f"Fact {i}.", type="fact", valid_from=at))
                 for i, at in enumerate(starts)]
        fake.process()
        since = Condition("time.valid_from", "gte", starts[3].isoformat())
        found, answer, candidates = await recall(zep, fake, since)
        sent = edge_listings(fake)
        monkeypatch.setattr(_pushdown, "edge_dates", lambda _: ())
        whole, whole_answer, all_candidates = await recall(zep, fake, since)
    assert found == whole == [facts[3].id]
    assert [h.record for h in answer.hits] == [h.record for h in whole_answer.hits]
    assert sent[0] == {"date_filters": {"any_of": [{"all_of": [
        {"field": "valid_at", "operator": "gte",
         "value": (starts[3] - _pushdown.SLACK).isoformat().replace("+00:00", "Z")}]}]}}
    assert sent[1] == {"property_filters": [{"property_name": "memfed_record", "operator": "in",
                                             "value": [facts[3].id]}]}
    assert candidates < all_candidates and answer.emulated == ("filters",)


async def test_a_fact_revised_to_a_later_valid_from_is_not_found_before_it() -> None:
    """The edge Zep admits is the first version; the fact's versions are listed whole, so its current
    version (valid from later) is judged, not the first."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        early = stamps.tick()
        fact = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact", valid_from=early))
        later = stamps.tick() + timedelta(days=30)
        await zep.revise(M1, fact.id, stamps.revision(valid_from=later))
        before = Condition("time.valid_from", "lt", (early + timedelta(days=1)).isoformat())
        now, _, _ = await recall(zep, fake, Condition("type", "eq", "fact"), before)
        sent = edge_listings(fake)
        then, _, _ = await recall(zep, fake, Condition("type", "eq", "fact"), before,
                                  as_of=early + timedelta(seconds=1))
    assert now == [] and then == [fact.id]
    assert any(f and "property_filters" in f for f in sent)


def test_a_bound_sent_on_valid_at_is_widened_and_eq_becomes_a_window() -> None:
    """Zep may keep times coarser than memfed's microseconds: every bound is widened by a second, `eq`
    is sent as the window around it, `eq null` as `is_null`, `ne` not at all."""
    at = "2026-01-02T03:04:05.678901+00:00"
    sent = _pushdown.edge_dates([Condition("time.valid_from", "eq", at), Condition("time.valid_from", "ne", at),
                                 Condition("time.valid_from", "eq", None), Condition("time.written_at", "gt", at)])
    assert [(c.field, c.operator, c.value and c.value.isoformat()) for c in sent] == [
        ("valid_at", "gte", "2026-01-02T03:04:04.678901+00:00"),
        ("valid_at", "lte", "2026-01-02T03:04:06.678901+00:00"),
        ("valid_at", "is_null", None)]


async def test_the_fakes_edge_listing_judges_date_groups_properties_and_types() -> None:
    """The fake's v4 edge listing keeps what `date_filters` admits (an OR of ANDs, times as instants),
    ANDs `property_filters` over the attributes, keeps the `edge_types` named (a fact's
    `attributes.relation`), and answers a field the listing does not take (`edge_types` on nodes) with
    400 unsupported_filter."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        early = await zep.remember(M1, stamps.record("Early.", type="fact", valid_from=stamps.tick()))
        late = await zep.remember(M1, stamps.record("Late.", type="fact", valid_from=stamps.tick() + timedelta(days=9),
                                                    attributes={"relation": "WORKS_AT"}))
    (graph,) = fake.graphs
    headers = {"Authorization": f"Api-Key {fake.api_key}"}
    cut = (stamps.tick() + timedelta(days=1)).isoformat()

    async def listed(kind: str, filters: dict[str, Any]) -> Any:
        async with fake.client() as client:
            answer = await client.post(f"{fake.base_url}/api/v4/graphs/{graph}/{kind}/list", json={"filters": filters},
                                       headers=headers)
        return answer

    def records(answer: Any) -> list[str]:
        return sorted(e["attributes"]["memfed_record"] for e in answer.json()["items"])

    after = await listed("edges", {"date_filters": {"any_of": [{"all_of": [
        {"field": "valid_at", "operator": "gt", "value": cut}, {"field": "invalid_at", "operator": "is_null"}]}]}})
    either = await listed("edges", {"date_filters": {"any_of": [
        {"all_of": [{"field": "valid_at", "operator": "gt", "value": cut}]},
        {"all_of": [{"field": "valid_at", "operator": "lte", "value": cut}]}]}})
    by_id = await listed("edges", {"property_filters": [
        {"property_name": "memfed_record", "operator": "in", "value": [early.id]}]})
    typed = await listed("edges", {"edge_types": ["WORKS_AT"]})
    refused = await listed("nodes", {"edge_types": ["WORKS_AT"]})
    assert records(after) == [late.id] and records(either) == sorted([early.id, late.id])
    assert records(by_id) == [early.id] and records(typed) == [late.id]
    assert (refused.status_code, refused.json()["error"]["code"]) == (400, "unsupported_filter")
