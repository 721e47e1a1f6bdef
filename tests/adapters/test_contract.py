"""The contract every adapter keeps (adapters/base.py, UHP Memories §4-§6, §10), run against each
entry of HARNESSES. Where adapters may differ, the test reads the adapter's capability document and
pins the behaviour it declares; a test is skipped only when the document says the feature is absent.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Iterable
from datetime import UTC, datetime

import pytest

from adapters.base import (
    CORE_TYPES,
    SIGNALS,
    Capabilities,
    Condition,
    FileRef,
    Part,
    Provider,
    RecallQuery,
    Record,
    RecordNotFound,
    Signal,
    Unsupported,
)
from tests.adapters.harnesses import AGENT, M1, M2, M3, PERSON, Stamps

T_VALID_TO = datetime(2030, 1, 1, tzinfo=UTC)

PLANTED_TEXT = "Acme renews in March and wants its discount kept."
UNRELATED_TEXT = "The office coffee machine on the third floor is broken on Tuesdays."

# One request per signal that the planted record answers and the unrelated one does not.
ASK: dict[Signal, RecallQuery] = {
    "query": RecallQuery(query="When does Acme renew its contract?"),
    "text": RecallQuery(text="discount"),
    "filters": RecallQuery(filters=(Condition("attributes.account", "eq", "acme"),)),
}


async def plant(provider: Provider, stamps: Stamps, memory_id: str = M1) -> tuple[Record, Record]:
    planted = await provider.remember(
        memory_id,
        stamps.record(PLANTED_TEXT, type="fact", title="Acme renewal terms", attributes={"account": "acme"}),
    )
    unrelated = await provider.remember(
        memory_id,
        stamps.record(UNRELATED_TEXT, type="note", title="Coffee machine", attributes={"account": "globex"}),
    )
    return planted, unrelated


def first_signal(caps: Capabilities) -> Signal:
    """A signal this adapter answers, words first, for tests about something other than signals."""
    for signal in ("text", "query", "filters"):
        if signal in caps.signals:
            return signal
    raise AssertionError("an adapter must answer at least one signal")


def ids(records: Iterable[Record]) -> list[str]:
    return [r.id for r in records]


# --------------------------------------------------------------------------- shape


def test_adapter_is_a_provider(provider: Provider) -> None:
    """Every adapter satisfies the Provider protocol."""
    assert isinstance(provider, Provider)


def test_capability_document_has_every_key_of_section_10_2(provider: Provider) -> None:
    """The document carries every §10.2 key, each value the dataclass's own, within its vocabulary."""
    caps = provider.capabilities()
    doc = caps.document("under-test")

    assert doc["id"] == "under-test"
    assert {
        "isolation", "derivation", "observe", "recall", "history", "revise", "forget", "erase",
        "prime", "consolidate", "queries", "types", "graph", "content",
    } <= doc.keys()  # fmt: skip
    assert doc["isolation"] == caps.isolation in ("container", "enforced_filter")
    assert doc["derivation"] == caps.derivation in ("write_time", "background", "agent", "none")
    assert doc["observe"] == {"keeps_episodes": caps.keeps_episodes, "answers": caps.observe_answers}
    assert doc["recall"]["signals"] == list(caps.signals)
    assert set(caps.signals) <= set(SIGNALS)
    assert doc["recall"]["abstain"] is caps.abstain
    assert doc["recall"]["emulated"] == list(caps.emulated_signals)
    assert set(caps.emulated_signals) <= set(caps.signals), "only an answered signal can be emulated"
    assert doc["history"] == {"content": caps.history_content, "structure": caps.history_structure}
    for kept in (caps.history_content, caps.history_structure):
        assert kept in ("versions", "snapshots", "none")
    assert doc["revise"] == caps.revise in ("native", "emulated", "false")
    assert doc["forget"] == caps.forget in ("native", "emulated", "false")
    assert doc["erase"] == {"unreachable": caps.erase_unreachable}
    assert caps.erase_unreachable in ("reported", "none")
    assert doc["prime"] is caps.prime
    assert doc["consolidate"] == (caps.consolidate if caps.consolidate != "false" else False)
    assert doc["queries"]["named"] is caps.named_queries
    assert doc["types"] is caps.types
    assert doc["graph"] == {"entities": caps.graph_entities}
    assert caps.graph_entities in ("derived", "stated", "none")
    assert doc["content"] == {
        "media": list(caps.media),
        "bytes": caps.bytes,
        "describes": list(caps.describes),
    }
    assert all("/" in media for media in caps.media)
    assert doc["x.memfed"] == {
        "as_of": caps.as_of,
        "searches_many_memories": caps.searches_many_memories,
        "records_per_memory": caps.records_per_memory,
        "data_location": caps.data_location,
        **({"filters": dict(caps.filter_fields)} if caps.filter_fields else {}),
    }
    assert all(support in ("native", "emulated") for _, support in caps.filter_fields)
    if "filters" in caps.emulated_signals:
        assert all(support == "emulated" for _, support in caps.filter_fields), "a field said native, all emulated"


