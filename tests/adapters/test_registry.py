"""The adapter registry: names a configuration may use, each opening a `Provider` through its factory."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

import adapters
from adapters.base import Provider


def test_every_registered_adapter_offers_a_factory() -> None:
    """Each entry of the registry names a package whose face offers a callable `factory`."""
    assert set(adapters.REGISTRY) >= {"local", "mem0"}
    for name in adapters.REGISTRY:
        assert callable(adapters.factory(name))


def test_an_unregistered_adapter_name_is_refused() -> None:
    """A name nobody registered is UnknownAdapter, not an import error or a None."""
    with pytest.raises(adapters.UnknownAdapter):
        adapters.factory("no-such-vendor")


async def test_the_local_factory_opens_a_provider_on_its_data_dir(tmp_path: Path) -> None:
    """The embedded provider's factory keeps its file in the data directory the gateway gives it."""
    async with httpx.AsyncClient() as client:
        provider = await adapters.factory("local")({}, client=client, data_dir=tmp_path, api_key=None)
    try:
        assert isinstance(provider, Provider)
        assert provider.capabilities().data_location == "gateway"
        assert (tmp_path / "records.sqlite3").exists()
    finally:
        await provider.close()
