"""One plugin subprocess: launch, handshake, dial, health, and its end (harness-plugin.md §1).

memfed starts the plugin with an explicit environment (never its own whole environment: the Go host's
`SkipHostEnv` slip of §1.1 is not repeated), reads the one handshake line within `start_timeout`, checks
it, dials the socket it names, checks `grpc.health.v1` for service `plugin`, opens the broker and finds
the memory service. Every failure on the way is one `PluginStartError` line naming the provider, and the
child is killed: a plugin that prints a bad line or nothing at all never leaves memfed waiting.

Stop asks the plugin's `GRPCController.Shutdown`, waits 2 s for it to exit, then kills it (§1.6).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from urllib.parse import quote

import grpc

from adapters.plugin._kernel import Broker, Callbacks
from adapters.plugin._pb import goplugin_pb2 as goplugin
from adapters.plugin._pb import health_pb2 as health
from adapters.plugin._pb import memory_pb2 as pb
from adapters.plugin.wire import (
    APP_PROTOCOL_VERSION,
    CHANNEL_OPTIONS,
    MAGIC_COOKIE_KEY,
    MAGIC_COOKIE_VALUE,
    Memory,
    choose_package,
)

log = logging.getLogger("memfed.adapters.plugin")

# What every plugin gets from memfed's environment (the Go host's intended allowlist); anything else
# only when the provider's `env` names it.
BASE_ENV = ("PATH", "HOME", "TMPDIR")
SHUTDOWN_WAIT = 2.0


class PluginStartError(ValueError):
    """The plugin could not be started; the message is one line naming the provider."""


@dataclass(frozen=True)
class Launch:
    name: str
    command: tuple[str, ...]
    env_names: tuple[str, ...] = ()
    start_timeout: float = 10.0
    call_timeout: float = 5.0
    version: str = "0.1.0"


def child_env(launch: Launch, source: Mapping[str, str]) -> dict[str, str]:
    """The plugin's whole environment: the cookie, the protocol version, the port range, the allowlist."""
    env = {k: source[k] for k in (*BASE_ENV, *launch.env_names) if k in source}
    env.update({
        MAGIC_COOKIE_KEY: MAGIC_COOKIE_VALUE,
        "PLUGIN_PROTOCOL_VERSIONS": APP_PROTOCOL_VERSION,
        "PLUGIN_MIN_PORT": "10000",
        "PLUGIN_MAX_PORT": "25000",
        "OTEL_RESOURCE_ATTRIBUTES": ",".join(
            f"pluggableharness.producer.{k}={quote(v, safe='')}"
            for k, v in (("category", "memory"), ("name", launch.name), ("version", launch.version))
        ),
    })
    return env


def parse_handshake(line: str) -> str:
    """The gRPC target a handshake line names, or ValueError saying what is wrong with it (§1.2)."""
    fields = line.strip().split("|")
    if len(fields) < 4:
        raise ValueError(f"the handshake line has {len(fields)} fields, at least 4 are needed")
    core, app, network, address = fields[:4]
    if core != "1":
        raise ValueError(f"core protocol {core!r} is not 1")
    if app != APP_PROTOCOL_VERSION:
        raise ValueError(f"app protocol {app!r} is not {APP_PROTOCOL_VERSION}")
    protocol = fields[4] if len(fields) > 4 else "netrpc"
    if protocol != "grpc":
        raise ValueError(f"protocol {protocol!r} is not grpc")
    if len(fields) > 5 and len(fields[5]) > 50:
        raise ValueError("the plugin asks for AutoMTLS, which memfed does not offer")
    if network == "unix":
        if not address:
            raise ValueError("no socket path")
        return f"unix:{address}"
    if network == "tcp":
        host, _, port = address.rpartition(":")
        if host not in ("127.0.0.1", "localhost") or not port.isdigit():
            raise ValueError(f"tcp address {address!r} is not on 127.0.0.1")
        return f"ipv4:127.0.0.1:{port}"
    raise ValueError(f"network {network!r} is neither unix nor tcp")