# --------------------------------------------------------------------------- remember, get, list


async def test_remember_then_get_returns_the_record_as_stated(provider: Provider, stamps: Stamps) -> None:
    """remember writes version 1, active, as stated; get by id returns the same record."""
    new = stamps.record(
        "Dana prefers email.", type="fact", title="Dana's channel", attributes={"who": "dana"}
    )
    written = await provider.remember(M1, new)

    assert (written.version, written.status, written.supersedes) == (1, "active", None)
    read = await provider.get(M1, written.id)
    for record in (written, read):
        assert record.id == written.id
        assert record.memory_id == M1
        assert (record.type, record.title) == ("fact", "Dana's channel")
        assert record.content == (Part(type="text", text="Dana prefers email."),)
        assert dict(record.attributes) == {"who": "dana"}
        assert record.written_by == AGENT
        assert record.time.written_at == new.written_at


async def test_get_through_another_memory_is_not_found(provider: Provider, stamps: Stamps) -> None:
    """A record is reached only through its own memory: asked through another, it does not exist."""
    written = await provider.remember(M1, stamps.record("Kept in memory one."))

    with pytest.raises(RecordNotFound):
        await provider.get(M2, written.id)


async def test_get_of_an_unknown_id_is_not_found(provider: Provider) -> None:
    """An id no one wrote raises RecordNotFound, not a provider failure."""
    with pytest.raises(RecordNotFound):
        await provider.get(M1, "hrec_" + "0" * 32)


async def test_list_pages_newest_first_and_shows_each_record_once(provider: Provider, stamps: Stamps) -> None:
    """Seven records paged three at a time: 3, 3, 1, newest first, none missing, none twice."""
    written = [await provider.remember(M1, stamps.record(f"Record number {i}.")) for i in range(7)]

    pages, cursor = [], None
    while True:
        page = await provider.list(M1, limit=3, cursor=cursor)
        pages.append(ids(page.items))
        if page.next is None:
            break
        cursor = page.next
        assert len(pages) < 7, "the cursor never ran out"

    assert [len(p) for p in pages] == [3, 3, 1]
    assert [rid for p in pages for rid in p] == ids(reversed(written))


async def test_list_shows_only_the_types_asked(provider: Provider, stamps: Stamps) -> None:
    """list(types=...) returns records of those types and no other."""
    fact = await provider.remember(M1, stamps.record("A fact.", type="fact"))
    await provider.remember(M1, stamps.record("A note.", type="note"))

    page = await provider.list(M1, types=("fact",))
    assert ids(page.items) == [fact.id]


async def test_list_shows_one_memory_only(provider: Provider, stamps: Stamps) -> None:
    """list reads the memory named and nothing else (§6.1: reading is exact)."""
    mine = await provider.remember(M1, stamps.record("Mine."))
    await provider.remember(M2, stamps.record("Someone else's."))

    assert ids((await provider.list(M1)).items) == [mine.id]


# --------------------------------------------------------------------------- revise, history, forget


def need(caps: Capabilities, operation: str) -> None:
    if getattr(caps, operation) == "false":
        pytest.skip(f"the capability document declares {operation}: false")


async def test_revise_appends_a_version_that_supersedes_the_last(provider: Provider, stamps: Stamps) -> None:
    """revise returns version 2, superseding 1, with the new content; get then shows it."""
    need(provider.capabilities(), "revise")
    first = await provider.remember(M1, stamps.record("Acme renews in March."))

    second = await provider.revise(
        M1, first.id, stamps.revision(content=(Part(type="text", text="Acme renews in April."),))
    )

    assert (second.id, second.version, second.supersedes, second.status) == (first.id, 2, 1, "active")
    assert second.written_by == PERSON
    current = await provider.get(M1, first.id)
    assert current.version == 2
    assert current.content == (Part(type="text", text="Acme renews in April."),)


