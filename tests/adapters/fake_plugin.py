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
import socket
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from concurrent import futures
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the plugin runs with no PYTHONPATH

import grpc
import httpx

from adapters.plugin._pb import goplugin_pb2 as goplugin
from adapters.plugin._pb import health_pb2 as health
from adapters.plugin._pb import memory_pb2 as pb
from tests.adapters._fake_plugin_memory import COOKIE, Plugin

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
    parser.add_argument("--conninfo-ttl", type=float, default=5.0, help="how long a broker ConnInfo is kept")
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
