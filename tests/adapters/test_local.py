"""What the local provider (SQLite + FTS5) promises beyond the shared contract, and every claim of
its capability document."""

from __future__ import annotations

import asyncio
import sqlite3
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from adapters.base import (
    Capabilities,
    Condition,
    FileRef,
    Follows,
    Part,
    ProviderRejected,
    RecallQuery,
    Record,
    RecordNotFound,
    Reference,
    Unsupported,
    Writer,
)
from adapters.local import CAPABILITIES, LocalProvider
from tests.adapters.harnesses import AGENT, M1, M2, M3, PERSON, Stamps


def store_bytes(directory: Path) -> bytes:
    """Everything SQLite keeps on disk for the store: the file, its write-ahead log, its index."""
    return b"".join(p.read_bytes() for p in sorted(directory.glob("records.sqlite3*")))


def hit_ids(answer: Any) -> list[str]:
    return [hit.record.id for hit in answer.hits]


def file_part(media_type: str, text: str | None = None, name: str = "f.bin") -> Part:
    return Part(
        type="file",
        file=FileRef(id="file_" + "a" * 32, name=name, media_type=media_type, bytes=1234),
        text=text,
        text_source="stated" if text else None,
    )


# --------------------------------------------------------------------------- opening


async def test_open_in_memory_gives_a_private_store(stamps: Stamps) -> None:
    """The path ":memory:" opens a working store, for tests that need no file."""
    provider = await LocalProvider.open(":memory:")
    try:
        written = await provider.remember(M1, stamps.record("Only in memory."))
        assert (await provider.get(M1, written.id)).id == written.id
    finally:
        await provider.close()


async def test_records_survive_closing_and_reopening(tmp_path: Path, stamps: Stamps) -> None:
    """The file is the store: reopening it (schema creation is idempotent) finds what was written."""
    path = tmp_path / "nested" / "dir" / "store.sqlite3"
    first = await LocalProvider.open(path)
    written = await first.remember(M1, stamps.record("Durable."))
    await first.close()

    again = await LocalProvider.open(path)
    try:
        assert await again.get(M1, written.id) == written
    finally:
        await again.close()


async def test_from_config_opens_the_configured_path_or_the_data_dir(tmp_path: Path, stamps: Stamps) -> None:
    """from_config opens options["path"], else data_dir/records.sqlite3; it needs no client or key."""
    async with httpx.AsyncClient() as client:
        configured = await LocalProvider.from_config(
            {"path": str(tmp_path / "chosen.sqlite3")}, client=client, data_dir=tmp_path / "d", api_key=None
        )
        await configured.remember(M1, stamps.record("Here."))
        await configured.close()
        default = await LocalProvider.from_config(
            {}, client=client, data_dir=tmp_path / "d", api_key="unused"
        )
        await default.close()

    assert (tmp_path / "chosen.sqlite3").exists()
    assert (tmp_path / "d" / "records.sqlite3").exists()


# --------------------------------------------------------------------------- records as stated


async def test_record_ids_are_hrec_and_32_hex_and_kept_across_versions(
    local: LocalProvider, stamps: Stamps
) -> None:
    """Ids are "hrec_" + 32 lowercase hex digits; a revision keeps the id."""
    written = await local.remember(M1, stamps.record("Words."))
    revised = await local.revise(M1, written.id, stamps.revision(title="t"))

    prefix, digits = written.id[:5], written.id[5:]
    assert prefix == "hrec_" and len(digits) == 32 and int(digits, 16) >= 0 and digits == digits.lower()
    assert revised.id == written.id


async def test_every_field_round_trips_unchanged(local: LocalProvider, stamps: Stamps) -> None:
    """What remember returns is exactly what get reads: parts with role, text_source, file and the
    extra keys of an x.-part, references with rel, validity, attributes, a provider writer."""
    content = (
        Part(type="text", text="What the customer said.", role="user"),
        file_part("image/png", "A blue circle with a white letter A.", name="logo.png"),
        Part(type="x.acme.chart", extra={"series": [1, 2.5, None], "nested": {"k": "v"}, "text": "not core"}),
        Part(type="text", text="unknown key kept", extra={"x.note": True}),
    )
    writer = Writer(kind="provider", id="local", on_behalf_of="mbr_dana", consolidation_id="hcon_1")
    new = stamps.record(
        content=content,
        type="x.acme.forecast",
        by=writer,
        title="Q4 forecast",
        attributes={"quarter": 4, "tags": ["a", "b"], "ok": True, "none": None},
        references=(Reference(M2, "hrec_" + "b" * 32, "derived_from"), Reference(M1, "hrec_" + "c" * 32)),
        valid_from=datetime(2026, 9, 30, tzinfo=UTC),
        valid_to=datetime(2026, 12, 31, 23, 59, 59, 999999, tzinfo=UTC),
    )

    written = await local.remember(M1, new)
    read = await local.get(M1, written.id)

    assert read == written
    assert read.content == content
    assert read.type == "x.acme.forecast"
    assert read.written_by == writer
    assert read.references == new.references
    assert dict(read.attributes) == {"quarter": 4, "tags": ["a", "b"], "ok": True, "none": None}
    assert (read.time.valid_from, read.time.valid_to) == (new.valid_from, new.valid_to)