async def test_revise_keeps_what_the_revision_leaves_unset(provider: Provider, stamps: Stamps) -> None:
    """A Revision field left None keeps the current version's value."""
    need(provider.capabilities(), "revise")
    first = await provider.remember(
        M1, stamps.record("Original words.", type="fact", title="Original title", attributes={"k": "v"})
    )

    second = await provider.revise(M1, first.id, stamps.revision(title="New title"))

    assert second.title == "New title"
    assert (second.type, second.content, dict(second.attributes)) == ("fact", first.content, {"k": "v"})


async def test_revise_clears_what_the_revision_names_in_clear(provider: Provider, stamps: Stamps) -> None:
    """A field named in Revision.clear is emptied (title, validity), the others kept; an unclearable
    field cannot be named."""
    need(provider.capabilities(), "revise")
    first = await provider.remember(M1, stamps.record("Words.", title="A title", valid_to=T_VALID_TO))

    second = await provider.revise(M1, first.id, stamps.revision(clear=frozenset({"title", "valid_to"})))

    assert (second.title, second.time.valid_to, second.content) == (None, None, first.content)
    assert (await provider.get(M1, first.id)).title is None
    with pytest.raises(ValueError):
        stamps.revision(clear=frozenset({"content"}))


async def test_revise_when_declared_false_is_refused(provider: Provider, stamps: Stamps) -> None:
    """An adapter declaring revise: false refuses it with Unsupported rather than faking it."""
    if provider.capabilities().revise != "false":
        pytest.skip("the capability document declares revise")
    first = await provider.remember(M1, stamps.record("Words."))
    with pytest.raises(Unsupported):
        await provider.revise(M1, first.id, stamps.revision(title="Other"))


async def test_history_keeps_every_version_oldest_first(provider: Provider, stamps: Stamps) -> None:
    """With history.content "versions", history returns v1 (superseded, closed when v2 was written)
    then v2 (active), each with its own writer and time."""
    caps = provider.capabilities()
    need(caps, "revise")
    if caps.history_content != "versions":
        pytest.skip(f"the capability document declares history.content: {caps.history_content}")
    first = await provider.remember(M1, stamps.record("Version one."))
    second = await provider.revise(M1, first.id, stamps.revision(title="Version two"))

    chain = await provider.history(M1, first.id)

    assert [(r.version, r.status, r.supersedes) for r in chain] == [(1, "superseded", None), (2, "active", 1)]
    assert [r.written_by for r in chain] == [AGENT, PERSON]
    assert chain[0].time.invalidated_at == second.time.written_at
    assert chain[1].time.invalidated_at is None


async def test_history_through_another_memory_is_not_found(provider: Provider, stamps: Stamps) -> None:
    """history, like get, does not reach a record through a memory it is not in."""
    written = await provider.remember(M1, stamps.record("Words."))
    with pytest.raises(RecordNotFound):
        await provider.history(M2, written.id)


async def test_forget_takes_the_record_out_of_listings(provider: Provider, stamps: Stamps) -> None:
    """A forgotten record leaves list(); where versions are kept, get shows it as forgotten and
    list(include="all") still has it; where none are kept, get no longer finds it."""
    caps = provider.capabilities()
    need(caps, "forget")
    kept = await provider.remember(M1, stamps.record("Stays."))
    gone = await provider.remember(M1, stamps.record("Goes."))

    closed = await provider.forget(M1, gone.id, PERSON, stamps.tick())

    assert closed.status == "forgotten"
    assert ids((await provider.list(M1)).items) == [kept.id]
    if caps.history_content == "none":
        with pytest.raises(RecordNotFound):
            await provider.get(M1, gone.id)
    else:
        assert (await provider.get(M1, gone.id)).status == "forgotten"
        assert set(ids((await provider.list(M1, include="all")).items)) == {kept.id, gone.id}


