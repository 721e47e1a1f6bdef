"""Fixtures of the HTTP suites: a gateway on a fresh data dir."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.api._gateway import Gateway, make_config, running_gateway


@pytest.fixture
async def gateway(tmp_path: Path) -> AsyncIterator[Gateway]:
    async with running_gateway(make_config(tmp_path)) as gw:
        yield gw