async def test_naive_instants_are_taken_as_utc(local: LocalProvider, stamps: Stamps) -> None:
    """A naive written_at is read back as the same wall time in UTC, never shifted by a local zone."""
    new = replace(stamps.record("Naive."), written_at=datetime(2026, 10, 1, 12, 0))
    written = await local.remember(M1, new)
    assert written.time.written_at == datetime(2026, 10, 1, 12, 0, tzinfo=UTC)


async def test_unserialisable_attributes_are_refused(local: LocalProvider, stamps: Stamps) -> None:
    """Attributes that are not JSON are refused as invalid, and nothing is written."""
    with pytest.raises(ProviderRejected):
        await local.remember(M1, stamps.record("x", attributes={"when": object()}))
    assert await local.count([M1]) == {M1: 0}


# --------------------------------------------------------------------------- revise, forget, follows


async def test_a_forgotten_record_can_be_revised_back_to_active(local: LocalProvider, stamps: Stamps) -> None:
    """Revising a forgotten record appends an active version; history keeps the forget in between."""
    written = await local.remember(M1, stamps.record("Once."))
    await local.forget(M1, written.id, PERSON, stamps.tick())

    revived = await local.revise(M1, written.id, stamps.revision(title="Again"))

    assert (revived.version, revived.status, revived.supersedes) == (3, "active", 2)
    assert [r.status for r in await local.history(M1, written.id)] == ["superseded", "forgotten", "active"]
    assert [r.id for r in (await local.list(M1)).items] == [written.id]


async def test_history_keeps_the_references_of_each_version(local: LocalProvider, stamps: Stamps) -> None:
    """history.structure "versions": a revision that changes references leaves the earlier version's
    references as they were, in history and in a read as_of then."""
    before, after = Reference(M1, "hrec_" + "d" * 32, "about"), Reference(M2, "hrec_" + "e" * 32, "about")
    written = await local.remember(M1, stamps.record("About someone.", references=(before,)))
    await local.revise(M1, written.id, stamps.revision(references=(after,)))

    assert [r.references for r in await local.history(M1, written.id)] == [(before,), (after,)]
    assert (await local.get(M1, written.id, as_of=written.time.written_at)).references == (before,)
    assert local.capabilities().history_structure == "versions"


async def test_forget_keeps_the_content_and_records_who_forgot(local: LocalProvider, stamps: Stamps) -> None:
    """The forgotten version repeats the last content, is written by the forgetter at the given time."""
    written = await local.remember(M1, stamps.record("Remember me."))
    at = stamps.tick()

    forgotten = await local.forget(M1, written.id, PERSON, at)

    assert (forgotten.version, forgotten.supersedes, forgotten.written_by) == (2, 1, PERSON)
    assert forgotten.time.written_at == at
    assert forgotten.content == written.content
    assert await local.get(M1, written.id) == forgotten


async def test_forgetting_twice_changes_nothing(local: LocalProvider, stamps: Stamps) -> None:
    """A second forget returns the forgotten version and appends nothing."""
    written = await local.remember(M1, stamps.record("Once."))
    first = await local.forget(M1, written.id, PERSON, stamps.tick())
    second = await local.forget(M1, written.id, AGENT, stamps.tick())
    assert second == first
    assert len(await local.history(M1, written.id)) == 2


async def test_a_record_that_follows_a_source_is_neither_revised_nor_forgotten(
    local: LocalProvider, stamps: Stamps
) -> None:
    """§5.4: revise and forget on a record carrying `follows` raise Unsupported naming the source."""
    source = Follows(kind="document", id="doc_41c0", name="Engineering guide")
    written = await local.remember(M1, stamps.record("Section 3."), follows=source)
    assert (await local.get(M1, written.id)).follows == source

    with pytest.raises(Unsupported, match="follows the document 'Engineering guide'"):
        await local.revise(M1, written.id, stamps.revision(title="Edited here"))
    with pytest.raises(Unsupported, match="follows"):
        await local.forget(M1, written.id, PERSON, stamps.tick())
    assert len(await local.history(M1, written.id)) == 1


async def test_a_clock_stepping_back_does_not_break_the_chain(local: LocalProvider, stamps: Stamps) -> None:
    """A revision stamped before the current version starts when that version started, so as_of
    never sees two current versions or none."""
    written = await local.remember(M1, stamps.record("Now."))
    early = replace(stamps.revision(title="Late"), written_at=written.time.written_at - timedelta(hours=1))

    revised = await local.revise(M1, written.id, early)

    assert revised.time.written_at == written.time.written_at
    assert (await local.get(M1, written.id, as_of=written.time.written_at)).version == 2


async def test_concurrent_revisions_form_one_chain(local: LocalProvider, stamps: Stamps) -> None:
    """Ten revisions at once each append their own version: 2..11, each superseding the one before."""
    written = await local.remember(M1, stamps.record("Start."))
    revisions = [stamps.revision(title=f"r{i}") for i in range(10)]

    await asyncio.gather(*(local.revise(M1, written.id, r) for r in revisions))

    chain = await local.history(M1, written.id)
    assert [r.version for r in chain] == list(range(1, 12))
    assert [r.supersedes for r in chain] == [None, *range(1, 11)]
    assert [r.status for r in chain].count("active") == 1


