"""`memfed serve`: bind the port, load the state beside it, serve, and stop gracefully.

* The port is bound at once and answers the probes (`/readyz` says `loading`, with how far the tree's
  load is) while the state store is opened and loaded in chunks that let the loop run between them
  (gateway/state/loading.py); other requests are 503 until then. A state store that cannot be reached,
  or whose memories are no tree, fails the load: one line, exit status 2. The garbage collector rests
  during the load and what was loaded is frozen out of its reach after it: a full collection over a
  million nodes would hold the loop for a second, and finds nothing to free in them.
* A start that cannot work ends the process with one line on standard error and exit status 2, having
  closed what it opened (a connection thread left open would keep the process alive after the failure).
* The first SIGTERM (or SIGINT) drains: readiness turns 503, the listening socket closes, requests already
  taken get `[server] grace_seconds` to finish (then they are cancelled), the outbox worker stops, and the
  decision log commits what its journal holds before the process exits 0. A second signal exits at once:
  what was journaled is on disk and is committed by the next start.
"""

from __future__ import annotations

import asyncio
import gc
import importlib
import logging
import math
import os
import signal
import sys
from logging.handlers import MemoryHandler
from types import FrameType

import uvicorn
from starlette.applications import Starlette

import adapters
from gateway.agent import outbox
from gateway.api.health import Readiness
from gateway.base.config import Config
from gateway.server.app import begin_serving, create_app, end_serving, open_services
from gateway.server.failure import one_line
from gateway.services import Services
from gateway.telemetry import stall
from gateway.telemetry.export import Telemetry
from gateway.telemetry.stall import StallWatch
from gateway.telemetry.tracing import flush as flush_spans

log = logging.getLogger("memfed.serve")
FAILED = 2
STOPPED_AT_ONCE = 130


class DrainingServer(uvicorn.Server):
    """uvicorn's server, whose first stop signal also turns readiness to draining and whose second one
    ends the process at once (uvicorn only forces on a second SIGINT, and then still runs the shutdown)."""

    def __init__(self, config: uvicorn.Config, readiness: Readiness) -> None:
        super().__init__(config)
        self.readiness = readiness

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        if self.should_exit:
            print(f"memfed: a second {signal.Signals(sig).name}: stopping at once (the audit journal keeps "
                  "what is not committed yet, for the next start)", file=sys.stderr, flush=True)
            os._exit(STOPPED_AT_ONCE)
        self.readiness.drain()
        super().handle_exit(sig, frame)
        # uvicorn raises the captured signal again once it has stopped, which would end the process (with the
        # default handler) before the decision log is committed: this module ends it instead.
        captured = getattr(self, "_captured_signals", None)
        if isinstance(captured, list):
            captured.clear()


def run(config: Config) -> int:
    """Serve until stopped; the process's exit status."""
    # The event loop uvicorn would pick (uvloop where it is installed); the app is built inside it.
    with asyncio.Runner(loop_factory=uvicorn.Config("memfed").get_loop_factory()) as runner:
        return runner.run(_serve(config))


async def _serve(config: Config) -> int:
    readiness, telemetry = Readiness(), Telemetry(config)
    app = create_app(config, freeze_heap=True, readiness=readiness, telemetry=telemetry)
    server = DrainingServer(uvicorn.Config(app, host=config.host, port=config.port, log_level="info",
                                           lifespan="on", timeout_graceful_shutdown=math.ceil(config.grace_seconds)),
                            readiness)
    # Watched from before the load: the load's slices are where the loop is most at risk of being held.
    watch = StallWatch()
    watch.start()
    stall.watching(watch)
    try:
        return await _serve_watched(config, readiness, telemetry, app, server)
    finally:
        stall.watching(None)
        await watch.stop()


async def _serve_watched(config: Config, readiness: Readiness, telemetry: Telemetry, app: Starlette,
                         server: DrainingServer) -> int:
    held = HeldLines("uvicorn", "mcp")  # said once the state is in; a start that fails says only its one line
    serving = asyncio.create_task(_until_stopped(server), name="memfed-server")
    gc.disable()
    opening = asyncio.create_task(_open(config, readiness), name="memfed-open")
    try:
        await asyncio.wait({serving, opening}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gc.freeze()
        gc.enable()
    if serving.done():  # stopped (a signal, a port in use) before the state was in
        held.release()
        opening.cancel()
        opened = (await asyncio.gather(opening, return_exceptions=True))[0]
        if isinstance(opened, Services):
            await opened.close()
        await telemetry.close()
        return serving.result()
    if (failure := opening.exception()) is not None:
        server.should_exit = True
        await serving
        held.drop()
        await telemetry.close()
        print(f"memfed: {one_line(failure, config)}", file=sys.stderr, flush=True)
        return FAILED
    held.release()
    services = opening.result()
    try:
        await begin_serving(app, services)
        await telemetry.start(services, lambda: outbox.backlog(services))
        status = await serving
    finally:
        await end_serving(app)
        await services.close()  # commits the decision log's journal
        await telemetry.close()
        flush_spans()
    return status


async def _open(config: Config, readiness: Readiness) -> Services:
    # The configured adapters' packages are imported in a thread first: an import is CPU work that on the
    # loop (open_services imports them as it opens each provider) would hold the probes of the bound port.
    for name in sorted({provider.adapter for provider in config.providers.values()}):
        if (package := adapters.REGISTRY.get(name)) is not None:
            await asyncio.to_thread(importlib.import_module, package)
    return await open_services(config, first_admin=True, progress=readiness.progress)


class HeldLines:
    """A logger's lines kept back while the state loads behind the bound port: when the load fails (a cycle
    in the tree, an unreachable store) the start says one line, not the server's start and stop around it."""

    def __init__(self, *names: str) -> None:
        self.loggers = [logging.getLogger(name) for name in names]
        self.before = [(list(logger.handlers), logger.propagate) for logger in self.loggers]
        self.kept = MemoryHandler(capacity=1_000_000, flushLevel=logging.CRITICAL + 1)
        for logger in self.loggers:  # not passed up either: the MCP session manager logs through the root
            logger.handlers, logger.propagate = [self.kept], False

    def release(self) -> None:
        """Say what was kept, in order, and log as before."""
        if not self._restore():
            return
        for record in self.kept.buffer:
            logging.getLogger(record.name).handle(record)
        self.kept.buffer.clear()

    def drop(self) -> None:
        self.kept.buffer.clear()
        self._restore()

    def _restore(self) -> bool:
        if not any(self.kept in logger.handlers for logger in self.loggers):
            return False
        for logger, (handlers, propagate) in zip(self.loggers, self.before, strict=True):
            logger.handlers, logger.propagate = handlers, propagate
        return True


async def _until_stopped(server: uvicorn.Server) -> int:
    try:
        await server.serve()
    except SystemExit:  # uvicorn exits this way when it cannot bind, having said why in one log line
        return FAILED
    return 0 if server.started else FAILED

