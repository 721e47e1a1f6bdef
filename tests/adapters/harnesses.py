"""How the shared contract suite opens each adapter, and the values it writes.

`HARNESSES` maps an adapter's name to a function that takes a scratch directory and gives an async
context manager yielding a `Provider` ready for testing. A vendor's harness wires its fake vendor in
through the `httpx.AsyncClient` transport it hands the adapter. Adding an adapter is one function
and one entry below. Each harness imports its adapter inside the function, so one adapter that
fails to import fails only its own tests.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from adapters.base import NewRecord, Part, Provider, Revision, Writer

Harness = Callable[[Path], AbstractAsyncContextManager[Provider]]


@asynccontextmanager
async def local(scratch: Path) -> AsyncIterator[Provider]:
    from adapters.local import LocalProvider

    provider = await LocalProvider.open(scratch / "records.sqlite3")
    try:
        yield provider
    finally:
        await provider.close()


@asynccontextmanager
async def postgres(scratch: Path) -> AsyncIterator[Provider]:
    """The embedded provider on PostgreSQL, in a schema of its own dropped after; skipped when the
    server cannot be reached (tests/_postgres.py)."""
    from adapters.postgres import PostgresProvider
    from tests._postgres import fresh_schema

    async with fresh_schema("pgrecords") as (engine, schema):
        provider = await PostgresProvider.open(engine, schema=schema)
        try:
            yield provider
        finally:
            await provider.close()


@asynccontextmanager
async def mem0_platform(scratch: Path) -> AsyncIterator[Provider]:
    from tests.adapters.fake_mem0 import mem0_provider

    async with mem0_provider("platform") as provider:
        yield provider


@asynccontextmanager
async def mem0_oss(scratch: Path) -> AsyncIterator[Provider]:
    from tests.adapters.fake_mem0 import mem0_provider

    async with mem0_provider("oss") as provider:
        yield provider


@asynccontextmanager
async def saas(scratch: Path) -> AsyncIterator[Provider]:
    from tests.adapters.fake_saas import saas_provider

    async with saas_provider() as provider:
        yield provider


@asynccontextmanager
async def saas_no_vectors(scratch: Path) -> AsyncIterator[Provider]:
    """The SaaS memory with embedding off at the operator: meaning answered by words, and declared so."""
    from tests.adapters.fake_saas import FakeSaas, saas_provider

    async with saas_provider(FakeSaas(embedding=False), vector_search=False) as provider:
        yield provider


@asynccontextmanager
async def saas_deriving(scratch: Path) -> AsyncIterator[Provider]:
    """The SaaS memory configured to derive (`derivation = "agent"`): episodes also go to smart ingest."""
    from tests.adapters.fake_saas import saas_provider

    async with saas_provider(derivation="agent") as provider:
        yield provider


@asynccontextmanager
async def zep_v4(scratch: Path) -> AsyncIterator[Provider]:
    # The fake derives only when a test calls `process()`, so what the suite counts is what it stated;
    # derivation, with derived records beside stated ones, is pinned in tests/adapters/test_zep.py.
    from tests.adapters.fake_zep import zep_provider

    async with zep_provider("v4", data_dir=scratch) as provider:
        yield provider


@asynccontextmanager
async def zep_v3(scratch: Path) -> AsyncIterator[Provider]:
    from tests.adapters.fake_zep import zep_provider

    async with zep_provider("v3", data_dir=scratch) as provider:
        yield provider


@asynccontextmanager
async def plugin(scratch: Path) -> AsyncIterator[Provider]:
    from tests.adapters.fake_plugin import plugin_provider

    async with plugin_provider(scratch) as provider:
        yield provider


@asynccontextmanager
async def plugin_old_package(scratch: Path) -> AsyncIterator[Provider]:
    from tests.adapters.fake_plugin import plugin_provider

    async with plugin_provider(scratch, "--package", "old", "--errors", "memoryerror") as provider:
        yield provider


HARNESSES: dict[str, Harness] = {
    "local": local,
    "postgres": postgres,
    "mem0-platform": mem0_platform,
    "mem0-oss": mem0_oss,
    "saas": saas,
    "saas-no-vectors": saas_no_vectors,
    "saas-deriving": saas_deriving,
    "zep-v4": zep_v4,
    "zep-v3": zep_v3,
    "plugin": plugin,
    "plugin-agent-package": plugin_old_package,
}

# Harnesses that need the PostgreSQL server: marked `postgres`, like the other tests that do.
ON_POSTGRES = frozenset({"postgres"})


# --------------------------------------------------------------------------- values the suites write

M1 = "hmem_" + "1" * 32
M2 = "hmem_" + "2" * 32
M3 = "hmem_" + "3" * 32
T0 = datetime(2026, 10, 1, 9, 0, tzinfo=UTC)
AGENT = Writer(kind="member", id="mbr_agent", type="agent")
PERSON = Writer(kind="member", id="mbr_person", type="human")


class Stamps:
    """Builds records and revisions whose `written_at` strictly increases, one second per call, so
    that "newest first" and `as_of` have one right answer without reading a clock."""

    def __init__(self, start: datetime = T0) -> None:
        self.now = start

    def tick(self) -> datetime:
        self.now += timedelta(seconds=1)
        return self.now

    def record(
        self,
        text: str | None = None,
        *,
        type: str = "note",
        content: tuple[Part, ...] | None = None,
        by: Writer = AGENT,
        **fields: Any,
    ) -> NewRecord:
        """A record saying `text` (one text part), or carrying `content` as given."""
        if content is None:
            content = (Part(type="text", text=text),) if text is not None else ()
        return NewRecord(type=type, content=content, written_by=by, written_at=self.tick(), **fields)

    def revision(self, *, by: Writer = PERSON, **fields: Any) -> Revision:
        return Revision(written_by=by, written_at=self.tick(), **fields)
