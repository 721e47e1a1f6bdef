"""The plugin's gRPC surface, and the one place a gRPC failure becomes a ProviderError.

Wire facts: shared/vendors/harness-plugin.md. Services are called by path with the message modules of
`_pb` (generated from memfed's own .proto files by scripts/gen_plugin_protos), because one message set
serves both package names of the memory service: binary protobuf carries field numbers, never packages.

Errors come in two documented forms (§4): a `google.rpc.ErrorInfo` of domain
`memory.pluggableharness.dev` whose `reason` names the category (what the Go SDK sends), or a
`MemoryError` detail (what the protos say). Both are read from the `grpc-status-details-bin` trailer,
ErrorInfo first; without either the status code decides.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import grpc
from google.protobuf.message import DecodeError, Message
from google.rpc import error_details_pb2, status_pb2

from adapters.base import (
    ProviderError,
    ProviderRejected,
    ProviderTimeout,
    ProviderUnavailable,
    RecordNotFound,
    Unsupported,
)
from adapters.plugin._pb import memory_pb2 as pb

log = logging.getLogger("memfed.adapters.plugin")

# The two generations of the memory service (§1.4, §6); the handshake does not say which one a plugin
# serves, so the first call tries the current name and falls back on UNIMPLEMENTED.
PACKAGES = ("pluggableharness.memory.v1", "pluggableharness.agent.memory.v1")
KERNEL_SERVICES = ("pluggableharness.kernel.v1.KernelCallbackService",
                   "pluggableharness.agent.kernel.v1.KernelCallbackService")
ERROR_DOMAIN = "memory.pluggableharness.dev"
MAGIC_COOKIE_KEY = "PLUGGABLEHARNESS_AGENT_PLUGIN"
MAGIC_COOKIE_VALUE = "pluggableharness-agent-v1-a6f3c9d2-plugin-handshake"
APP_PROTOCOL_VERSION = "1"
CALLBACK_BROKER_ID = 1
# The Go host lifts gRPC's 4 MiB receive limit to MaxInt32 (§1.3); a listing of large records must fit.
CHANNEL_OPTIONS = [("grpc.max_receive_message_length", 2**31 - 1), ("grpc.max_send_message_length", 2**31 - 1)]

M = TypeVar("M", bound=Message)

# method -> response type; the request type is the caller's
RESPONSES: dict[str, type[Message]] = {
    "GetCapabilities": pb.GetCapabilitiesResponse,
    "Configure": pb.ConfigureResponse,
    "Recall": pb.RecallResponse,
    "Record": pb.RecordResponse,
    "UpdateRecord": pb.UpdateRecordResponse,
    "DeleteRecord": pb.DeleteRecordResponse,
    "ApproveRecord": pb.ApproveRecordResponse,
    "RejectRecord": pb.RejectRecordResponse,
    "ListRecords": pb.ListRecordsResponse,
    "GetRecord": pb.GetRecordResponse,
    "Describe": pb.DescribeResponse,
}


@dataclass(frozen=True)
class Category:
    """What a plugin error means, whichever form carried it."""

    reason: str  # not_found, invalid_type, ..., unknown
    message: str
    retryable: bool


_CATEGORY_REASONS = {
    pb.MEMORY_ERROR_CATEGORY_NOT_FOUND: "not_found",
    pb.MEMORY_ERROR_CATEGORY_INVALID_TYPE: "invalid_type",
    pb.MEMORY_ERROR_CATEGORY_RATIFICATION_UNSUPPORTED: "ratification_unsupported",
    pb.MEMORY_ERROR_CATEGORY_BUDGET_EXCEEDED: "budget_exceeded",
    pb.MEMORY_ERROR_CATEGORY_SOURCE_UNAVAILABLE: "source_unavailable",
    pb.MEMORY_ERROR_CATEGORY_UNKNOWN: "unknown",
    pb.MEMORY_ERROR_CATEGORY_INVALID_SCOPE: "invalid_scope",
}
_CODE_REASONS = {
    grpc.StatusCode.NOT_FOUND: "not_found",
    grpc.StatusCode.FAILED_PRECONDITION: "ratification_unsupported",
    grpc.StatusCode.RESOURCE_EXHAUSTED: "budget_exceeded",
    grpc.StatusCode.UNAVAILABLE: "source_unavailable",
    grpc.StatusCode.INTERNAL: "unknown",
}


def category(error: grpc.aio.AioRpcError) -> Category | None:
    """The category the status details name: ErrorInfo of the plugin domain first, then MemoryError.
    None when neither is there (the status code alone must then decide)."""
    raw = next((v for k, v in error.trailing_metadata() or () if k == "grpc-status-details-bin"), None)
    if not isinstance(raw, bytes):
        return None
    status = status_pb2.Status()
    try:
        status.ParseFromString(raw)
    except DecodeError:
        log.warning("a plugin sent status details memfed cannot parse")
        return None
    memory_error: Category | None = None
    for detail in status.details:
        if detail.type_url.endswith("/google.rpc.ErrorInfo"):
            info = error_details_pb2.ErrorInfo()
            if detail.Unpack(info) and info.domain == ERROR_DOMAIN:
                return Category(info.reason or "unknown", status.message or (error.details() or ""),
                                info.metadata.get("retryable") == "true")
        elif detail.type_url.endswith(".memory.v1.MemoryError"):  # either package generation
            parsed = pb.MemoryError()
            try:
                parsed.ParseFromString(detail.value)
            except DecodeError:
                continue
            reason = _CATEGORY_REASONS.get(parsed.category, "unknown")
            memory_error = memory_error or Category(reason, parsed.message, parsed.retryable)
    return memory_error


def provider_error(name: str, method: str, error: grpc.aio.AioRpcError) -> Exception:
    """The memfed error for a failed call of `method` on plugin provider `name`.

    NOT_FOUND is a record not found (an answer); INVALID_ARGUMENT, invalid_type/_scope and
    budget_exceeded are refusals of this request; ratification_unsupported and UNIMPLEMENTED say the
    plugin cannot; UNAVAILABLE (a crashed plugin too), DEADLINE_EXCEEDED and INTERNAL are ill health
    and feed the breaker. The message names the provider and quotes the plugin's own words, cut short.
    """
    code = error.code()
    found = category(error)
    said = (found.message if found else error.details()) or code.name
    text = f"plugin provider {name}: {method} failed ({code.name}"
    text += f", {found.reason}" if found else ""
    text += f"): {said[:300]!r}"  # the plugin's words, quoted: data, never instructions, and one line
    if code == grpc.StatusCode.DEADLINE_EXCEEDED:
        return ProviderTimeout(text)
    reason = found.reason if found else _CODE_REASONS.get(code)
    if reason == "not_found":
        return RecordNotFound(text)
    if reason in ("invalid_type", "invalid_scope", "budget_exceeded") or code == grpc.StatusCode.INVALID_ARGUMENT:
        return ProviderRejected(text)
    if reason == "ratification_unsupported" or code == grpc.StatusCode.UNIMPLEMENTED:
        return Unsupported(text)
    # source_unavailable, unknown, and any other code: the plugin failed; a retryable one may be retried
    # (the gateway retries reads once); whether a write landed is not known.
    return ProviderUnavailable(text)


class Memory:
    """The memory service of one connected plugin, under the package name it serves."""

    def __init__(self, name: str, channel: grpc.aio.Channel, package: str, timeout: float) -> None:
        self.name = name
        self.package = package
        self._channel = channel
        self._timeout = timeout
        self._methods: dict[str, Callable[..., Any]] = {}

    def _method(self, method: str) -> Callable[..., Any]:
        if (call := self._methods.get(method)) is None:
            response = RESPONSES[method]
            call = self._methods[method] = self._channel.unary_unary(
                f"/{self.package}.MemoryService/{method}",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=response.FromString,
            )
        return call

    async def call(self, method: str, request: Message, response: type[M], *, seconds: float | None = None) -> M:
        """One unary call, its failure translated (`provider_error`)."""
        try:
            answer = await self._method(method)(request, timeout=seconds or self._timeout)
        except grpc.aio.AioRpcError as exc:
            raise provider_error(self.name, method, exc) from exc
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise  # the caller was cancelled (a timeout): that stays a cancellation
            # grpc cancels a call in flight when its channel closes under it, as when the plugin died and
            # the supervisor let the channel go: for the caller that is the plugin being unavailable.
            cut = f"plugin provider {self.name}: {method} was cut off (the plugin went away)"
            raise ProviderUnavailable(cut) from None
        except grpc.RpcError as exc:  # pragma: no cover - grpc.aio raises AioRpcError
            raise ProviderUnavailable(f"plugin provider {self.name}: {method} failed") from exc
        if not isinstance(answer, response):
            raise ProviderUnavailable(f"plugin provider {self.name}: {method} answered an unexpected message")
        return answer


async def choose_package(
    name: str, channel: grpc.aio.Channel, seconds: float
) -> tuple[Memory, pb.MemoryCapabilities]:
    """The memory service the plugin serves and its capabilities: GetCapabilities is called first under
    the current package name, then under the pre-rename one when the plugin answers UNIMPLEMENTED."""
    last: ProviderError | None = None
    for package in PACKAGES:
        memory = Memory(name, channel, package, seconds)
        try:
            answer = await memory.call("GetCapabilities", pb.GetCapabilitiesRequest(), pb.GetCapabilitiesResponse)
        except Unsupported as exc:
            last = exc
            continue
        return memory, answer.capabilities
    raise ProviderUnavailable(f"plugin provider {name} serves neither memory service "
                              f"({' nor '.join(PACKAGES)})") from last