async def test_forget_when_declared_false_is_refused(provider: Provider, stamps: Stamps) -> None:
    """An adapter declaring forget: false refuses it with Unsupported."""
    if provider.capabilities().forget != "false":
        pytest.skip("the capability document declares forget")
    written = await provider.remember(M1, stamps.record("Words."))
    with pytest.raises(Unsupported):
        await provider.forget(M1, written.id, PERSON, stamps.tick())


async def test_forget_through_another_memory_is_not_found(provider: Provider, stamps: Stamps) -> None:
    """forget does not reach a record through a memory it is not in, and leaves it untouched."""
    need(provider.capabilities(), "forget")
    written = await provider.remember(M1, stamps.record("Words."))
    with pytest.raises(RecordNotFound):
        await provider.forget(M2, written.id, PERSON, stamps.tick())
    assert (await provider.get(M1, written.id)).status == "active"


# --------------------------------------------------------------------------- erase


async def test_erase_reports_what_it_erased_and_honestly_what_it_could_not(
    provider: Provider, stamps: Stamps
) -> None:
    """erase answers the ids it removed from this memory (not another memory's, not unknown ones).
    With erase.unreachable "reported", an id not listed unreachable is gone for good: neither get
    nor history finds it. Another memory's record is untouched."""
    caps = provider.capabilities()
    doomed = await provider.remember(M1, stamps.record("To be erased."))
    if caps.revise != "false":
        await provider.revise(M1, doomed.id, stamps.revision(title="A second version to erase too"))
    elsewhere = await provider.remember(M2, stamps.record("In another memory."))

    erasure = await provider.erase(M1, [doomed.id, elsewhere.id, "hrec_" + "0" * 32])

    assert erasure.erased == (doomed.id,)
    assert set(erasure.unreachable) <= set(erasure.erased)
    with pytest.raises(RecordNotFound):
        await provider.get(M1, doomed.id)
    if caps.erase_unreachable == "reported" and doomed.id not in erasure.unreachable:
        with pytest.raises(RecordNotFound):
            await provider.history(M1, doomed.id)
    assert (await provider.get(M2, elsewhere.id)).id == elsewhere.id


# --------------------------------------------------------------------------- recall


@pytest.mark.parametrize("signal", SIGNALS)
async def test_recall_by_each_declared_signal_finds_the_planted_record(
    provider: Provider, stamps: Stamps, signal: Signal
) -> None:
    """A recall with one declared signal alone finds the record it describes, says so in `why`, and
    does not return an unrelated record. A vector search with no relevance cut-off (meaning, on a
    provider that cannot abstain) ranks every record, so there the unrelated one must rank below."""
    if signal not in provider.capabilities().signals:
        pytest.skip(f"{signal} is not declared (see the not_supported test)")
    planted, unrelated = await plant(provider, stamps)

    answer = await provider.recall([M1], ASK[signal])

    found = {hit.record.id: hit for hit in answer.hits}
    assert planted.id in found
    assert signal in found[planted.id].why
    caps = provider.capabilities()
    if signal == "query" and "query" not in caps.emulated_signals and not caps.abstain:
        assert answer.hits[0].record.id == planted.id
        if unrelated.id in found:
            assert found[unrelated.id].score < found[planted.id].score
    else:
        assert unrelated.id not in found
    assert answer.degraded == ()


@pytest.mark.parametrize("signal", SIGNALS)
async def test_recall_by_an_undeclared_signal_says_not_supported(
    provider: Provider, stamps: Stamps, signal: Signal
) -> None:
    """A signal the adapter does not declare is left out and named in degraded, never approximated."""
    caps = provider.capabilities()
    if signal in caps.signals:
        pytest.skip(f"{signal} is declared (see the finds-the-planted-record test)")
    await plant(provider, stamps)
    other = first_signal(caps)
    asked = ASK[signal]
    both = RecallQuery(query=asked.query or ASK[other].query, text=asked.text or ASK[other].text,
                       filters=asked.filters or ASK[other].filters)  # fmt: skip

    answer = await provider.recall([M1], both)

    assert f"{signal}:not_supported" in answer.degraded
    assert all(signal not in hit.why for hit in answer.hits)