# --------------------------------------------------------------------------- as_of


async def test_get_as_of_reads_the_version_current_then(local: LocalProvider, stamps: Stamps) -> None:
    """as_of before the record: not found; between versions: v1 as it stood (active, not yet closed);
    after: v2; after a forget: the forgotten version."""
    before = stamps.tick()
    first = await local.remember(M1, stamps.record("March."))
    between = stamps.tick()
    second = await local.revise(M1, first.id, stamps.revision(title="April"))
    after = stamps.tick()
    gone = await local.forget(M1, first.id, PERSON, stamps.tick())

    with pytest.raises(RecordNotFound):
        await local.get(M1, first.id, as_of=before)
    then = await local.get(M1, first.id, as_of=between)
    assert (then.version, then.status, then.time.invalidated_at) == (1, "active", None)
    assert (await local.get(M1, first.id, as_of=second.time.written_at)).version == 2
    assert (await local.get(M1, first.id, as_of=after)).version == 2
    assert (await local.get(M1, first.id, as_of=gone.time.written_at)).status == "forgotten"


async def test_list_as_of_shows_the_memory_as_it_stood(local: LocalProvider, stamps: Stamps) -> None:
    """list(as_of) shows records written by then, with their versions of then, forgotten ones only
    once forgotten."""
    a = await local.remember(M1, stamps.record("A."))
    b = await local.remember(M1, stamps.record("B."))
    instant = stamps.tick()
    await local.remember(M1, stamps.record("C, later."))
    await local.revise(M1, a.id, stamps.revision(title="A revised later"))
    await local.forget(M1, b.id, PERSON, stamps.tick())

    page = await local.list(M1, as_of=instant)

    assert [(r.id, r.version, r.status) for r in page.items] == [(b.id, 1, "active"), (a.id, 1, "active")]


async def test_recall_as_of_finds_the_words_of_then(local: LocalProvider, stamps: Stamps) -> None:
    """recall(as_of) searches the versions current at that instant: old words match, new ones not."""
    written = await local.remember(M1, stamps.record("The meeting is on Monday."))
    instant = stamps.tick()
    await local.revise(
        M1, written.id, stamps.revision(content=(Part(type="text", text="The meeting is on Friday."),))
    )

    assert hit_ids(await local.recall([M1], RecallQuery(text="monday", as_of=instant))) == [written.id]
    assert hit_ids(await local.recall([M1], RecallQuery(text="friday", as_of=instant))) == []
    assert hit_ids(await local.recall([M1], RecallQuery(text="friday"))) == [written.id]
    assert hit_ids(await local.recall([M1], RecallQuery(text="monday"))) == []


# --------------------------------------------------------------------------- list


async def test_list_cursor_is_stable_under_inserts(local: LocalProvider, stamps: Stamps) -> None:
    """Records written between two pages neither repeat nor push out a record of the next page."""
    written = [await local.remember(M1, stamps.record(f"n{i}")) for i in range(4)]
    first = await local.list(M1, limit=2)
    await local.remember(M1, stamps.record("written while paging"))
    second = await local.list(M1, limit=2, cursor=first.next)

    seen = [r.id for r in first.items + second.items]
    assert seen == [r.id for r in reversed(written)]
    assert second.next is None


async def test_list_with_equal_times_pages_by_id(local: LocalProvider, stamps: Stamps) -> None:
    """Records written at the same instant are ordered by id, and the cursor splits them cleanly."""
    same = stamps.tick()
    written = [await local.remember(M1, replace(stamps.record(f"s{i}"), written_at=same)) for i in range(5)]
    seen, cursor = [], None
    while True:
        page = await local.list(M1, limit=2, cursor=cursor)
        seen += [r.id for r in page.items]
        if (cursor := page.next) is None:
            break
    assert seen == sorted((r.id for r in written), reverse=True)


@pytest.mark.parametrize("cursor", ["", "not base64 at all!", "WzFd", "eyJhIjoxfQ"])
async def test_a_cursor_not_ours_is_refused(local: LocalProvider, cursor: str) -> None:
    """A cursor that this provider did not hand out is refused as invalid, not misread."""
    with pytest.raises(ProviderRejected):
        await local.list(M1, cursor=cursor)


# --------------------------------------------------------------------------- full-text safety

HOSTILE = [
    '"', '""', "'", "(", ")", "()", "(acme", 'acme")', "NEAR", "NEAR(acme renew)", "acme NEAR/2 renew",
    "*", "acme*", "-acme", "acme - renew", "AND", "OR", "NOT", "acme OR", "NOT acme", "title:acme",
    "body : acme", "{title body}: acme", "^acme", "acme + renew", ":", "\\", "%", "_", "\x00", "acme\x00",
    "Ünïcödé", "東京", "🙂", "\u2019", "\u200b", " ", "", "a" * 5000,
]  # fmt: skip


