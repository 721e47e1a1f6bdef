"""The Zep adapter against the fake Zep (tests/adapters/fake_zep.py): what is particular to Zep beyond the
contract suite: a memory as a graph, records by type, versions as Zep keeps them, derivation, erase with
tasks, rate limits. Each test runs on the variant(s) it names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.base import (
    ErasureIncomplete,
    NewRecord,
    Part,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnavailable,
    RecallQuery,
    Reference,
    Unsupported,
)
from adapters.zep import ZepProvider, factory
from tests.adapters.fake_zep import FakeZep, zep_provider
from tests.adapters.harnesses import AGENT, M1, M2, PERSON, Stamps

BOTH = pytest.mark.parametrize("variant", ["v4", "v3"])


def bodies(fake: FakeZep, method: str, fragment: str) -> list[Any]:
    return [json.loads(r.content) if r.content else None for r in fake.requests
            if r.method == method and fragment in r.url.path]


def text(words: str, **fields: Any) -> NewRecord:
    return Stamps().record(words, **fields)


# --------------------------------------------------------------------------- configuration


async def test_the_factory_takes_the_documented_options_and_refuses_others(tmp_path: Path) -> None:
    """variant defaults to v4; an unknown option or variant is a ValueError naming it; a key is needed."""
    async with httpx.AsyncClient() as client:
        made = await factory({"base_url": "https://zep.test"}, client=client, data_dir=tmp_path, api_key="k")
        assert isinstance(made, ZepProvider) and made.variant == "v4"
        with pytest.raises(ValueError, match="colour"):
            await factory({"colour": "red"}, client=client, data_dir=tmp_path, api_key="k")
        with pytest.raises(ValueError, match="variant"):
            await factory({"variant": "v2"}, client=client, data_dir=tmp_path, api_key="k")
        with pytest.raises(ValueError, match="API key"):
            await factory({}, client=client, data_dir=tmp_path, api_key=None)


async def test_the_example_configs_zep_table_opens_the_adapter(tmp_path: Path) -> None:
    """Every option config.example.toml shows for [providers.zep] is one the factory takes."""
    import re

    from gateway.base.config import load

    example = Path(__file__).resolve().parents[2] / "config.example.toml"
    enabled = tmp_path / "all.toml"
    enabled.write_text(re.sub(r"(?m)^# ?(\[|[a-z_]+ = )", r"\1", example.read_text()))
    table = load(enabled).providers["zep"]
    async with httpx.AsyncClient() as client:
        made = await factory({**table.options, "base_url": table.base_url}, client=client, data_dir=tmp_path,
                             api_key="k")
    assert isinstance(made, ZepProvider) and made.variant == "v4"


async def test_every_v4_change_carries_the_api_key_and_an_idempotency_key_from_the_write_id() -> None:
    """Authorization: Api-Key on every call; Idempotency-Key on every mutating v4 call, derived from
    memfed's write id, so the same write sent twice is one write at Zep."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        new = Stamps().record("Ada works at Acme.", type="fact", write_id="hwr_" + "a" * 32)
        first = await zep.remember(M1, new)
        again = await zep.remember(M1, new)
    assert first.id == again.id
    assert all(r.headers["authorization"] == f"Api-Key {fake.api_key}" for r in fake.requests)
    mutating = [r for r in fake.requests if r.method != "GET" and "/list" not in r.url.path]
    assert mutating and all("idempotency-key" in r.headers for r in mutating)
    edge_keys = [r.headers["idempotency-key"] for r in fake.requests if r.url.path.endswith("/edges")]
    assert edge_keys == ["memfed-hwr_" + "a" * 32] * 2
    assert len([e for e in fake.edges.values() if e["attributes"]]) == 1


# --------------------------------------------------------------------------- a memory is a graph


