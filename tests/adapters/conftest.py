"""Fixtures of the adapter suites: `provider` runs a test once per adapter in HARNESSES."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from adapters.base import Provider
from adapters.local import LocalProvider
from tests.adapters.harnesses import HARNESSES, ON_POSTGRES, Stamps


@pytest.fixture(
    params=[pytest.param(n, marks=pytest.mark.postgres) if n in ON_POSTGRES else n for n in sorted(HARNESSES)]
)
async def provider(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Provider]:
    """A fresh provider per test, in its own scratch directory (and with its own fake vendor)."""
    async with HARNESSES[request.param](tmp_path) as opened:
        yield opened


@pytest.fixture
def stamps() -> Stamps:
    return Stamps()


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[LocalProvider]:
    """The embedded provider on a fresh file, for the tests of what only it does."""
    provider = await LocalProvider.open(tmp_path / "records.sqlite3")
    try:
        yield provider
    finally:
        await provider.close()