@pytest.mark.parametrize("words", HOSTILE)
async def test_user_words_cannot_inject_fts_syntax(local: LocalProvider, stamps: Stamps, words: str) -> None:
    """Whatever a caller types as text or query reaches FTS5 as quoted words: no sqlite error, and a
    record is matched only by the words it contains."""
    planted = await local.remember(M1, stamps.record("Acme renews in March.", title="Acme renewal"))

    for query in (RecallQuery(text=words), RecallQuery(query=words), RecallQuery(text=words, query=words)):
        if not query.signals():
            continue
        answer = await local.recall([M1], query)
        assert set(hit_ids(answer)) <= {planted.id}


async def test_fts_operators_in_user_words_are_plain_words(local: LocalProvider, stamps: Stamps) -> None:
    """NEAR is a word, "-" is not negation, "*" is not a prefix, parentheses and quotes are ignored."""
    depot = await local.remember(M1, stamps.record("The depot near the harbour."))
    await local.remember(M1, stamps.record("Acme renews in March."))

    assert hit_ids(await local.recall([M1], RecallQuery(text="NEAR"))) == [depot.id]
    assert hit_ids(await local.recall([M1], RecallQuery(text="harbour -depot"))) == [depot.id]
    assert hit_ids(await local.recall([M1], RecallQuery(text='("harbour")'))) == [depot.id]
    assert hit_ids(await local.recall([M1], RecallQuery(text="harb*"))) == []


async def test_unicode_words_are_found_without_case_or_accents(local: LocalProvider, stamps: Stamps) -> None:
    """Accented, upper-case and CJK words match as a reader expects."""
    cafe = await local.remember(M1, stamps.record("Café au lait à Zürich."))
    tokyo = await local.remember(M1, stamps.record("会議 東京"))

    assert hit_ids(await local.recall([M1], RecallQuery(text="cafe zurich"))) == [cafe.id]
    assert hit_ids(await local.recall([M1], RecallQuery(text="CAFÉ"))) == [cafe.id]
    assert hit_ids(await local.recall([M1], RecallQuery(text="東京"))) == [tokyo.id]


# --------------------------------------------------------------------------- recall


async def test_text_recall_finds_the_words_a_file_part_carries(local: LocalProvider, stamps: Stamps) -> None:
    """§4.3: the text standing for a file is what recall by words finds."""
    logo = await local.remember(
        M1, stamps.record(content=(file_part("image/png", "A blue circle with a white letter A."),))
    )
    await local.remember(M1, stamps.record("A red square."))

    assert hit_ids(await local.recall([M1], RecallQuery(text="circle"))) == [logo.id]
    assert hit_ids(await local.recall([M1], RecallQuery(query="Which logo has a circle?"))) == [logo.id]


async def test_title_words_are_found(local: LocalProvider, stamps: Stamps) -> None:
    """A search matches the title with the content (§4), so a title-only record is found."""
    entity = await local.remember(M1, stamps.record(type="entity", title="Quillon Freight"))
    assert hit_ids(await local.recall([M1], RecallQuery(text="quillon"))) == [entity.id]


async def test_text_needs_every_word_and_query_any(local: LocalProvider, stamps: Stamps) -> None:
    """text matches records holding all its words; query (emulated) ranks those holding any, the
    ones holding more first."""
    both = await local.remember(M1, stamps.record("Acme renewal discount."))
    one = await local.remember(M1, stamps.record("Acme picnic."))

    assert hit_ids(await local.recall([M1], RecallQuery(text="acme discount"))) == [both.id]
    assert hit_ids(await local.recall([M1], RecallQuery(query="acme discount"))) == [both.id, one.id]


async def test_query_is_emulated_by_words_not_meaning(local: LocalProvider, stamps: Stamps) -> None:
    """query shares words, not meaning: a synonym finds nothing and the provider abstains, which is
    why the capability document lists query under emulated."""
    await local.remember(M1, stamps.record("The automobile is parked outside."))

    answer = await local.recall([M1], RecallQuery(query="Where is the car?"))

    assert answer.hits == () and answer.abstain
    assert "query" in CAPABILITIES.emulated_signals
    assert local.capabilities().document("local")["recall"]["emulated"] == ["query"]


async def test_several_signals_are_fused_and_why_names_each(local: LocalProvider, stamps: Stamps) -> None:
    """Given text and filters, a record matching both ranks above records matching one, and each
    hit's why lists exactly the signals that found it."""
    both = await local.remember(M1, stamps.record("Acme renewal.", attributes={"account": "acme"}))
    words_only = await local.remember(M1, stamps.record("Globex renewal.", attributes={"account": "globex"}))
    field_only = await local.remember(M1, stamps.record("Acme picnic.", attributes={"account": "acme"}))

    answer = await local.recall(
        [M1], RecallQuery(text="renewal", filters=(Condition("attributes.account", "eq", "acme"),))
    )

    why = {hit.record.id: hit.why for hit in answer.hits}
    assert answer.hits[0].record.id == both.id
    assert why == {both.id: ("text", "filters"), words_only.id: ("text",), field_only.id: ("filters",)}
    assert answer.hits[0].score > answer.hits[1].score


async def test_a_filter_only_recall_returns_newest_first(local: LocalProvider, stamps: Stamps) -> None:
    """With filters alone there is no relevance to rank by: matches come newest first, up to limit."""
    written = [await local.remember(M1, stamps.record(f"n{i}", attributes={"k": 1})) for i in range(4)]
    answer = await local.recall([M1], RecallQuery(filters=(Condition("attributes.k", "eq", 1),), limit=3))
    assert hit_ids(answer) == [r.id for r in reversed(written)][:3]


