"""A fake memory-provider plugin: a real subprocess speaking the plugin protocol (shared/vendors/harness-plugin.md).

Run as `python tests/adapters/fake_plugin.py [flags]`. It behaves as a Go SDK plugin is recorded to:
- refuses to run without the magic cookie (a line on stderr, exit 1) and checks PLUGIN_PROTOCOL_VERSIONS;
- listens on a unix socket under $TMPDIR (or TCP on 127.0.0.1 within PLUGIN_MIN_PORT..PLUGIN_MAX_PORT with
  `--network tcp`) and prints `1|1|unix|PATH|grpc|` as its first stdout line;
- serves grpc.health.v1 (service `plugin`), plugin.GRPCBroker (keeps the ConnInfo of broker id 1 for 5 s
  only, as go-plugin does), plugin.GRPCController/Shutdown, and the memory service under the current
  package or, with `--package old`, the pre-rename `pluggableharness.agent.memory.v1` (which has no
  Describe);
- keeps records as a plugin does: a suggested id that exists is silently overwritten (slug uniqueness
  is the kernel's duty), ListRecords pages at most 100 records and lists PENDING ones, Recall sees no
  query text, self-truncates to the token budget and ranks newest first with a relevance score;
- `--count-tokens` fills MemoryRecord.tokens by calling CountTokens back through the broker;
- errors go as ErrorInfo (`--errors errorinfo`, the Go SDK's form), MemoryError (`memoryerror`), both,
  or a bare status code (`code`). `GetRecord("fail-<reason>")` and a Record titled `fail:<reason>` answer
  the error of that reason, to exercise each one.
Modes: `--crash-at-start` (or `--crash-at-start-if FILE`, while FILE exists), `--bad-handshake`,
`--silent` (never prints the handshake), `--unhealthy`,
`--crash-after N` (exits after N memory calls), `--slow S` (sleeps S s in every record call, or only in
`--slow-methods A,B`),
`--ratification` with `--pending` (every write is a draft), `--store FILE` (records survive a restart),
`--env-dump FILE` (writes the names of the environment it was given).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import socket
import sys
import tempfile
import threading
import time
from collections.abc import AsyncIterator
from concurrent import futures
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the plugin runs with no PYTHONPATH

import grpc
import httpx
from google.protobuf import any_pb2, json_format, timestamp_pb2
from google.rpc import error_details_pb2, status_pb2

from adapters.plugin._pb import goplugin_pb2 as goplugin
from adapters.plugin._pb import health_pb2 as health
from adapters.plugin._pb import kernel_pb2 as kernel
from adapters.plugin._pb import memory_pb2 as pb

COOKIE = ("PLUGGABLEHARNESS_AGENT_PLUGIN", "pluggableharness-agent-v1-a6f3c9d2-plugin-handshake")
PAGE_CAP = 100

# reason -> (gRPC code, MemoryErrorCategory, retryable), as the Go SDK maps them (§4)
REASONS = {
    "not_found": (grpc.StatusCode.NOT_FOUND, pb.MEMORY_ERROR_CATEGORY_NOT_FOUND, False),
    "invalid_type": (grpc.StatusCode.INVALID_ARGUMENT, pb.MEMORY_ERROR_CATEGORY_INVALID_TYPE, False),
    "invalid_scope": (grpc.StatusCode.INVALID_ARGUMENT, pb.MEMORY_ERROR_CATEGORY_INVALID_SCOPE, False),
    "ratification_unsupported": (grpc.StatusCode.FAILED_PRECONDITION,
                                 pb.MEMORY_ERROR_CATEGORY_RATIFICATION_UNSUPPORTED, False),
    "budget_exceeded": (grpc.StatusCode.RESOURCE_EXHAUSTED, pb.MEMORY_ERROR_CATEGORY_BUDGET_EXCEEDED, False),
    "source_unavailable": (grpc.StatusCode.UNAVAILABLE, pb.MEMORY_ERROR_CATEGORY_SOURCE_UNAVAILABLE, True),
    "unknown": (grpc.StatusCode.INTERNAL, pb.MEMORY_ERROR_CATEGORY_UNKNOWN, False),
}


class PluginError(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def kebab(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:48] or "record"


class Plugin:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.package = "pluggableharness.agent.memory.v1" if args.package == "old" else "pluggableharness.memory.v1"
        self.records: dict[str, pb.MemoryRecord] = {}
        self.lock = threading.Lock()
        self.calls = 0
        self.config: dict[str, Any] | None = None
        self.broker_info: tuple[str, float] | None = None  # (address, received at)
        self.kernel: grpc.Channel | None = None
        self.kernel_failed = False
        self.stop = threading.Event()
        if args.store and os.path.exists(args.store):
            saved = pb.ListRecordsResponse.FromString(Path(args.store).read_bytes())
            self.records = {r.id: r for r in saved.records}

    # -------------------------------------------------------------- plumbing

    def save(self) -> None:
        if self.args.store:
            Path(self.args.store).write_bytes(
                pb.ListRecordsResponse(records=list(self.records.values())).SerializeToString())

    def fail(self, context: grpc.ServicerContext, reason: str, message: str) -> None:
        code, cat, retryable = REASONS[reason]
        details = []
        if self.args.errors in ("errorinfo", "both"):
            info = error_details_pb2.ErrorInfo(domain="memory.pluggableharness.dev", reason=reason,
                                               metadata={"retryable": "true" if retryable else "false"})
            packed = any_pb2.Any()
            packed.Pack(info)
            details.append(packed)
        if self.args.errors in ("memoryerror", "both"):
            err = pb.MemoryError(category=cat, message=message, retryable=retryable)
            details.append(any_pb2.Any(type_url=f"type.googleapis.com/{self.package}.MemoryError",
                                       value=err.SerializeToString()))
        if details:
            status = status_pb2.Status(code=code.value[0], message=message, details=details)
            context.set_trailing_metadata((("grpc-status-details-bin", status.SerializeToString()),))
        context.abort(code, message)

    def count_tokens(self, text: str) -> int:
        """Through the broker, as a Go SDK plugin does: a failed dial is permanent for the process."""
        if self.kernel is None and not self.kernel_failed:
            deadline = time.monotonic() + 5
            while self.broker_info is None and time.monotonic() < deadline:
                time.sleep(0.02)
            info = self.broker_info
            if info is None or time.monotonic() - info[1] > 5:
                self.kernel_failed = True
            else:
                self.kernel = grpc.insecure_channel(f"unix:{info[0]}")
        if self.kernel is None:
            raise PluginError("unknown", "timeout waiting for connection info")
        call = self.kernel.unary_unary("/pluggableharness.kernel.v1.KernelCallbackService/CountTokens",
                                       request_serializer=lambda m: m.SerializeToString(),
                                       response_deserializer=kernel.CountTokensResult.FromString)
        request = kernel.CountTokensRequest(content=[pb.ContentBlock(text=pb.TextBlock(text=text))],
                                            model_ref=kernel.ModelRef(id="memfed"))
        try:
            return int(call(request, timeout=5).count)
        except grpc.RpcError as exc:
            raise PluginError("unknown", f"CountTokens failed: {exc.code().name}") from exc

    def memory_call(self, method: str) -> None:
        self.calls += 1
        if self.args.crash_after is not None and self.calls > self.args.crash_after:
            os._exit(3)
        only = self.args.slow_methods.split(",") if self.args.slow_methods else None
        if self.args.slow and method not in ("GetCapabilities", "Describe", "Configure") and (
                only is None or method in only):
            time.sleep(self.args.slow)

    # -------------------------------------------------------------- memory service

    def capabilities(self) -> pb.MemoryCapabilities:
        schema = pb.ConfigSchema(attributes=[
            pb.ConfigAttribute(name="root", type=pb.ATTR_TYPE_STRING, required=True, description="where to keep"),
            pb.ConfigAttribute(name="api_token", type=pb.ATTR_TYPE_STRING, sensitive=True),
            pb.ConfigAttribute(name="max_records", type=pb.ATTR_TYPE_NUMBER, default_json="1000"),
            pb.ConfigAttribute(name="tags", type=pb.ATTR_TYPE_LIST_STRING),
        ])
        return pb.MemoryCapabilities(
            default_token_budget=2000,
            supported_types=[pb.MemoryType.Value(f"MEMORY_TYPE_{t.upper()}") for t in self.args.types.split(",")],
            supported_scopes=[pb.MemoryScope.Value(f"MEMORY_SCOPE_{s.upper()}") for s in self.args.scopes.split(",")],
            ratification_supported=self.args.ratification,
            config_schema=schema,
            supported_hook_points=[pb.HOOK_POINT_POST_MODEL_RESPONSE, pb.HOOK_POINT_SESSION_END],
        )

    def GetCapabilities(self, request: Any, context: Any) -> pb.GetCapabilitiesResponse:
        self.memory_call("GetCapabilities")
        return pb.GetCapabilitiesResponse(capabilities=self.capabilities())

    def Describe(self, request: Any, context: Any) -> pb.DescribeResponse:
        return pb.DescribeResponse(producer=pb.ProducerRef(
            name="fake-memory", version="0.3.0", source="tests/adapters/fake_plugin.py",
            category=pb.CATEGORY_MEMORY, protocol_version=1))

    def Configure(self, request: pb.ConfigureRequest, context: Any) -> pb.ConfigureResponse:
        self.memory_call("Configure")
        config = json_format.MessageToDict(request.config)
        if not isinstance(config.get("root"), str):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "root is required")
        self.config = config
        if self.args.config_dump:
            Path(self.args.config_dump).write_text(json.dumps(config))
        return pb.ConfigureResponse()

    def _text(self, blocks: Any, context: Any) -> None:
        for block in blocks:
            if not block.HasField("text"):
                self.fail(context, "unknown", "memory content must be text")

    def _stamp(self, record: pb.MemoryRecord) -> None:
        now = timestamp_pb2.Timestamp()
        now.GetCurrentTime()
        if not record.HasField("created_at"):
            record.created_at.CopyFrom(now)
        record.updated_at.CopyFrom(now)
        if self.args.count_tokens:
            record.tokens = self.count_tokens("".join(b.text.text for b in record.content))
        else:
            record.tokens = max(1, sum(len(b.text.text) for b in record.content) // 4)

    def Record(self, request: pb.RecordRequest, context: Any) -> pb.RecordResponse:
        self.memory_call("Record")
        caps = self.capabilities()
        if request.title.startswith("fail:"):
            self.fail(context, request.title[5:], "asked to fail")
        if request.type not in caps.supported_types:
            self.fail(context, "invalid_type", f"type {request.type} is not supported")
        if request.scope not in caps.supported_scopes:
            self.fail(context, "invalid_scope", f"scope {request.scope} is not supported")
        self._text(request.content, context)
        rid = request.id if request.HasField("id") and request.id else kebab(request.title)
        status = pb.RECORD_STATUS_PENDING if self.args.pending else pb.RECORD_STATUS_CANONICAL
        record = pb.MemoryRecord(id=rid, type=request.type, scope=request.scope, title=request.title,
                                 content=request.content, status=status,
                                 provenance=pb.Provenance(recorded_by="fake-memory"))
        try:
            self._stamp(record)
        except PluginError as exc:
            self.fail(context, exc.reason, str(exc))
        with self.lock:
            self.records[rid] = record  # an existing id is overwritten: uniqueness is the kernel's duty
            self.save()
        return pb.RecordResponse(result=pb.RecordResult(id=rid, status=status))

    def _get(self, rid: str, context: Any) -> pb.MemoryRecord:
        if rid.startswith("fail-"):
            self.fail(context, rid[5:], "asked to fail")
        record = self.records.get(rid)
        if record is None:
            self.fail(context, "not_found", f"no record {rid!r}")
        assert record is not None
        return record

    def GetRecord(self, request: pb.GetRecordRequest, context: Any) -> pb.GetRecordResponse:
        self.memory_call("GetRecord")
        return pb.GetRecordResponse(record=self._get(request.id, context))

    def UpdateRecord(self, request: pb.UpdateRecordRequest, context: Any) -> pb.UpdateRecordResponse:
        self.memory_call("UpdateRecord")
        if not request.id:
            self.fail(context, "not_found", "empty id")
        record = self._get(request.id, context)
        self._text(request.content, context)
        updated = pb.MemoryRecord()
        updated.CopyFrom(record)
        del updated.content[:]
        updated.content.extend(request.content)
        if request.HasField("title"):
            updated.title = request.title
        try:
            self._stamp(updated)
        except PluginError as exc:
            self.fail(context, exc.reason, str(exc))
        with self.lock:
            self.records[request.id] = updated
            self.save()
        return pb.UpdateRecordResponse(result=pb.RecordResult(id=updated.id, status=updated.status))

    def DeleteRecord(self, request: pb.DeleteRecordRequest, context: Any) -> pb.DeleteRecordResponse:
        self.memory_call("DeleteRecord")
        self._get(request.id, context)
        with self.lock:
            del self.records[request.id]
            self.save()
        return pb.DeleteRecordResponse(result=pb.DeleteResult(deleted=True))

    def _ratifies(self, context: Any) -> None:
        if not self.args.ratification:
            self.fail(context, "ratification_unsupported", "this provider does not ratify")

    def ApproveRecord(self, request: pb.ApproveRecordRequest, context: Any) -> pb.ApproveRecordResponse:
        self.memory_call("ApproveRecord")
        self._ratifies(context)
        record = self._get(request.id, context)
        record.status = pb.RECORD_STATUS_CANONICAL
        self.save()
        return pb.ApproveRecordResponse(result=pb.RecordResult(id=record.id, status=record.status))

    def RejectRecord(self, request: pb.RejectRecordRequest, context: Any) -> pb.RejectRecordResponse:
        self.memory_call("RejectRecord")
        self._ratifies(context)
        self._get(request.id, context)
        with self.lock:
            del self.records[request.id]
            self.save()
        return pb.RejectRecordResponse(result=pb.DeleteResult(deleted=True))

    def _filtered(self, types: Any, scopes: Any) -> list[pb.MemoryRecord]:
        with self.lock:
            records = list(self.records.values())
        return [r for r in records if (not types or r.type in types) and (not scopes or r.scope in scopes)]

    def ListRecords(self, request: pb.ListRecordsRequest, context: Any) -> pb.ListRecordsResponse:
        self.memory_call("ListRecords")
        records = self._filtered(request.type_filter, request.scope_filter)
        if request.HasField("status_filter"):
            records = [r for r in records if r.status == request.status_filter]
        start = int(request.page_token or 0)
        size = min(request.page_size or 50, PAGE_CAP)
        page = records[start : start + size]
        more = start + size < len(records)
        return pb.ListRecordsResponse(records=page, next_page_token=str(start + size) if more else "")

    def Recall(self, request: pb.RecallRequest, context: Any) -> pb.RecallResponse:
        self.memory_call("Recall")
        if not request.HasField("model_target"):
            context.abort(grpc.StatusCode.INVALID_ARGUMENT, "model_target must be set")
        if request.token_budget <= 0:
            self.fail(context, "budget_exceeded", "no budget")
        records = [r for r in self._filtered(request.type_filter, request.scope_filter)
                   if request.include_pending or r.status != pb.RECORD_STATUS_PENDING]
        records.sort(key=lambda r: (r.updated_at.seconds, r.updated_at.nanos), reverse=True)
        kept, used = [], 0
        for rank, record in enumerate(records):
            if used + record.tokens > request.token_budget:
                break
            used += record.tokens
            out = pb.MemoryRecord()
            out.CopyFrom(record)
            out.relevance_score = 1.0 / (1 + rank)
            kept.append(out)
        return pb.RecallResponse(records=kept)


# ------------------------------------------------------------------ the go-plugin services


def serve(plugin: Plugin) -> None:
    args = plugin.args
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))

    def unary(fn: Any, request_type: Any) -> Any:
        return grpc.unary_unary_rpc_method_handler(fn, request_deserializer=request_type.FromString,
                                                   response_serializer=lambda m: m.SerializeToString())

    memory = {name: unary(getattr(plugin, name), getattr(pb, request))
              for name, request in (("GetCapabilities", "GetCapabilitiesRequest"), ("Configure", "ConfigureRequest"),
                                    ("Recall", "RecallRequest"), ("Record", "RecordRequest"),
                                    ("UpdateRecord", "UpdateRecordRequest"), ("DeleteRecord", "DeleteRecordRequest"),
                                    ("ApproveRecord", "ApproveRecordRequest"), ("RejectRecord", "RejectRecordRequest"),
                                    ("ListRecords", "ListRecordsRequest"), ("GetRecord", "GetRecordRequest"),
                                    ("Describe", "DescribeRequest"))}
    if args.package == "old":
        # The pre-rename generation had no Describe (added at ff8096b with ListRecords and GetRecord, which
        # are kept here so the same suite runs against both names, unless --first-generation).
        memory.pop("Describe")
        if args.first_generation:
            memory.pop("ListRecords")
            memory.pop("GetRecord")

    def check(request: health.HealthCheckRequest, context: Any) -> health.HealthCheckResponse:
        status = health.HealthCheckResponse.NOT_SERVING if args.unhealthy else health.HealthCheckResponse.SERVING
        if request.service not in ("", "plugin"):
            status = health.HealthCheckResponse.SERVICE_UNKNOWN
        return health.HealthCheckResponse(status=status)

    def start_stream(requests: Any, context: Any) -> Any:
        for info in requests:
            if info.service_id == 1:
                plugin.broker_info = (info.address, time.monotonic())
        return
        yield  # a generator: the host reads this stream too

    def shutdown(request: Any, context: Any) -> goplugin.Empty:
        plugin.stop.set()
        return goplugin.Empty()

    server.add_generic_rpc_handlers((
        grpc.method_handlers_generic_handler(f"{plugin.package}.MemoryService", memory),
        grpc.method_handlers_generic_handler("grpc.health.v1.Health",
                                             {"Check": unary(check, health.HealthCheckRequest)}),
        grpc.method_handlers_generic_handler("plugin.GRPCBroker", {"StartStream": grpc.stream_stream_rpc_method_handler(
            start_stream, request_deserializer=goplugin.ConnInfo.FromString,
            response_serializer=lambda m: m.SerializeToString())}),
        grpc.method_handlers_generic_handler("plugin.GRPCController", {"Shutdown": unary(shutdown, goplugin.Empty)}),
    ))
    if args.network == "tcp":
        low, high = int(os.environ.get("PLUGIN_MIN_PORT", 10000)), int(os.environ.get("PLUGIN_MAX_PORT", 25000))
        port = next(p for p in range(low, high) if _free(p))
        server.add_insecure_port(f"127.0.0.1:{port}")
        address, network = f"127.0.0.1:{port}", "tcp"
    else:
        fd, address = tempfile.mkstemp(prefix="plugin", dir=os.environ.get("TMPDIR") or None)
        os.close(fd)
        os.unlink(address)
        server.add_insecure_port(f"unix:{address}")
        network = "unix"
    server.start()
    line = f"2|1|{network}|{address}|grpc|" if args.bad_handshake else f"1|1|{network}|{address}|grpc|"
    print(line, flush=True)
    plugin.stop.wait()
    server.stop(grace=0.5).wait()
    if network == "unix" and os.path.exists(address):
        os.unlink(address)


def _free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--package", choices=("new", "old"), default="new")
    parser.add_argument("--network", choices=("unix", "tcp"), default="unix")
    parser.add_argument("--first-generation", action="store_true", help="with --package old: 9 RPCs only")
    parser.add_argument("--errors", choices=("errorinfo", "memoryerror", "both", "code"), default="errorinfo")
    parser.add_argument("--types", default="user,feedback,project,reference")
    parser.add_argument("--scopes", default="session,project,global")
    parser.add_argument("--store")
    parser.add_argument("--env-dump")
    parser.add_argument("--config-dump")
    parser.add_argument("--crash-at-start", action="store_true")
    parser.add_argument("--crash-at-start-if", help="crash at start while this file exists (a crash loop)")
    parser.add_argument("--crash-after", type=int)
    parser.add_argument("--bad-handshake", action="store_true")
    parser.add_argument("--silent", action="store_true")
    parser.add_argument("--unhealthy", action="store_true")
    parser.add_argument("--slow", type=float, default=0.0)
    parser.add_argument("--slow-methods", help="comma-separated: only these calls are slow")
    parser.add_argument("--ratification", action="store_true")
    parser.add_argument("--pending", action="store_true")
    parser.add_argument("--count-tokens", action="store_true")
    args = parser.parse_args()
    if os.environ.get(COOKIE[0]) != COOKIE[1]:
        sys.stderr.write("This binary is a plugin. These are not meant to be executed directly.\n")
        sys.exit(1)
    if "1" not in os.environ.get("PLUGIN_PROTOCOL_VERSIONS", "").split(","):
        sys.stderr.write("no supported protocol version\n")
        sys.exit(1)
    if args.env_dump:
        Path(args.env_dump).write_text(json.dumps(sorted(os.environ)))
    if args.crash_at_start or (args.crash_at_start_if and os.path.exists(args.crash_at_start_if)):
        sys.stderr.write("fake plugin: crashing at start as asked\n")
        sys.exit(2)
    if args.silent:
        time.sleep(3600)
    serve(Plugin(args))


# ------------------------------------------------------------------ for tests (in the test process)

FAKE = str(Path(__file__).resolve())


def plugin_options(scratch: Path, *flags: str, **options: Any) -> dict[str, Any]:
    """A `[providers.NAME]` table that runs this fake with `flags`, its records kept in `scratch`."""
    table: dict[str, Any] = {"command": [sys.executable, FAKE, "--store", str(scratch / "plugin-store.bin"), *flags],
                             "config": {"root": str(scratch)}, "start_timeout": 60.0, "timeout": 10.0}
    table.update(options)
    return table


@contextlib.asynccontextmanager
async def plugin_provider(scratch: Path, *flags: str, **options: Any) -> AsyncIterator[Any]:
    """The real plugin adapter over this fake, launched as a subprocess; stopped after the block."""
    from adapters.plugin import PluginProvider

    data_dir = scratch / "notes"
    data_dir.mkdir(parents=True, exist_ok=True)
    async with httpx.AsyncClient() as client:
        provider = await PluginProvider.from_config(plugin_options(scratch, *flags, **options), client=client,
                                                    data_dir=data_dir, api_key=None)
        try:
            yield provider
        finally:
            await provider.close()


if __name__ == "__main__":
    main()
