"""Memory-provider plugins of the agent-kernel plugin protocol (gRPC over a subprocess handshake).

`_process` launches one plugin and checks its handshake and health; `_kernel` is the callback service
the plugin reaches through the broker; `wire` the gRPC paths and the error mapping; `_pb` the message
modules generated from memfed's own .proto files (scripts/gen_plugin_protos).
"""