async def test_recall_include_all_adds_forgotten_records(local: LocalProvider, stamps: Stamps) -> None:
    """Recall leaves forgotten records out unless include="all" asks for them."""
    gone = await local.remember(M1, stamps.record("Forgotten harbour."))
    await local.forget(M1, gone.id, PERSON, stamps.tick())

    assert hit_ids(await local.recall([M1], RecallQuery(text="harbour"))) == []
    answer = await local.recall([M1], RecallQuery(text="harbour", include="all"))
    assert [(h.record.id, h.record.status) for h in answer.hits] == [(gone.id, "forgotten")]


async def test_recall_limit_is_honoured(local: LocalProvider, stamps: Stamps) -> None:
    """No more hits than `limit`."""
    for i in range(6):
        await local.remember(M1, stamps.record(f"harbour {i}"))
    assert len((await local.recall([M1], RecallQuery(text="harbour", limit=4))).hits) == 4


@pytest.mark.parametrize(
    ("query", "abstain"),
    [
        (RecallQuery(text="harbour"), False),
        (RecallQuery(text="volcano"), True),
        (RecallQuery(query="Where is the harbour?"), False),
        (RecallQuery(query="Where is the volcano?"), True),
        (RecallQuery(query="What is it?"), True),  # only stopwords: nothing to match
        (RecallQuery(text="()"), True),  # no word at all
        (RecallQuery(filters=(Condition("type", "eq", "note"),)), False),
        (RecallQuery(filters=(Condition("type", "eq", "procedure"),)), False),
        (RecallQuery(text="volcano", filters=(Condition("type", "eq", "note"),)), True),
    ],
)
async def test_abstain_when_words_were_asked_and_none_matched(
    local: LocalProvider, stamps: Stamps, query: RecallQuery, abstain: bool
) -> None:
    """abstain is true exactly when query or text was asked and no record matched it, even if a
    filter matched; filters alone never abstain."""
    await local.remember(M1, stamps.record("The depot near the harbour."))
    assert local.capabilities().abstain is True
    assert (await local.recall([M1], query)).abstain is abstain


async def test_an_undeclared_signal_is_left_out_and_reported(tmp_path: Path, stamps: Stamps) -> None:
    """The general rule, on a provider declaring no text: text is not used and degraded says so."""

    class WithoutText(LocalProvider):
        def capabilities(self) -> Capabilities:
            return replace(CAPABILITIES, signals=("query", "filters"), emulated_signals=("query",))

    provider = await WithoutText.open(tmp_path / "records.sqlite3")
    try:
        acme = await provider.remember(M1, stamps.record("Acme.", attributes={"account": "acme"}))
        await provider.remember(M1, stamps.record("Harbour.", attributes={"account": "globex"}))
        answer = await provider.recall(
            [M1], RecallQuery(text="harbour", filters=(Condition("attributes.account", "eq", "acme"),))
        )
    finally:
        await provider.close()

    assert answer.degraded == ("text:not_supported",)
    assert [(h.record.id, h.why) for h in answer.hits] == [(acme.id, ("filters",))]


async def test_a_recall_without_any_signal_is_refused(local: LocalProvider) -> None:
    """A RecallQuery with no query, text or filters is invalid."""
    with pytest.raises(ProviderRejected):
        await local.recall([M1], RecallQuery(types=("note",)))


async def test_recall_over_no_memories_finds_nothing(local: LocalProvider, stamps: Stamps) -> None:
    """Asked about no memory, the provider searches none."""
    await local.remember(M1, stamps.record("Harbour."))
    assert (await local.recall([], RecallQuery(text="harbour"))).hits == ()


# --------------------------------------------------------------------------- filters

# Five records: A n=1 tier gold, B n=5 tier silver, C n=10 tier gold, D no attributes, E n="5".
ATTRIBUTES: dict[str, dict[str, Any]] = {
    "A": {"n": 1, "tier": "gold"},
    "B": {"n": 5, "tier": "silver"},
    "C": {"n": 10, "tier": "gold"},
    "D": {},
    "E": {"n": "5"},
}
TYPES = {"A": "fact", "B": "note", "C": "note", "D": "procedure", "E": "fact"}
VALID_FROM = {"A": datetime(2026, 1, 1, tzinfo=UTC), "B": datetime(2026, 6, 1, tzinfo=UTC), "C": None,
              "D": None, "E": datetime(2026, 12, 1, tzinfo=UTC)}  # fmt: skip


