"""The fake plugin's memory service: records kept as a plugin keeps them, and each error form (see
tests/adapters/fake_plugin.py, which serves it in the plugin subprocess)."""

from __future__ import annotations

import argparse
import json
import os
import re
import threading
import time
from pathlib import Path
from typing import Any

import grpc
from google.protobuf import any_pb2, json_format, timestamp_pb2
from google.rpc import error_details_pb2, status_pb2

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
            if info is None or time.monotonic() - info[1] > self.args.conninfo_ttl:
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
