"""Memory-provider plugins of the agent-kernel plugin protocol (gRPC over a subprocess handshake).

`provider` is the adapter (which memory a record is in, writes), `_reads` its reads and recall,
`_options` its configuration, `_ledger` what memfed keeps beside the plugin, `_supervisor` restarts,
`_config` the Configure table, `_process` one plugin's launch, handshake and health, `_kernel` the
callback service the plugin reaches through the broker, `wire` the gRPC paths and the error mapping, `_pb`
the message modules generated from memfed's own .proto files (scripts/gen_plugin_protos).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx

if TYPE_CHECKING:
    from adapters.plugin.provider import PluginProvider

EXTRA = "pip install 'memfed[plugin]'"


async def factory(options: Mapping[str, Any], *, client: httpx.AsyncClient, data_dir: Path,
                  api_key: str | None) -> PluginProvider:
    """`AdapterFactory`. grpcio and protobuf are an optional extra: without them a provider of this adapter
    is one configuration error naming what to install, not a traceback."""
    try:
        from adapters.plugin.provider import PluginProvider
    except ImportError as exc:
        raise ValueError(f"the plugin adapter needs grpcio and protobuf ({exc.name} is missing): {EXTRA}") from None
    return await PluginProvider.from_config(options, client=client, data_dir=data_dir, api_key=api_key)


def __getattr__(name: str) -> Any:
    if name == "PluginProvider":  # imported on use, so importing the face needs no grpcio
        from adapters.plugin.provider import PluginProvider

        return PluginProvider
    raise AttributeError(name)


__all__ = ["PluginProvider", "factory"]

if TYPE_CHECKING:
    from adapters.base import AdapterFactory

    _checked: AdapterFactory = factory  # the face's factory keeps the contract