async def test_query_and_filters_are_fused_and_why_names_each(provider: Provider, stamps: Stamps) -> None:
    """The one meaning of combined signals on every provider: each signal ranks on its own and the lists
    are fused, so a record matching both comes first, and one matching only the filters (however unlike
    the question) or only the question is still returned, its `why` naming the signals that found it (a
    vector search with no relevance cut-off ranks every record, so `query` may find the unlike one too)."""
    caps = provider.capabilities()
    if not {"query", "filters"} <= set(caps.signals):
        pytest.skip("query and filters are not both declared")
    both = await provider.remember(M1, stamps.record("Acme renewal contract terms.", attributes={"account": "acme"}))
    question_only = await provider.remember(
        M1, stamps.record("Globex renewal contract terms.", attributes={"account": "globex"}))
    filters_only = await provider.remember(
        M1, stamps.record("Office coffee machine broken.", attributes={"account": "acme"}))

    answer = await provider.recall([M1], RecallQuery(
        query="renewal contract", filters=(Condition("attributes.account", "eq", "acme"),)))

    why = {hit.record.id: hit.why for hit in answer.hits}
    assert answer.hits[0].record.id == both.id and why[both.id] == ("query", "filters")
    assert "filters" in why[filters_only.id]
    assert why[question_only.id] == ("query",)
    assert answer.hits[0].score > max(h.score for h in answer.hits[1:])


async def test_recall_searches_the_memories_asked_and_no_other(provider: Provider, stamps: Stamps) -> None:
    """One recall over two memories returns hits from both and never from a third not asked."""
    caps = provider.capabilities()
    if not caps.searches_many_memories:
        pytest.skip("the capability document declares searches_many_memories: false")
    planted = {m: (await plant(provider, stamps, m))[0] for m in (M1, M2, M3)}

    answer = await provider.recall([M1, M2], ASK[first_signal(caps)])

    found = {(hit.record.memory_id, hit.record.id) for hit in answer.hits}
    assert (M1, planted[M1].id) in found
    assert (M2, planted[M2].id) in found
    assert {memory for memory, _ in found} == {M1, M2}


async def test_recall_returns_only_the_types_asked(provider: Provider, stamps: Stamps) -> None:
    """recall(types=...) keeps to those types, whichever signal found the record."""
    caps = provider.capabilities()
    signal = first_signal(caps)
    fact = await provider.remember(
        M1, stamps.record(PLANTED_TEXT, type="fact", title="Acme renewal", attributes={"account": "acme"})
    )
    await provider.remember(
        M1, stamps.record(PLANTED_TEXT, type="note", title="Acme renewal", attributes={"account": "acme"})
    )
    asked = ASK[signal]
    typed = RecallQuery(query=asked.query, text=asked.text, filters=asked.filters, types=("fact",))

    answer = await provider.recall([M1], typed)

    assert [hit.record.id for hit in answer.hits] == [fact.id]


async def test_core_types_are_all_kept(provider: Provider, stamps: Stamps) -> None:
    """Every core type of §4.1 can be remembered and read back under its own type."""
    written = {t: await provider.remember(M1, stamps.record(f"A {t}.", type=t)) for t in CORE_TYPES}
    for record_type, record in written.items():
        assert (await provider.get(M1, record.id)).type == record_type


# --------------------------------------------------------------------------- as_of, content


async def test_as_of_is_answered_as_declared(provider: Provider, stamps: Stamps) -> None:
    """With `as_of` declared, get as of an instant between two versions reads the first; declared false,
    the read is refused with Unsupported rather than answered with the current version."""
    caps = provider.capabilities()
    need(caps, "revise")
    first = await provider.remember(M1, stamps.record("Version one."))
    between = stamps.tick()
    await provider.revise(M1, first.id, stamps.revision(title="Version two"))
    if not caps.as_of:
        with pytest.raises(Unsupported):
            await provider.get(M1, first.id, as_of=between)
        return
    assert (await provider.get(M1, first.id, as_of=between)).version == 1


async def test_a_file_part_of_a_kept_media_type_reads_back_as_written(provider: Provider, stamps: Stamps) -> None:
    """content.media is a claim: a file part of a declared type (the bytes referenced, never carried)
    comes back with its reference, words and order unchanged."""
    caps = provider.capabilities()
    if not any(fnmatch.fnmatch("image/png", pattern) for pattern in caps.media):
        pytest.skip("the capability document does not declare image/png")
    content = (Part(type="text", text="The approved logo."),
               Part(type="file", file=FileRef("hfile_" + "1" * 32, "logo.png", "image/png", 2048),
                    text="A blue circle.", text_source="stated"))
    written = await provider.remember(M1, stamps.record(content=content))
    assert (await provider.get(M1, written.id)).content == content