@pytest.mark.parametrize(
    ("field", "op", "value", "expected"),
    [
        ("attributes.n", "eq", 5, "B"),
        ("attributes.n", "eq", "5", "E"),
        ("attributes.n", "ne", 5, "ACDE"),
        ("attributes.n", "gt", 1, "BC"),
        ("attributes.n", "gte", 5, "BC"),
        ("attributes.n", "lt", 5, "A"),
        ("attributes.n", "lte", 5, "AB"),
        ("attributes.n", "in", [1, 10], "AC"),
        ("attributes.n", "eq", None, "D"),
        ("attributes.n", "ne", None, "ABCE"),
        ("attributes.tier", "eq", "gold", "AC"),
        ("attributes.tier", "ne", "gold", "BDE"),
        ("attributes.tier", "gt", "h", "B"),
        ("attributes.tier", "gte", "silver", "B"),
        ("attributes.tier", "lt", "h", "AC"),
        ("attributes.tier", "lte", "gold", "AC"),
        ("attributes.tier", "in", ["silver", "bronze"], "B"),
        ("type", "eq", "fact", "AE"),
        ("type", "ne", "fact", "BCD"),
        ("type", "in", ["note", "procedure"], "BCD"),
        ("type", "gt", "note", "D"),
        ("type", "gte", "note", "BCD"),
        ("type", "lt", "note", "AE"),
        ("type", "lte", "fact", "AE"),
        ("time.written_at", "gt", "@C", "DE"),
        ("time.written_at", "gte", "@C", "CDE"),
        ("time.written_at", "lt", "@B", "A"),
        ("time.written_at", "lte", "@B", "AB"),
        ("time.written_at", "eq", "@D", "D"),
        ("time.written_at", "ne", "@D", "ABCE"),
        ("time.written_at", "in", ["@A", "@E"], "AE"),
        ("time.valid_from", "gte", datetime(2026, 6, 1, tzinfo=UTC), "BE"),
        ("time.valid_from", "lt", "2026-06-01T00:00:00Z", "A"),
        ("time.valid_from", "eq", None, "CD"),
        ("time.valid_to", "eq", None, "ABCDE"),
        ("time.invalidated_at", "eq", None, "ABCDE"),
    ],
)
async def test_each_filter_op_on_each_field_kind(
    local: LocalProvider, stamps: Stamps, field: str, op: Any, value: Any, expected: str
) -> None:
    """Filters on attributes (numbers and strings kept apart), type and time, with every op; "@X"
    stands for record X's written_at."""
    written: dict[str, Record] = {}
    for name in "ABCDE":
        new = stamps.record(f"record {name}", type=TYPES[name], attributes=ATTRIBUTES[name],
                            valid_from=VALID_FROM[name])  # fmt: skip
        written[name] = await local.remember(M1, new)

    def resolve(v: Any) -> Any:
        if isinstance(v, list):
            return [resolve(x) for x in v]
        if isinstance(v, str) and v.startswith("@"):
            return written[v[1:]].time.written_at
        return v

    answer = await local.recall([M1], RecallQuery(filters=(Condition(field, op, resolve(value)),)))

    by_id = {r.id: name for name, r in written.items()}
    assert sorted(by_id[h.record.id] for h in answer.hits) == list(expected)


async def test_filters_are_anded(local: LocalProvider, stamps: Stamps) -> None:
    """Several conditions must all hold."""
    gold_fact = await local.remember(M1, stamps.record("x", type="fact", attributes={"tier": "gold"}))
    await local.remember(M1, stamps.record("y", type="note", attributes={"tier": "gold"}))
    await local.remember(M1, stamps.record("z", type="fact", attributes={"tier": "silver"}))

    answer = await local.recall(
        [M1],
        RecallQuery(filters=(Condition("type", "eq", "fact"), Condition("attributes.tier", "eq", "gold"))),
    )
    assert hit_ids(answer) == [gold_fact.id]


async def test_invalidated_at_filter_reads_versions_as_they_stood(
    local: LocalProvider, stamps: Stamps
) -> None:
    """Under as_of, a version closed later shows no invalidated_at, and a filter sees the same."""
    written = await local.remember(M1, stamps.record("v1"))
    instant = stamps.tick()
    await local.revise(M1, written.id, stamps.revision(title="v2"))
    answer = await local.recall(
        [M1], RecallQuery(filters=(Condition("time.invalidated_at", "eq", None),), as_of=instant)
    )
    assert [(h.record.version, h.record.time.invalidated_at) for h in answer.hits] == [(1, None)]


@pytest.mark.parametrize(
    "cond",
    [
        Condition("colour", "eq", "red"),
        Condition("time.created", "eq", "2026-01-01"),
        Condition("attributes.", "eq", 1),
        Condition('attributes.a"b', "eq", 1),
        Condition("attributes.n", "gt", None),
        Condition("attributes.n", "gt", True),
        Condition("attributes.n", "eq", {"a": 1}),
        Condition("attributes.n", "in", "abc"),
        Condition("attributes.n", "in", 5),
        Condition("time.written_at", "gt", "yesterday"),
        Condition("time.written_at", "gt", 5),
        Condition("type", "eq", 3),
        Condition("type", "like", "n%"),  # type: ignore[arg-type]
    ],
)
async def test_a_filter_that_cannot_be_evaluated_is_refused(local: LocalProvider, cond: Condition) -> None:
    """An unknown field, an unknown op or a value of the wrong kind is refused, never guessed."""
    with pytest.raises(ProviderRejected):
        await local.recall([M1], RecallQuery(filters=(cond,)))


# --------------------------------------------------------------------------- erase, drop, count