async def test_a_memory_is_a_graph_made_on_first_write_and_found_again_by_name(tmp_path: Path) -> None:
    """v4: the graph is created on the first write, named memfed:<memory id>; a gateway that lost its
    map (a fresh data directory) finds the same graph by name and reads the record."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, data_dir=tmp_path / "one") as zep:
        assert fake.graphs == {}
        written = await zep.remember(M1, text("Kept in a graph."))
    assert [g["name"] for g in fake.graphs.values()] == [f"memfed:{M1}"]
    async with zep_provider("v4", fake, data_dir=tmp_path / "two") as other:
        assert (await other.get(M1, written.id)).content == written.content
    assert len(fake.graphs) == 1


@BOTH
async def test_dropping_a_memory_deletes_its_graph_and_waits_for_the_task(variant: str) -> None:
    fake = FakeZep(variant, task_polls=3)  # type: ignore[arg-type]
    async with zep_provider(variant, fake) as zep:  # type: ignore[arg-type]
        await zep.remember(M1, text("Doomed."))
        await zep.remember(M2, text("Kept."))
        await zep.drop_memory(M1)
        assert (await zep.list(M1)).items == ()
    assert len(fake.graphs) == 1 and all(e["graph_uuid"] in fake.graphs for e in fake.episodes.values())


async def test_a_memory_dropped_and_written_again_gets_a_graph_of_its_own() -> None:
    """The graph's create is not answered from an idempotency key Zep still holds for the dropped one
    (found by moving a memory back to Zep, whose stale copy is dropped first)."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        await zep.remember(M1, text("First life."))
        await zep.drop_memory(M1)
        again = await zep.remember(M1, text("Second life."))
        assert [r.id for r in (await zep.list(M1)).items] == [again.id]
    assert len(fake.graphs) == 1


@BOTH
async def test_a_graph_deleted_at_zep_is_forgotten_not_used_for_ever(variant: str, tmp_path: Path) -> None:
    """The graph kept in the data directory was deleted at Zep itself: reads answer an empty memory
    (not a refusal), and the next write makes the memory a new graph, also after a restart."""
    fake = FakeZep(variant)  # type: ignore[arg-type]
    async with zep_provider(variant, fake, data_dir=tmp_path) as zep:  # type: ignore[arg-type]
        await zep.remember(M1, text("Before the deletion."))
    fake._drop_graph(next(iter(fake.graphs)))
    async with zep_provider(variant, fake, data_dir=tmp_path) as zep:  # type: ignore[arg-type]
        assert (await zep.list(M1)).items == ()
        assert (await zep.recall([M1], RecallQuery(query="deletion"))).hits == ()
        again = await zep.remember(M1, text("After the deletion."))
        assert [r.id for r in (await zep.list(M1)).items] == [again.id]
    assert len(fake.graphs) == 1


async def test_a_failed_delete_task_is_reported_not_taken_for_done() -> None:
    """A v4 delete whose task ends `failed` is an erase that did not happen: its record is remaining."""
    fake = FakeZep("v4", task_outcome="failed")
    async with zep_provider("v4", fake) as zep:
        written = await zep.remember(M1, text("Still there."))
        with pytest.raises(ErasureIncomplete) as caught:
            await zep.erase(M1, [written.id])
        assert caught.value.remaining == (written.id,) and caught.value.erased == ()
        assert (await zep.get(M1, written.id)).id == written.id


async def test_a_task_zep_never_finishes_is_a_timeout_within_the_bound() -> None:
    fake = FakeZep("v4", task_polls=10_000)
    async with zep_provider("v4", fake, task_wait=0.05) as zep:
        await zep.remember(M1, text("Slow to go."))
        with pytest.raises(ProviderTimeout):
            await zep.drop_memory(M1)


# --------------------------------------------------------------------------- records by type


async def test_a_fact_is_an_edge_between_its_subject_and_object_entities_nodes() -> None:
    """An entity is a node; a fact naming it as subject is an edge from that node (by uuid); a note is
    an episode; memfed's fields ride in an edge's and a node's attributes (v4 reads those back without
    metadata) and in at most 10 metadata keys of an episode."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        ada = await zep.remember(M1, stamps.record("Ada Lovelace, engineer.", type="entity", title="Ada"))
        acme = await zep.remember(M1, stamps.record("Acme Corp.", type="entity", title="Acme"))
        fact = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact", attributes={
            "relation": "works at"}, references=(Reference(M1, ada.id, "subject"), Reference(M1, acme.id, "object"))))
        await zep.remember(M1, stamps.record("Met Ada at the fair.", type="note"))
        read = await zep.get(M1, fact.id)
    nodes = {n["attributes"].get("memfed_record"): n for n in fake.nodes.values() if n["attributes"]}
    edge = next(e for e in fake.edges.values() if e["attributes"])
    assert (edge["source_node_uuid"], edge["target_node_uuid"]) == (nodes[ada.id]["uuid"], nodes[acme.id]["uuid"])
    assert edge["name"] == "WORKS_AT" and edge["fact"] == "Ada works at Acme."
    assert [e["content"] for e in fake.episodes.values() if e["source"] == "text"] == ["Met Ada at the fair."]
    assert all(len(o["metadata"]) <= 10 for o in fake.episodes.values())
    assert read.references == fact.references and read.attributes == {"relation": "works at"}


async def test_more_than_ten_metadata_keys_is_refused_by_zep() -> None:
    """The fake holds v4 to its limit, so the adapter's packing is what keeps a write under it."""
    fake = FakeZep("v4")
    async with fake.client() as client:
        graph = (await client.post(f"{fake.base_url}/api/v4/graphs", json={"name": "g"},
                                   headers={"Authorization": f"Api-Key {fake.api_key}"})).json()
        answer = await client.post(f"{fake.base_url}/api/v4/graphs/{graph['uuid']}/episodes", headers={
            "Authorization": f"Api-Key {fake.api_key}"}, json={"data": "x", "type": "text",
                                                               "metadata": {f"k{i}": i for i in range(11)}})
    assert answer.status_code == 400