async def test_an_episode_is_kept_as_written_and_nothing_is_derived_unless_declared(
    provider: Provider, stamps: Stamps
) -> None:
    """observe.keeps_episodes: an episode reads back as the episode written. derivation "none": writing
    it makes that one record and no other (a provider that derives declares so)."""
    caps = provider.capabilities()
    if not caps.keeps_episodes:
        pytest.skip("the capability document declares observe.keeps_episodes: false")
    said = "The customer called: the invoice address changed. She prefers email from now on."
    episode = await provider.remember(M1, stamps.record(said, type="episode"))
    read = await provider.get(M1, episode.id)
    assert (read.type, read.content, read.written_by) == ("episode", (Part(type="text", text=said),), AGENT)
    if caps.derivation == "none":
        assert ids((await provider.list(M1, include="all")).items) == [episode.id]


async def test_a_provider_deriving_by_agent_adds_records_of_its_own(provider: Provider, stamps: Stamps) -> None:
    """derivation "agent": an episode written also yields what the provider's own agent derives from it,
    by the time the write returns, each written by the provider and kept apart from the episode."""
    if provider.capabilities().derivation != "agent":
        pytest.skip("the capability document does not declare derivation: agent")
    said = "Dana prefers email over phone calls. The invoice address changed in May."
    episode = await provider.remember(M1, stamps.record(said, type="episode"))
    others = [r for r in (await provider.list(M1, include="all")).items if r.id != episode.id]
    assert others and all(r.written_by.kind == "provider" for r in others)
    assert (await provider.get(M1, episode.id)).written_by == AGENT
# --------------------------------------------------------------------------- as_of, background derivation


async def test_as_of_reads_the_version_current_at_that_instant(provider: Provider, stamps: Stamps) -> None:
    """With as_of declared, a read at an instant between two versions shows the first as it stood then
    (active), and one before the record was written does not find it."""
    caps = provider.capabilities()
    if not caps.as_of or caps.revise == "false":
        pytest.skip("the capability document declares no as_of (or no revise)")
    first = await provider.remember(M1, stamps.record("Version one."))
    between = stamps.tick()
    await provider.revise(M1, first.id, stamps.revision(title="Version two"))

    then = await provider.get(M1, first.id, as_of=between)
    listed = await provider.list(M1, as_of=between)

    assert (then.version, then.status, then.title) == (1, "active", None)
    assert [(r.id, r.version) for r in listed.items] == [(first.id, 1)]
    with pytest.raises(RecordNotFound):
        await provider.get(M1, first.id, as_of=first.time.written_at.replace(year=2000))


async def test_background_derivation_is_declared_with_a_way_to_know_it_is_done(
        provider: Provider, stamps: Stamps) -> None:
    """A provider declaring `derivation: background` answers observe with a job, and can say whether
    it is still deriving from what it was given (adapters/deriving.py), which the job's status waits for."""
    from adapters.deriving import DerivingProvider

    caps = provider.capabilities()
    if caps.derivation != "background":
        pytest.skip(f"the capability document declares derivation: {caps.derivation}")
    assert caps.observe_answers == "job"
    assert isinstance(provider, DerivingProvider)
    stated = await provider.remember(M1, stamps.record("Acme renews in March.", type="fact"))
    assert await provider.derivation_pending(M1, [stated.id]) is False  # a stated fact is not derived from


# --------------------------------------------------------------------------- prime


async def test_a_provider_declaring_prime_places_its_own_context_for_one_memory(
    provider: Provider, stamps: Stamps
) -> None:
    """With `prime: true` the provider offers its own context recall (adapters/context.py): what it places
    for a memory is that memory's records and never another's. Without it, it offers none."""
    from adapters.context import ContextProvider

    if not provider.capabilities().prime:
        assert not isinstance(provider, ContextProvider)
        return
    assert isinstance(provider, ContextProvider)
    mine = await provider.remember(M1, stamps.record("Kept in memory one."))
    await provider.remember(M2, stamps.record("Kept in memory two."))

    placed = await provider.context_records(M1)

    assert [r.id for r in placed] == [mine.id]
