"""Memory-provider plugins of the agent-kernel plugin protocol (gRPC over a subprocess handshake).

`provider` is the adapter (which memory a record is in, writes), `_reads` its reads and recall, `_ledger`
what memfed keeps beside the plugin, `_supervisor` restarts, `_config` the Configure table; `_process`
launches one plugin and checks its handshake and health; `_kernel` is the callback service
the plugin reaches through the broker; `wire` the gRPC paths and the error mapping; `_pb` the message
modules generated from memfed's own .proto files (scripts/gen_plugin_protos).
"""

from adapters.base import AdapterFactory
from adapters.plugin.provider import PluginProvider

factory: AdapterFactory = PluginProvider.from_config

__all__ = ["PluginProvider", "factory"]
