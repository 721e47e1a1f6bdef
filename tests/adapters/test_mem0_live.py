"""The mem0 adapter against a real mem0 OSS REST server, when one is named in the environment.

MEM0_OSS_URL (e.g. http://localhost:8888) and MEM0_OSS_KEY (an X-API-Key; empty for a server run with
AUTH_DISABLED). The server must have an embedder configured: `infer: false` skips the LLM, not the
embedding. Each run writes under a fresh memory id and drops it at the end.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from adapters.base import NewRecord, Part, RecallQuery, RecordNotFound, Revision, Writer
from adapters.mem0 import Mem0Provider

URL = os.environ.get("MEM0_OSS_URL")
KEY = os.environ.get("MEM0_OSS_KEY")

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(
        URL is None or KEY is None, reason="set MEM0_OSS_URL and MEM0_OSS_KEY to run against a real mem0 server"
    ),
]

AGENT = Writer(kind="member", id="mbr_live", type="agent")
T0 = datetime.now(UTC).replace(microsecond=0)


@pytest.fixture
async def live() -> AsyncIterator[tuple[Mem0Provider, str]]:
    memory_id = "hmem_" + secrets.token_hex(16)
    async with httpx.AsyncClient() as client:
        provider = Mem0Provider(
            client, base_url=URL or "", api_key=KEY or "", variant="oss", entity_prefix="memfed-live-", timeout=30.0
        )
        try:
            yield provider, memory_id
        finally:
            await provider.drop_memory(memory_id)


async def test_a_record_round_trips_through_a_real_server(live: tuple[Mem0Provider, str]) -> None:
    """Remember, get, recall, revise, history, forget and erase, as the fake says they behave."""
    mem0, memory_id = live
    written = await mem0.remember(
        memory_id,
        NewRecord(
            type="fact",
            title="Acme renewal",
            content=(Part(type="text", text="Acme renews in March and wants its discount kept."),),
            written_by=AGENT,
            written_at=T0,
            attributes={"account": "acme"},
        ),
    )
    assert await mem0.get(memory_id, written.id) == written

    hits = (await mem0.recall([memory_id], RecallQuery(query="When does Acme renew?"))).hits
    assert written.id in {h.record.id for h in hits}

    revised = await mem0.revise(
        memory_id, written.id, Revision(AGENT, T0 + timedelta(seconds=1), title="Acme renewal, confirmed")
    )
    assert [v.version for v in await mem0.history(memory_id, written.id)] == [1, 2]
    assert (await mem0.list(memory_id)).items == (revised,)

    forgotten = await mem0.forget(memory_id, written.id, AGENT, T0 + timedelta(seconds=2))
    assert forgotten.status == "forgotten" and (await mem0.list(memory_id)).items == ()

    erasure = await mem0.erase(memory_id, [written.id])
    assert erasure.erased == (written.id,)
    assert erasure.unreachable == (written.id,)  # the OSS server keeps history rows after a delete
    with pytest.raises(RecordNotFound):
        await mem0.get(memory_id, written.id)
