"""Opening the providers builds their shared HTTP client off the event loop: the client loads the CA bundle
into a TLS context, tens of milliseconds of CPU that would otherwise hold the loop while a big tree loads."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import httpx
import pytest

from gateway.base import config as config_module
from gateway.federation.providers import Providers


async def test_the_shared_client_is_built_off_the_event_loop_thread(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """The thread that constructs the httpx client is not the one running the event loop."""
    built_on: list[threading.Thread] = []
    real = httpx.AsyncClient

    def recording(*args: Any, **kwargs: Any) -> httpx.AsyncClient:
        built_on.append(threading.current_thread())
        return real(*args, **kwargs)

    monkeypatch.setattr(httpx, "AsyncClient", recording)
    config = config_module.from_mapping({"server": {"data_dir": str(tmp_path)}})
    providers = await Providers.open(config)
    try:
        assert len(built_on) == 1
        assert built_on[0] is not threading.current_thread()
        assert isinstance(providers.client, real)
    finally:
        await providers.close()
