"""A migration's provider failures are answered by the one error map every route uses (federation.failures):
the same code, status, reason and Retry-After as any other call to that provider, with the migration's report."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from adapters.base import NewRecord, Provider, ProviderError, ProviderRateLimited, ProviderRejected, Record
from tests.api._gateway import Gateway, make_config, running_gateway
from tests.api.migration_data import migrate, seed


@pytest.fixture
async def gw(tmp_path: Path) -> AsyncIterator[Gateway]:
    """A gateway with the default `local` provider and a second local one named `archive`."""
    async with running_gateway(make_config(tmp_path, providers={"archive": {"adapter": "local"}})) as gateway:
        yield gateway


class Refusing:
    """Wraps a provider; every remember raises `failure` (the archive refusing what is copied to it)."""

    def __init__(self, inner: Provider, failure: ProviderError) -> None:
        self.inner = inner
        self.failure = failure

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def remember(self, memory_id: str, record: NewRecord) -> Record:
        raise self.failure


def _refuse(gw: Gateway, failure: ProviderError) -> None:
    handle = gw.services.providers["archive"]
    handle.provider = Refusing(handle.provider, failure)


async def test_a_rate_limited_target_is_answered_with_its_retry_after(gw: Gateway) -> None:
    """The target says 429 with a wait: the migration answers 503 memory_unavailable, reason rate_limited,
    and Retry-After with that wait, as a recall or a write to that provider would."""
    seeded = await seed(gw)
    _refuse(gw, ProviderRateLimited("slow down", retry_after=7))
    failed = await migrate(gw, seeded.memory_id)
    assert failed.status_code == 503, failed.text
    assert failed.headers.get("retry-after") == "7"
    error = failed.json()["error"]
    assert (error["code"], error["detail"]["reason"], error["detail"]["retry_after"]) == (
        "memory_unavailable", "rate_limited", 7)
    assert error["detail"]["migration"]["status"] == "failed"


async def test_a_target_refusing_a_record_is_the_same_refusal_as_elsewhere(gw: Gateway) -> None:
    """The target refuses what is copied as invalid: 422 memory_invalid with reason rejected (as every route
    answers a provider's refusal), not a 503 that says to try again."""
    seeded = await seed(gw)
    _refuse(gw, ProviderRejected("title too long"))
    failed = await migrate(gw, seeded.memory_id)
    assert failed.status_code == 422, failed.text
    error = failed.json()["error"]
    assert (error["code"], error["detail"]["reason"]) == ("memory_invalid", "rejected")
    assert error["detail"]["migration"]["status"] == "failed"
    assert (await gw.admin.get(f"/v1/memories/{seeded.memory_id}")).json()["provider"] == "local"