# --------------------------------------------------------------------------- versions and time


async def test_v4_revise_adds_an_edge_and_marks_the_old_one_without_patching_its_times() -> None:
    """v4 sets temporal fields at creation only: the revise adds a new edge and marks the old one's
    attributes (never a PATCH of valid_at/invalid_at/expired_at); history has both; as_of reads the old."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        first = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact"))
        second = await zep.revise(M1, first.id, stamps.revision(content=(Part("text", "Ada works at Globex."),)))
        chain = await zep.history(M1, first.id)
        then = await zep.get(M1, first.id, as_of=first.time.written_at)
    patches = bodies(fake, "PATCH", "/edges/")
    assert patches and all(not {"valid_at", "invalid_at", "expired_at"} & set(p) for p in patches)
    assert [(r.version, r.status) for r in chain] == [(1, "superseded"), (2, "active")]
    assert chain[0].time.invalidated_at == second.time.written_at
    assert then.version == 1 and then.status == "active"
    old = next(e for e in fake.edges.values() if e["attributes"].get("memfed_version") == 1)
    assert "memfed_closed_at" in old["attributes"]


async def test_a_revise_whose_closing_call_failed_never_shows_the_old_version_and_is_repaired() -> None:
    """The new version was written and the call closing the old one failed: recall shows the new version
    only, and the next revise closes the one left open."""
    fake = FakeZep("v4")
    stamps = Stamps()
    async with zep_provider("v4", fake) as zep:
        first = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact"))
        fake.fail("500", times=1, when=lambda r: r.method == "PATCH")
        with pytest.raises(ProviderUnavailable):
            await zep.revise(M1, first.id, stamps.revision(content=(Part("text", "Ada works at Globex."),)))
        found = await zep.recall([M1], RecallQuery(query="Ada works"))
        assert [h.record.version for h in found.hits] == [2]
        await zep.revise(M1, first.id, stamps.revision(title="Third"))
    closed = {e["attributes"]["memfed_version"]: "memfed_closed_at" in e["attributes"] for e in fake.edges.values()
              if e["attributes"]}
    assert closed == {1: True, 2: True, 3: False}


async def test_v3_revise_patches_the_old_edges_invalid_at_and_expired_at() -> None:
    fake = FakeZep("v3")
    stamps = Stamps()
    async with zep_provider("v3", fake) as zep:
        first = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact"))
        second = await zep.revise(M1, first.id, stamps.revision(content=(Part("text", "Ada works at Globex."),)))
        found = await zep.recall([M1], RecallQuery(query="Ada works"))
    old = next(e for e in fake.edges.values() if e["attributes"].get("memfed_version") == 1)
    assert old["expired_at"] is not None and old["invalid_at"] is not None
    assert [h.record.version for h in found.hits] == [second.version]


@BOTH
async def test_forget_invalidates_and_keeps_history_and_recall_shows_current_facts_only(variant: str) -> None:
    """A forgotten fact leaves recall (current facts only) but stays in history and in include=all."""
    stamps = Stamps()
    async with zep_provider(variant) as zep:  # type: ignore[arg-type]
        fact = await zep.remember(M1, stamps.record("Renewal slips to April.", type="fact"))
        await zep.forget(M1, fact.id, PERSON, stamps.tick())
        default = await zep.recall([M1], RecallQuery(query="renewal April"))
        everything = await zep.recall([M1], RecallQuery(query="renewal April", include="all"))
        chain = await zep.history(M1, fact.id)
    assert default.hits == ()
    assert [h.record.status for h in everything.hits] == ["forgotten"]
    assert [r.status for r in chain] == ["superseded", "forgotten"]


# --------------------------------------------------------------------------- derivation


@BOTH
async def test_what_zep_derives_reads_as_the_providers_and_never_as_stated(variant: str) -> None:
    """An episode is processed in the background; the edge and nodes Zep derives from it are listed as
    written by the provider, referencing the episode they came from, and the stated note is unchanged."""
    fake = FakeZep(variant)  # type: ignore[arg-type]
    async with zep_provider(variant, fake) as zep:  # type: ignore[arg-type]
        note = await zep.remember(M1, text("Dana moved to Berlin.", by=AGENT))
        assert await zep.derivation_pending(M1, [note.id]) is True
        assert [r.id for r in (await zep.list(M1)).items] == [note.id]
        fake.process()
        assert await zep.derivation_pending(M1, [note.id]) is False
        listed = (await zep.list(M1, limit=100)).items
    derived = [r for r in listed if r.id != note.id]
    assert {r.type for r in derived} == {"fact", "entity"}
    assert all(r.written_by.kind == "provider" and r.written_by.id == "zep" for r in derived)
    fact = next(r for r in derived if r.type == "fact")
    assert Reference(M1, note.id, "derived_from") in fact.references
    assert next(r for r in listed if r.id == note.id).written_by == AGENT
    async with zep_provider(variant, fake) as zep:  # type: ignore[arg-type]
        with pytest.raises(Unsupported):  # Zep's own record: memfed does not restate it
            await zep.revise(M1, fact.id, Stamps().revision(title="Mine now"))


async def test_v4_ingestion_is_followed_by_its_task_with_one_poll() -> None:
    """v4 answers an episode's add with its ingestion task: whether Zep is still deriving is one poll of
    that task (no listing of the graph), pending until Zep has processed the episode."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        note = await zep.remember(M1, text("Dana moved to Berlin."))
        fake.requests.clear()
        assert await zep.derivation_pending(M1, [note.id]) is True
        fake.process()
        assert await zep.derivation_pending(M1, [note.id]) is False
    assert [(r.method, r.url.path.split("/")[3]) for r in fake.requests] == [("GET", "tasks")] * 2


