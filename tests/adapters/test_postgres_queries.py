"""Named and free queries on the PostgreSQL provider: the SQLite provider's sealed container, filled from
PostgreSQL with the same rows, holding one memory only."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import timedelta
from pathlib import Path

import pytest

from adapters.base import ProviderRejected, Reference
from adapters.local import LocalProvider
from adapters.postgres import PostgresProvider
from tests._postgres import fresh_schema
from tests.adapters.harnesses import M1, M2, PERSON, Stamps

pytestmark = pytest.mark.postgres

SECRET = "Zebra-7 launch codes"
COLUMNS = "type, title, text, content, attributes, version, written_at, written_by, writer_type, valid_from, valid_to"


@pytest.fixture
async def pg() -> AsyncIterator[PostgresProvider]:
    async with fresh_schema("pgqueries") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            yield provider
        finally:
            await provider.close()


async def fill(provider: LocalProvider | PostgresProvider, stamps: Stamps) -> list[str]:
    """The same records on either provider: M2's secret, and M1's three (one revised, one forgotten, one
    referring to another of M1 and to M2's)."""
    theirs = await provider.remember(M2, stamps.record(SECRET, type="fact"))
    acme = await provider.remember(M1, stamps.record(
        "Acme renews in March.", type="fact", title="Acme renewal", attributes={"account": "acme", "n": 3},
        valid_from=stamps.now + timedelta(days=1)))
    await provider.revise(M1, acme.id, stamps.revision(title="Acme renewal terms"))
    gone = await provider.remember(M1, stamps.record("Dropped note."))
    await provider.forget(M1, gone.id, PERSON, stamps.tick())
    linked = await provider.remember(M1, stamps.record("See the renewal.", references=(
        Reference(memory_id=M1, record_id=acme.id, rel="about"),
        Reference(memory_id=M2, record_id=theirs.id, rel="leak"))))
    return [acme.id, linked.id]


async def test_the_container_rows_are_the_sqlite_provider_s(pg: PostgresProvider, tmp_path: Path) -> None:
    """The same records written to both providers give the same container: every column of every row
    equal, so a statement answers alike on either."""
    local = await LocalProvider.open(tmp_path / "records.sqlite3")
    try:
        await fill(local, Stamps())
        await fill(pg, Stamps())
        statement = f"SELECT {COLUMNS} FROM records ORDER BY written_at"
        on_sqlite = await local.run_free(M1, "sql", statement, {})
        on_pg = await pg.run_free(M1, "sql", statement, {})
        assert on_pg.columns == on_sqlite.columns
        assert on_pg.rows == on_sqlite.rows and len(on_pg.rows) == 2
    finally:
        await local.close()


async def test_only_this_memory_s_current_records_and_own_references_are_there(
        pg: PostgresProvider, stamps: Stamps) -> None:  # fmt: skip
    """Another memory's record, a forgotten record, an old version and a reference into another memory are
    not in the container."""
    acme_id, linked_id = await fill(pg, stamps)
    texts = await pg.run_free(M1, "sql", "SELECT text, version FROM records ORDER BY text", {})
    assert texts.rows == (("Acme renews in March.", 2), ("See the renewal.", 1))
    refs = await pg.run_free(M1, "sql", "SELECT * FROM refs", {})
    assert refs.rows == ((linked_id, acme_id, "about"),)
    secret = await pg.run_free(M1, "sql", "SELECT count(*) FROM records WHERE text LIKE :w", {"w": "%Zebra%"})
    assert secret.rows == ((0,),)


async def test_a_records_shaped_result_answers_the_versions_it_saw(pg: PostgresProvider, stamps: Stamps) -> None:
    """`SELECT * FROM records` answers as records, read back from PostgreSQL at the versions seen."""
    acme_id, _ = await fill(pg, stamps)
    result = await pg.run_named(M1, "sql", "SELECT * FROM records WHERE type = :t", {"t": "fact"})
    assert result.records is not None
    assert [(r.id, r.version, r.title) for r in result.records] == [(acme_id, 2, "Acme renewal terms")]


async def test_a_statement_that_writes_is_refused(pg: PostgresProvider, stamps: Stamps) -> None:
    """A write is refused before anything runs, and the records are unchanged."""
    await fill(pg, stamps)
    with pytest.raises(ProviderRejected):
        await pg.run_free(M1, "sql", "DELETE FROM records", {})
    assert (await pg.count([M1]))[M1] == 2