async def test_erase_leaves_no_byte_of_the_content_in_the_file(local: LocalProvider, stamps: Stamps,
                                                              tmp_path: Path) -> None:  # fmt: skip
    """After erase, the marker written in a title, text, attributes, an x.-part and a revision is in
    neither the database file nor its log; before erase it was (so the search can see it)."""
    marker = "qzxvwmarker"
    keep = [await local.remember(M1, stamps.record(f"ordinary words {i}")) for i in range(20)]
    doomed = await local.remember(
        M1,
        stamps.record(
            content=(
                Part(type="text", text=f"the {marker}text"),
                Part(type="x.k", extra={"v": f"{marker}x"}),
            ),
            title=f"{marker}title",
            attributes={"secret": f"{marker}attr"},
        ),
    )
    await local.revise(M1, doomed.id, stamps.revision(content=(Part(type="text", text=f"{marker}rev"),)))
    assert marker.encode() in store_bytes(tmp_path)

    erasure = await local.erase(M1, [doomed.id])

    assert erasure.erased == (doomed.id,) and erasure.unreachable == ()
    assert marker.encode() not in store_bytes(tmp_path)
    assert len((await local.list(M1)).items) == len(keep)
    assert hit_ids(await local.recall([M1], RecallQuery(text=marker + "text", include="all"))) == []


async def test_erase_reports_unreachable_while_another_reader_holds_the_old_pages(
    tmp_path: Path, stamps: Stamps
) -> None:
    """When another connection keeps a read open on the file, the old pages survive in the log and
    in that reader's view: erase then lists the ids as unreachable rather than promising."""
    provider = await LocalProvider.open(tmp_path / "records.sqlite3", busy_timeout=0.05)
    reader = sqlite3.connect(tmp_path / "records.sqlite3")
    try:
        doomed = await provider.remember(M1, stamps.record("held open"))
        reader.execute("BEGIN")
        assert reader.execute("SELECT count(*) FROM versions").fetchone() == (1,)

        erasure = await provider.erase(M1, [doomed.id])

        assert erasure.erased == (doomed.id,)
        assert erasure.unreachable == (doomed.id,)
    finally:
        reader.close()
        await provider.close()


async def test_drop_memory_removes_every_record_of_that_memory_only(
    local: LocalProvider, stamps: Stamps, tmp_path: Path
) -> None:
    """drop_memory deletes all versions of one memory, bytes included; other memories stay."""
    dropped = await local.remember(M1, stamps.record("dropmarkerzq"))
    await local.revise(M1, dropped.id, stamps.revision(title="second"))
    kept = await local.remember(M2, stamps.record("Stays."))

    await local.drop_memory(M1)

    with pytest.raises(RecordNotFound):
        await local.history(M1, dropped.id)
    assert await local.count([M1, M2]) == {M1: 0, M2: 1}
    assert (await local.get(M2, kept.id)).id == kept.id
    assert b"dropmarkerzq" not in store_bytes(tmp_path)


async def test_count_is_active_records_per_memory(local: LocalProvider, stamps: Stamps) -> None:
    """count counts each record once (not its versions), leaves forgotten ones out, and answers 0
    for a memory with nothing in it."""
    revised = await local.remember(M1, stamps.record("a"))
    await local.revise(M1, revised.id, stamps.revision(title="again"))
    forgotten = await local.remember(M1, stamps.record("b"))
    await local.forget(M1, forgotten.id, PERSON, stamps.tick())
    await local.remember(M2, stamps.record("c"))
    await local.remember(M2, stamps.record("d"))

    assert await local.count([M1, M2, M3]) == {M1: 1, M2: 2, M3: 0}


# --------------------------------------------------------------------------- the capability document


async def test_isolation_is_a_filter_every_operation_applies(local: LocalProvider, stamps: Stamps) -> None:
    """isolation "enforced_filter": one table for all memories, and every operation through another
    memory behaves as if the record did not exist there; the record itself is left untouched."""
    assert local.capabilities().isolation == "enforced_filter"
    mine = await local.remember(M1, stamps.record("Harbour secret.", attributes={"k": 1}))

    for attempt in (
        local.get(M2, mine.id),
        local.history(M2, mine.id),
        local.revise(M2, mine.id, stamps.revision(title="hijack")),
        local.forget(M2, mine.id, PERSON, stamps.tick()),
    ):
        with pytest.raises(RecordNotFound):
            await attempt
    assert (await local.erase(M2, [mine.id])).erased == ()
    assert (await local.list(M2)).items == ()
    assert (
        await local.recall([M2], RecallQuery(text="harbour", filters=(Condition("attributes.k", "eq", 1),)))
    ).hits == ()
    assert await local.count([M2]) == {M2: 0}
    assert await local.get(M1, mine.id) == mine


async def test_derivation_none_writes_exactly_what_was_stated(local: LocalProvider, stamps: Stamps) -> None:
    """derivation "none", graph.entities "stated": a fact about an entity yields those two records,
    references as written, and nothing the provider found on its own."""
    caps = local.capabilities()
    assert (caps.derivation, caps.graph_entities, caps.describes) == ("none", "stated", ())
    dana = await local.remember(M1, stamps.record("Head of procurement.", type="entity", title="Dana"))
    fact = await local.remember(
        M1,
        stamps.record(
            "Dana leads procurement at Quillon Freight.",
            type="fact",
            references=(Reference(M1, dana.id, "subject"),),
        ),
    )

    assert {r.id for r in (await local.list(M1, include="all")).items} == {dana.id, fact.id}
    assert (await local.get(M1, fact.id)).references == (Reference(M1, dana.id, "subject"),)