async def test_v4_ingestion_is_followed_by_its_task_after_a_restart(tmp_path: Path) -> None:
    """The ingestion task of an episode outlives the process that wrote it: a provider opened afresh on
    the same data dir (a restart, or another gateway process sharing it) asks `GET tasks/{uuid}`, not the
    graph's listing; pending until Zep has processed the episode."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, data_dir=tmp_path) as zep:
        note = await zep.remember(M1, text("Dana moved to Berlin."))
    async with zep_provider("v4", fake, data_dir=tmp_path) as again:
        fake.requests.clear()
        assert await again.derivation_pending(M1, [note.id]) is True
        fake.process()
        assert await again.derivation_pending(M1, [note.id]) is False
    assert [(r.method, r.url.path.split("/")[3]) for r in fake.requests] == [("GET", "tasks")] * 2


async def test_a_succeeded_ingestion_leaves_the_kept_tasks(tmp_path: Path) -> None:
    """Once its task succeeded, an episode's entry leaves the data dir's file (the episode now says
    `processed: true`, which a later reader trusts), so the file holds only what may run or failed."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake, data_dir=tmp_path) as zep:
        done = await zep.remember(M1, text("Dana moved to Berlin."))
        fake.process()
        running = await zep.remember(M1, text("Ada moved to Paris."))
        assert await zep.derivation_pending(M1, [done.id]) is False
    assert list(json.loads((tmp_path / "zep-ingests.json").read_text())) == [running.id]
    async with zep_provider("v4", fake, data_dir=tmp_path) as later:
        assert await later.derivation_pending(M1, [done.id]) is False
        assert await later.derivation_pending(M1, [running.id]) is True


