"""The kernel side a plugin calls back into: the callback service, and the broker stream that tells the
plugin where it is (harness-plugin.md §1.5).

memfed serves `KernelCallbackService` (both package names) on a unix socket of its own and announces it
on the plugin's `plugin.GRPCBroker/StartStream` as broker id 1. A received ConnInfo is kept by a Go
plugin only about 5 s, so the announcement is sent again before every call that may call back.

Only `CountTokens` is answered: memfed has no model tokenizer, so the count is memfed's own estimate,
ceil(UTF-8 bytes / 4), and says so with `exact = false`. Every other callback is UNIMPLEMENTED.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import grpc

from adapters.plugin._pb import goplugin_pb2 as goplugin
from adapters.plugin._pb import kernel_pb2 as kernel
from adapters.plugin.wire import CALLBACK_BROKER_ID, KERNEL_SERVICES

log = logging.getLogger("memfed.adapters.plugin")


def estimate(content: list[str]) -> int:
    """memfed's token estimate of some text, the same one prime uses (gateway/agent/prime.py)."""
    return -(-sum(len(t.encode("utf-8")) for t in content) // 4)


class Callbacks:
    """The callback server of one plugin process; `counted` is how many CountTokens it answered."""

    def __init__(self, name: str, socket_path: str) -> None:
        self.name = name
        self.address = socket_path
        self.counted = 0
        self._server: grpc.aio.Server | None = None

    async def start(self) -> None:
        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(
            self._count_tokens,
            request_deserializer=kernel.CountTokensRequest.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        for service in KERNEL_SERVICES:
            server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(service, {"CountTokens": handler}),))
        server.add_insecure_port(f"unix:{self.address}")
        await server.start()
        self._server = server

    async def _count_tokens(self, request: kernel.CountTokensRequest, context: Any) -> kernel.CountTokensResult:
        texts = [block.text.text for block in request.content if block.HasField("text")]
        if not texts or not any(texts):
            await context.abort(grpc.StatusCode.INVALID_ARGUMENT, "CountTokens needs non-empty text content")
        self.counted += 1
        return kernel.CountTokensResult(count=estimate(texts), exact=False)

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=0.5)
            self._server = None


class Broker:
    """The host end of the plugin's broker stream. The stream is opened right after connecting; what
    the plugin sends on it (its own ConnInfo, for muxed services memfed does not use) is read and
    dropped, so the stream never backs up."""

    def __init__(self, channel: grpc.aio.Channel, callbacks: Callbacks) -> None:
        self._callbacks = callbacks
        method = channel.stream_stream(
            "/plugin.GRPCBroker/StartStream",
            request_serializer=lambda m: m.SerializeToString(),
            response_deserializer=goplugin.ConnInfo.FromString,
        )
        self._call: Any = method()
        self._reader = asyncio.ensure_future(self._drain())
        self._lock = asyncio.Lock()
        self.broken = False

    async def _drain(self) -> None:
        try:
            async for _ in self._call:
                pass
        except (grpc.aio.AioRpcError, asyncio.CancelledError):
            pass
        finally:
            self.broken = True

    async def announce(self) -> None:
        """Tell the plugin where the callback service is (again). A plugin that does not serve the broker
        only loses its callbacks, which is its own affair (§1.5), so a failure here is logged, not raised."""
        if self.broken:
            return
        info = goplugin.ConnInfo(service_id=CALLBACK_BROKER_ID, network="unix", address=self._callbacks.address)
        async with self._lock:
            try:
                await self._call.write(info)
            except (grpc.aio.AioRpcError, grpc.aio.UsageError, RuntimeError) as exc:
                self.broken = True
                log.info("plugin provider %s: its broker stream closed (%s)", self._callbacks.name, type(exc).__name__)

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            self._call.cancel()
        self._reader.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await self._reader