async def test_episodes_are_kept_and_answered_as_records(local: LocalProvider, stamps: Stamps) -> None:
    """observe.keeps_episodes and answers "records": an episode is kept as a record, returned at once."""
    caps = local.capabilities()
    assert (caps.keeps_episodes, caps.observe_answers) == (True, "records")
    turn = stamps.record(content=(Part(type="text", text="Can you renew us?", role="user"),), type="episode")

    written = await local.remember(M1, turn)

    assert written.type == "episode"
    assert await local.get(M1, written.id) == written


@pytest.mark.parametrize(
    "media_type", ["text/plain", "text/markdown; charset=utf-8", "image/png", "application/pdf",
                   "audio/mpeg", "video/mp4", "IMAGE/JPEG"],
)  # fmt: skip
async def test_declared_media_are_kept_by_reference(
    local: LocalProvider, stamps: Stamps, media_type: str
) -> None:
    """content.media lists what is kept; bytes "referenced": the part keeps the file's id, name, type
    and size, never bytes, and no words are made up for it (describes is empty)."""
    caps = local.capabilities()
    assert caps.bytes == "referenced"
    part = file_part(media_type)

    written = await local.remember(M1, stamps.record(content=(part,)))

    assert written.content == (part,)
    assert written.content[0].text is None and written.content[0].text_source is None


@pytest.mark.parametrize(
    "media_type", ["application/zip", "model/gltf+json", "font/woff2", "application/pdfx"]
)
async def test_undeclared_media_are_refused_not_stored_without_the_file(
    local: LocalProvider, stamps: Stamps, media_type: str
) -> None:
    """§4.3: a file of a media type not in content.media is refused (memory_unsupported) and nothing
    is written; a revision carrying one is refused the same way."""
    with pytest.raises(Unsupported):
        await local.remember(M1, stamps.record(content=(file_part(media_type),)))
    assert await local.count([M1]) == {M1: 0}

    written = await local.remember(M1, stamps.record("plain"))
    with pytest.raises(Unsupported):
        await local.revise(M1, written.id, stamps.revision(content=(file_part(media_type),)))
    assert len(await local.history(M1, written.id)) == 1


async def test_a_file_part_without_its_file_is_refused(local: LocalProvider, stamps: Stamps) -> None:
    """A file part must name the file it refers to."""
    with pytest.raises(ProviderRejected):
        await local.remember(M1, stamps.record(content=(Part(type="file", text="no file"),)))


async def test_claims_of_what_local_does_not_do(local: LocalProvider) -> None:
    """Local declares no prime and offers no operation for it; it declares as_of, versions kept for
    content and structure, and searching many memories at once (each exercised by the tests above and
    the contract suite)."""
    caps = local.capabilities()
    assert caps.prime is False
    assert not hasattr(local, "prime")
    assert (caps.as_of, caps.history_content, caps.history_structure) == (True, "versions", "versions")
    assert (caps.revise, caps.forget, caps.erase_unreachable) == ("native", "native", "reported")
    assert caps.searches_many_memories is True
    assert caps.signals == ("query", "text", "filters")


async def test_claims_of_named_and_free_queries(local: LocalProvider, stamps: Stamps) -> None:
    """queries.named true and queries.free {languages ["sql"], write false}: local is a
    QueryingProvider whose statements read one memory in a container (every escape is pinned in
    test_local_queries.py); a statement that writes is refused."""
    from adapters.queries import QueryingProvider

    caps = local.capabilities()
    assert (caps.named_queries, caps.free_query_languages, caps.free_query_write) == (True, ("sql",), False)
    assert local.capabilities().document("local")["queries"] == {
        "named": True, "free": {"languages": ["sql"], "write": False},
    }  # fmt: skip
    assert isinstance(local, QueryingProvider) and local.query_languages() == ("sql",)
    mine = await local.remember(M1, stamps.record("Kept in M1."))
    await local.remember(M2, stamps.record("Kept in M2."))
    answer = await local.run_free(M1, "sql", "SELECT id FROM records", {})
    assert answer.rows == ((mine.id,),)
    with pytest.raises(ProviderRejected):
        await local.run_free(M1, "sql", "DELETE FROM records", {})
    assert await local.count([M1, M2]) == {M1: 1, M2: 1}


async def test_claims_of_types_and_consolidation_runs(local: LocalProvider) -> None:
    """types true and consolidate "runs": local is a TypedProvider (x.task and its operations, pinned in
    test_local_types.py) and a ConsolidatingProvider (runs, pinned in test_local_consolidation.py)."""
    from adapters.consolidation import ConsolidatingProvider
    from adapters.operations import TypedProvider

    caps = local.capabilities()
    assert (caps.types, caps.consolidate) == (True, "runs")
    assert local.capabilities().document("local")["consolidate"] == "runs"
    assert isinstance(local, TypedProvider) and isinstance(local, ConsolidatingProvider)
    assert [info.type for info in local.types()] == ["x.task"]
    assert local.consolidation_unit() == "records"