class PluginProcess:
    """A started plugin. `memory` is its memory service, `capabilities` what it declared at start."""

    def __init__(self, launch: Launch, proc: asyncio.subprocess.Process, workdir: str) -> None:
        self.launch = launch
        self.proc = proc
        self.workdir = workdir
        self.channel: grpc.aio.Channel | None = None
        self.callbacks: Callbacks | None = None
        self.broker: Broker | None = None
        self.memory: Memory | None = None
        self.capabilities = pb.MemoryCapabilities()
        self.producer = pb.ProducerRef()
        self._drains: list[asyncio.Task[None]] = []

    @classmethod
    async def start(cls, launch: Launch) -> PluginProcess:
        workdir = tempfile.mkdtemp(prefix="memfed-plugin-")
        try:
            proc = await asyncio.create_subprocess_exec(
                *launch.command, env=child_env(launch, os.environ), stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, start_new_session=True,
            )
        except OSError as exc:
            shutil.rmtree(workdir, ignore_errors=True)
            raise PluginStartError(f"plugin provider {launch.name}: cannot run {launch.command[0]}: {exc}") from exc
        plugin = cls(launch, proc, workdir)
        try:
            await plugin._connect()
        except BaseException as exc:
            await plugin.kill()
            if isinstance(exc, PluginStartError | asyncio.CancelledError):
                raise
            raise PluginStartError(f"plugin provider {launch.name}: {type(exc).__name__}: {exc}") from exc
        return plugin

    def _fail(self, why: str) -> PluginStartError:
        return PluginStartError(f"plugin provider {self.launch.name}: {why}")

    async def _connect(self) -> None:
        assert self.proc.stdout is not None and self.proc.stderr is not None
        self._drains.append(asyncio.ensure_future(_log_lines(self.launch.name, self.proc.stderr)))
        try:
            raw = await asyncio.wait_for(self.proc.stdout.readline(), self.launch.start_timeout)
        except TimeoutError:
            raise self._fail(f"printed no handshake within {self.launch.start_timeout:g} s") from None
        if not raw:
            code = await _exit_code(self.proc)
            raise self._fail(f"exited (code {code}) before its handshake")
        try:
            target = parse_handshake(raw.decode("utf-8", "replace"))
        except ValueError as exc:
            raise self._fail(f"bad handshake line: {exc}") from None
        self._drains.append(asyncio.ensure_future(_discard(self.proc.stdout)))
        self.channel = grpc.aio.insecure_channel(target, options=CHANNEL_OPTIONS)
        timeout = self.launch.call_timeout
        try:
            checked = await self.channel.unary_unary(
                "/grpc.health.v1.Health/Check",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=health.HealthCheckResponse.FromString,
            )(health.HealthCheckRequest(service="plugin"), timeout=timeout)
        except grpc.aio.AioRpcError as exc:
            raise self._fail(f"health check failed ({exc.code().name})") from None
        if checked.status != health.HealthCheckResponse.SERVING:
            raise self._fail(f"health check says {health.HealthCheckResponse.ServingStatus.Name(checked.status)}")
        self.callbacks = Callbacks(self.launch.name, os.path.join(self.workdir, "kernel.sock"))
        await self.callbacks.start()
        self.broker = Broker(self.channel, self.callbacks)
        await self.broker.announce()
        self.memory, self.capabilities = await choose_package(self.launch.name, self.channel, timeout)
        try:
            self.producer = (await self.memory.call("Describe", pb.DescribeRequest(), pb.DescribeResponse)).producer
        except Exception as exc:  # the pre-ListRecords generation has no Describe: identity stays unknown
            log.info("plugin provider %s: Describe failed (%s)", self.launch.name, exc)

    @property
    def alive(self) -> bool:
        return self.proc.returncode is None

    async def stop(self) -> None:
        """Shutdown through the controller, 2 s to exit, then a kill. The process's exit is what is
        waited for, not Shutdown's answer, which a plugin stopping its server may never send."""
        if self.alive and self.channel is not None:
            shutdown = asyncio.ensure_future(self.channel.unary_unary(
                "/plugin.GRPCController/Shutdown",
                request_serializer=lambda m: m.SerializeToString(),
                response_deserializer=goplugin.Empty.FromString,
            )(goplugin.Empty(), timeout=SHUTDOWN_WAIT))
            try:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self.proc.wait(), SHUTDOWN_WAIT)
            finally:
                shutdown.cancel()
                with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
                    await shutdown
        await self.kill()

    async def kill(self) -> None:
        """Release everything; the child is killed if it is still there."""
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.proc.wait(), SHUTDOWN_WAIT)
        if self.broker is not None:
            await self.broker.close()
        if self.channel is not None:
            await self.channel.close(grace=None)
        if self.callbacks is not None:
            await self.callbacks.stop()
        for task in self._drains:
            task.cancel()
        shutil.rmtree(self.workdir, ignore_errors=True)


async def _exit_code(proc: asyncio.subprocess.Process) -> int | None:
    with contextlib.suppress(asyncio.TimeoutError):
        return await asyncio.wait_for(proc.wait(), 1.0)
    return None


async def _log_lines(name: str, stream: asyncio.StreamReader) -> None:
    """The plugin's stderr, logged line by line (as the Go host does), cut so one line stays one line."""
    with contextlib.suppress(asyncio.CancelledError):
        while line := await stream.readline():
            log.info("plugin %s: %s", name, line.decode("utf-8", "replace").rstrip()[:500])


async def _discard(stream: asyncio.StreamReader) -> None:
    """stdout after the handshake is drained so a chatty plugin never blocks on a full pipe."""
    with contextlib.suppress(asyncio.CancelledError):
        while await stream.read(65536):
            pass


def command_of(value: object, name: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, Sequence) or not value:
        raise ValueError(f"plugin provider {name}: command must be a non-empty list of strings")
    if not all(isinstance(part, str) and part for part in value):
        raise ValueError(f"plugin provider {name}: command must be a non-empty list of strings")
    return tuple(value)