async def test_a_failed_ingestion_ends_the_wait_even_after_a_restart(tmp_path: Path) -> None:
    """Zep failing an episode's ingestion leaves the episode `processed: false` for good; the task says
    `failed`, so a provider opened afresh on the same data dir answers "no longer pending" instead of
    waiting forever on the flag, and asks no more after."""
    fake = FakeZep("v4", ingest_outcome="failed")
    async with zep_provider("v4", fake, data_dir=tmp_path) as zep:
        note = await zep.remember(M1, text("Dana moved to Berlin."))
    fake.process()
    assert [e["processed"] for e in fake.episodes.values()] == [False]
    async with zep_provider("v4", fake, data_dir=tmp_path) as again:
        assert await again.derivation_pending(M1, [note.id]) is False
    async with zep_provider("v4", fake, data_dir=tmp_path) as third:
        fake.requests.clear()
        assert await third.derivation_pending(M1, [note.id]) is False  # the ended task is remembered
    assert fake.requests == []


@BOTH
async def test_erasing_an_episode_reports_the_facts_zep_keeps_from_it(variant: str) -> None:
    """Zep keeps what it derived when an episode is deleted: the erased note is reported unreachable;
    a fact added directly takes its fact_triple episode with it and is gone for good."""
    fake = FakeZep(variant)  # type: ignore[arg-type]
    async with zep_provider(variant, fake) as zep:  # type: ignore[arg-type]
        note = await zep.remember(M1, text("Dana moved to Berlin."))
        fact = await zep.remember(M1, text("Acme renews in March.", type="fact"))
        fake.process()
        erased = await zep.erase(M1, [note.id, fact.id])
    assert set(erased.erased) == {note.id, fact.id} and erased.unreachable == (note.id,)
    assert not [e for e in fake.episodes.values() if e["source"] == "fact_triple"]


# --------------------------------------------------------------------------- recall


async def test_recall_searches_each_graph_once_per_kind_asking_current_facts_only() -> None:
    """One search per graph and kind (Zep searches one graph per call); the edge search asks Zep for
    current facts only (invalid_at and expired_at null); a type of episode records is asked by memfed's key."""
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        await zep.remember(M1, text("Acme renews in March."))
        await zep.remember(M2, text("Acme renews in May."))
        fake.requests.clear()
        found = await zep.recall([M1, M2], RecallQuery(query="Acme renews"))
        edges = bodies(fake, "POST", "/search/edges")
        searches = len(bodies(fake, "POST", "/search/"))
        fake.requests.clear()
        await zep.recall([M1], RecallQuery(query="Acme renews", types=("note",)))
        typed = bodies(fake, "POST", "/search/")
    assert {h.record.memory_id for h in found.hits} == {M1, M2}
    assert len(edges) == 2 and searches == 6  # two graphs, three kinds each
    assert edges[0]["filters"]["date_filters"] == {"any_of": [{"all_of": [
        {"field": "invalid_at", "operator": "is_null"}, {"field": "expired_at", "operator": "is_null"}]}]}
    assert [b["filters"]["metadata_filters"]["filters"] for b in typed] == [
        [{"property_name": "memfed_type", "operator": "eq", "value": "note"}]]


async def test_a_429_carries_zeps_retry_after_to_the_breaker() -> None:
    fake = FakeZep("v4")
    async with zep_provider("v4", fake) as zep:
        await zep.remember(M1, text("Anything."))
        fake.fail("429", times=1)
        with pytest.raises(ProviderRateLimited) as caught:
            await zep.recall([M1], RecallQuery(query="anything"))
    assert caught.value.retry_after == 60


# --------------------------------------------------------------------------- Zep's own graph


@BOTH
async def test_the_neighbourhood_of_an_entity_comes_from_zeps_subgraph(variant: str) -> None:
    stamps = Stamps()
    async with zep_provider(variant) as zep:  # type: ignore[arg-type]
        ada = await zep.remember(M1, stamps.record("Ada.", type="entity", title="Ada"))
        acme = await zep.remember(M1, stamps.record("Acme.", type="entity", title="Acme"))
        far = await zep.remember(M1, stamps.record("Elsewhere.", type="entity", title="Far"))
        fact = await zep.remember(M1, stamps.record("Ada works at Acme.", type="fact", references=(
            Reference(M1, ada.id, "subject"), Reference(M1, acme.id, "object"))))
        around = await zep.neighbourhood(M1, ada.id, 1)
        assert await zep.neighbourhood(M2, ada.id, 1) is None
    assert around is not None
    assert around[0].id == ada.id and {r.id for r in around} == {ada.id, acme.id, fact.id}
    assert far.id not in {r.id for r in around}
