"""What the PostgreSQL provider promises beyond the shared contract: several instances on one database
write one consistent chain, a score depends on the record alone, and its failures are told apart."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa
from sqlalchemy.ext.asyncio import AsyncEngine, create_async_engine

from adapters.base import Condition, Part, ProviderRejected, ProviderUnavailable, RecallQuery
from adapters.local import LocalProvider
from adapters.postgres import PostgresProvider
from tests._postgres import PG_URL, fresh_schema
from tests.adapters.harnesses import M1, M2, Stamps

pytestmark = pytest.mark.postgres


@asynccontextmanager
async def two_instances() -> AsyncIterator[tuple[PostgresProvider, PostgresProvider]]:
    """Two providers on one schema, each with its own engine (its own pool), as two gateways have."""
    async with fresh_schema("pgrecords") as (_engine, schema):
        a = await PostgresProvider.open(create_async_engine(PG_URL), schema=schema, owns_engine=True)
        b = await PostgresProvider.open(create_async_engine(PG_URL), schema=schema, owns_engine=True)
        try:
            yield a, b
        finally:
            await a.close()
            await b.close()


async def test_one_write_sent_to_two_instances_at_once_is_kept_once(stamps: Stamps) -> None:
    """The same write id through both instances at once, many times over: one record, and every answer
    names it (the check and the insert are one step under the memory's lock)."""
    async with two_instances() as (a, b):
        record = stamps.record("Acme renews in March.", write_id="hwr_once")
        answers = await asyncio.gather(*(p.remember(M1, record) for p in (a, b) * 8))
        assert len({r.id for r in answers}) == 1
        page = await b.list(M1)
        assert [r.id for r in page.items] == [answers[0].id]


async def test_revisions_through_two_instances_at_once_make_one_chain(stamps: Stamps) -> None:
    """Concurrent revisions of one record through both instances each append once: versions 1..n+1, one
    current, each closing the one before."""
    async with two_instances() as (a, b):
        first = await a.remember(M1, stamps.record("v1"))
        revisions = [stamps.revision(content=(Part(type="text", text=f"v{i}"),)) for i in range(2, 12)]
        await asyncio.gather(*((a if i % 2 else b).revise(M1, first.id, r) for i, r in enumerate(revisions)))
        history = await b.history(M1, first.id)
        assert [v.version for v in history] == list(range(1, 12))
        assert [v.status for v in history] == ["superseded"] * 10 + ["active"]
        assert all(v.supersedes == v.version - 1 for v in history[1:])


async def test_replicas_opening_one_empty_schema_at_once_all_start() -> None:
    """Several instances making the schema at the same moment all open and see one table."""
    async with fresh_schema("pgrecords") as (engine, schema):
        engines = [create_async_engine(PG_URL) for _ in range(4)]
        opened = await asyncio.gather(
            *(PostgresProvider.open(e, schema=schema, owns_engine=True) for e in engines), return_exceptions=True
        )
        try:
            assert all(isinstance(p, PostgresProvider) for p in opened), opened
        finally:
            for p in opened:
                if isinstance(p, PostgresProvider):
                    await p.close()
        async with engine.connect() as conn:
            tables = await conn.execute(
                sa.text("SELECT count(*) FROM pg_tables WHERE schemaname = :s AND tablename = 'versions'"),
                {"s": schema},
            )
            assert tables.scalar_one() == 1


async def test_a_score_depends_on_the_memory_s_own_records_only(stamps: Stamps) -> None:
    """Flooding another memory with one of the question's words changes neither the order nor the scores
    of this memory's answer: ts_rank reads one record, no statistics across the table."""
    async with fresh_schema("pgrecords") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            twice = await provider.remember(M1, stamps.record("Alpha launch, then the alpha review."))
            once = await provider.remember(M1, stamps.record("Beta launch."))
            asked = RecallQuery(text=None, query="alpha beta")
            before = await provider.recall([M1], asked)
            for i in range(30):
                await provider.remember(M2, stamps.record(f"alpha number {i}"))
            after = await provider.recall([M1], asked)
            assert [h.record.id for h in before.hits] == [twice.id, once.id]
            assert [(h.record.id, h.score) for h in after.hits] == [(h.record.id, h.score) for h in before.hits]
        finally:
            await provider.close()


async def test_text_postgresql_cannot_hold_is_the_callers_mistake(stamps: Stamps) -> None:
    """A NUL character (which PostgreSQL text cannot hold) in a title, or in a filter's value, is refused
    as the caller's, and nothing is written; it is not the provider failing. In the words asked for it is
    a separator, as on SQLite, so a recall by words answers."""
    async with fresh_schema("pgrecords") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            with pytest.raises(ProviderRejected):
                await provider.remember(M1, stamps.record("fine", title="bad\x00title"))
            with pytest.raises(ProviderRejected):
                await provider.recall([M1], RecallQuery(filters=(Condition("attributes.k", "eq", "bad\x00"),)))
            assert (await provider.recall([M1], RecallQuery(text="bad\x00"))).abstain
            assert (await provider.count([M1]))[M1] == 0
        finally:
            await provider.close()


async def test_a_database_that_cannot_be_reached_is_the_provider_unavailable() -> None:
    """Nothing listening where the url points: opening says the provider is unavailable, in one line."""
    engine = create_async_engine("postgresql+asyncpg://postgres@127.0.0.1:1/test")
    with pytest.raises(ProviderUnavailable, match="records store"):
        await PostgresProvider.open(engine, owns_engine=True)


async def test_the_factory_refuses_a_url_that_is_not_postgresql(tmp_path: Path) -> None:
    """On a gateway whose state is SQLite the url it is handed is SQLite's: refused, naming what it needs."""
    import httpx

    from adapters.postgres import factory

    async with httpx.AsyncClient() as client:
        with pytest.raises(ValueError, match="postgresql"):
            await factory({"url": "sqlite+aiosqlite:///x.sqlite3"}, client=client, data_dir=tmp_path, api_key=None)
        with pytest.raises(ValueError, match="schema"):
            await factory({"url": PG_URL, "schema": 'x"; DROP'}, client=client, data_dir=tmp_path, api_key=None)


async def test_a_write_cancelled_while_it_waits_for_the_memory_leaves_nothing_held(stamps: Stamps) -> None:
    """A write waiting for the memory's lock (another instance is writing there) is cancelled: nothing is
    written, no connection stays checked out, and once the other writer is done the next write in that
    memory goes through (the cancelled wait did not take the lock later and keep it)."""
    name = f"memfed_test_{uuid.uuid4().hex[:8]}"
    async with fresh_schema("pgrecords") as (engine, schema):
        mine = create_async_engine(PG_URL, connect_args={"server_settings": {"application_name": name}})
        provider = await PostgresProvider.open(mine, schema=schema)
        try:
            async with engine.connect() as other:
                await other.execute(sa.text("SELECT pg_advisory_lock(hashtextextended(:k, 0))"),
                                    {"k": f"memfed_records:{schema}:{M1}"})
                waiting = asyncio.create_task(provider.remember(M1, stamps.record("never written")))
                while not await _waiting_for_a_lock(engine, name):
                    await asyncio.sleep(0.01)
                waiting.cancel()
                with pytest.raises(asyncio.CancelledError):
                    await waiting
                await other.execute(sa.text("SELECT pg_advisory_unlock_all()"))
            written = await asyncio.wait_for(provider.remember(M1, stamps.record("written")), timeout=30)
            assert [r.id for r in (await provider.list(M1)).items] == [written.id]
            assert mine.pool.checkedout() == 0  # type: ignore[attr-defined]
        finally:
            await provider.close()
            await mine.dispose()


async def _waiting_for_a_lock(engine: AsyncEngine, application: str) -> bool:
    async with engine.connect() as conn:
        found = await conn.execute(sa.text(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = :a AND wait_event_type = 'Lock'"),
            {"a": application})
        return bool(found.scalar_one())


async def test_the_gateway_s_provider_opens_while_its_database_is_down_and_says_so_on_each_call(
        tmp_path: Path, stamps: Stamps) -> None:  # fmt: skip
    """Opened by the gateway (the factory) with nothing listening: it opens, so the gateway starts; the
    start-up probe and every call are ProviderUnavailable, never a crash or a caller's error."""
    import httpx

    from adapters.postgres import factory

    async with httpx.AsyncClient() as client:
        provider = await factory({"url": "postgresql://postgres@127.0.0.1:1/test"}, client=client,
                                 data_dir=tmp_path, api_key=None)
    try:
        assert isinstance(provider, PostgresProvider)
        with pytest.raises(ProviderUnavailable):
            await provider.probe()
        with pytest.raises(ProviderUnavailable):
            await provider.remember(M1, stamps.record("x"))
        with pytest.raises(ProviderUnavailable):
            await provider.recall([M1], RecallQuery(text="x"))
    finally:
        await provider.close()


FILTERS = [
    Condition("attributes.n", "eq", 3),
    Condition("attributes.n", "ne", 3),
    Condition("attributes.n", "gt", 2),
    Condition("attributes.n", "lte", 2.5),
    Condition("attributes.name", "gt", "M"),
    Condition("attributes.name", "lt", "b"),
    Condition("attributes.name", "in", ["ann", "Zoe", "nobody"]),
    Condition("attributes.n", "eq", None),
    Condition("attributes.flag", "eq", True),
    Condition("type", "in", ["fact"]),
    Condition("time.valid_to", "eq", None),
]


@pytest.mark.parametrize("cond", FILTERS, ids=lambda c: f"{c.field}-{c.op}-{c.value}")
async def test_a_filter_selects_what_it_selects_on_the_sqlite_provider(
        cond: Condition, tmp_path: Path) -> None:  # fmt: skip
    """The same records on both embedded providers, the same filter: the same records match (numbers
    compare with numbers, strings with strings in byte order, a missing or null attribute is null)."""
    values: list[dict[str, object]] = [
        {"n": 3, "name": "ann"}, {"n": 2, "name": "Zoe", "flag": True}, {"n": "3", "name": "bob"},
        {"name": "Mia"}, {"n": None, "flag": False}, {"n": 10, "name": 5},
    ]
    local = await LocalProvider.open(tmp_path / "records.sqlite3")
    try:
        async with fresh_schema("pgrecords") as (engine, schema):
            pg = await PostgresProvider.open(engine, schema=schema)
            try:
                matched = []
                for provider in (local, pg):
                    stamps = Stamps()
                    titles = {}
                    for i, attributes in enumerate(values):
                        made = await provider.remember(M1, stamps.record(
                            f"record {i}", type="fact" if i % 2 else "note", attributes=attributes))
                        titles[made.id] = i
                    found = await provider.recall([M1], RecallQuery(filters=(cond,), limit=50))
                    matched.append(sorted(titles[h.record.id] for h in found.hits))
                assert matched[0], "each filter here selects something"
                assert matched[1] == matched[0]
            finally:
                await pg.close()
    finally:
        await local.close()


@pytest.mark.parametrize("cond", [
    Condition("colour", "eq", "red"),
    Condition("time.created", "eq", "2026-01-01"),
    Condition("attributes.", "eq", 1),
    Condition("attributes.n", "gt", None),
    Condition("attributes.n", "gt", True),
    Condition("attributes.n", "eq", {"a": 1}),
    Condition("attributes.n", "in", "abc"),
    Condition("time.written_at", "gt", "yesterday"),
    Condition("type", "eq", 3),
], ids=lambda c: f"{c.field}-{c.op}-{c.value}")
async def test_a_filter_that_cannot_be_evaluated_is_refused_not_guessed(cond: Condition) -> None:
    """An unknown field, an empty attribute key or a value of the wrong kind is the caller's mistake."""
    async with fresh_schema("pgrecords") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            with pytest.raises(ProviderRejected):
                await provider.recall([M1], RecallQuery(filters=(cond,)))
        finally:
            await provider.close()


async def test_an_attribute_key_with_a_quote_is_a_key_like_any_other(stamps: Stamps) -> None:
    """PostgreSQL names any key, so `attributes.a"b` filters (SQLite's JSON path cannot, and refuses it)."""
    async with fresh_schema("pgrecords") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            quoted = await provider.remember(M1, stamps.record("q", attributes={'a"b': 1}))
            await provider.remember(M1, stamps.record("r", attributes={"ab": 1}))
            found = await provider.recall([M1], RecallQuery(filters=(Condition('attributes.a"b', "eq", 1),)))
            assert [h.record.id for h in found.hits] == [quoted.id]
        finally:
            await provider.close()
