"""A gateway with the embedded provider, `m0` (a mem0 OSS fake) and `zep` (a Zep v4 fake), each faked at
the HTTP layer behind one client that routes by host."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.adapters.fake_mem0 import FakeMem0
from tests.adapters.fake_zep import FakeZep
from tests.api._gateway import Gateway, make_config, running_gateway

ZEP_KEY_ENV = "MEMFED_TEST_ZEP_KEY"
MEM0_KEY_ENV = "MEMFED_TEST_MEM0_KEY"


@dataclass
class Three:
    gw: Gateway
    zep: FakeZep
    mem0: FakeMem0


def routed(zep: FakeZep, mem0: FakeMem0) -> httpx.AsyncClient:
    """One client for the gateway, each request answered by the fake whose host it names."""
    async def respond(request: httpx.Request) -> httpx.Response:
        if request.url.host == httpx.URL(zep.base_url).host:
            return await zep.respond(request)
        return await mem0.respond(request)

    return httpx.AsyncClient(transport=httpx.MockTransport(respond))


@asynccontextmanager
async def three_providers(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, zep_timeout: float = 2.0,
                          zep_options: dict[str, Any] | None = None, **zep_fields: Any) -> AsyncIterator[Three]:
    zep, mem0 = FakeZep("v4", **zep_fields), FakeMem0("oss")
    monkeypatch.setenv(ZEP_KEY_ENV, zep.api_key)
    monkeypatch.setenv(MEM0_KEY_ENV, mem0.api_key or "")
    config = make_config(tmp_path, providers={
        "m0": {"adapter": "mem0", "variant": "oss", "base_url": mem0.base_url, "api_key_env": MEM0_KEY_ENV},
        "zep": {"adapter": "zep", "base_url": zep.base_url, "api_key_env": ZEP_KEY_ENV, "timeout": zep_timeout,
                "task_poll": 0.001, "failure_threshold": 3, "reset_after": 30, **(zep_options or {})}})
    async with running_gateway(config, http_client=routed(zep, mem0)) as gateway:
        yield Three(gateway, zep, mem0)


