"""The ASGI app: the routes table, the error envelope everywhere, and the lifespan that opens services."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute, Route

from gateway.agent import outbox
from gateway.agent.mcp.server import attach as attach_mcp
from gateway.api import access as access_api
from gateway.api import (
    agent,
    audit_log,
    consolidations,
    discovery,
    files,
    grants,
    graph,
    harnesses,
    health,
    members,
    memories,
    migration,
    recall,
    records,
    snapshots,
    tree_import,
)
from gateway.api import queries as queries_api
from gateway.api import ratification as ratification_api
from gateway.api import types as types_api
from gateway.api._endpoint import Endpoint
from gateway.api._endpoint import routes as api_routes
from gateway.api.health import Readiness
from gateway.api.openapi import build as build_openapi
from gateway.api.versions import VersionMiddleware
from gateway.audit import AuditLog
from gateway.audit.seal import Seal
from gateway.audit.store import create_audit_tables_on
from gateway.base.answers import JSONAnswer
from gateway.base.config import Config
from gateway.base.errors import http_error, internal_error, method_not_allowed, route_not_found
from gateway.console import Console
from gateway.federation.fairness import MemberLimits
from gateway.federation.idempotency import Idempotency
from gateway.federation.preflight import preflight, warn_unshared_default
from gateway.federation.providers import Providers
from gateway.services import Services, ServicesSlot
from gateway.state.files import FileStore
from gateway.state.loading import LoadProgress
from gateway.state.private_files import private_dir, private_file
from gateway.state.store import StateStore
from gateway.telemetry import TracingMiddleware
from gateway.telemetry import configure as configure_tracing
from gateway.telemetry.export import Telemetry

log = logging.getLogger("memfed.app")


def endpoints() -> list[Endpoint]:
    """Every route of the HTTP API. Order matters only where paths overlap (literal before parameter)."""
    return [
        *discovery.ENDPOINTS,
        *types_api.ENDPOINTS, *consolidations.ENDPOINTS,  # /v1/memories/types before /v1/memories/{memory_id}
        *members.ENDPOINTS,
        *memories.ENDPOINTS,
        *tree_import.ENDPOINTS,
        *grants.ENDPOINTS,
        *access_api.ENDPOINTS,
        *audit_log.ENDPOINTS,
        *records.ENDPOINTS,
        *snapshots.ENDPOINTS,
        *recall.ENDPOINTS,
        *graph.ENDPOINTS,
        *files.ENDPOINTS,
        *migration.ENDPOINTS,
        *agent.ENDPOINTS,
        *harnesses.ENDPOINTS,
        *queries_api.ENDPOINTS,
        *ratification_api.ENDPOINTS,
    ]


async def open_services(config: Config, *, http_client: httpx.AsyncClient | None = None, audit: AuditLog | None = None,
                        first_admin: bool = False, progress: LoadProgress | None = None) -> Services:
    """Everything a request needs, opened; on any failure (or a cancellation) what was opened is closed again,
    so a start that fails leaves no connection thread behind to keep the process from exiting.

    With `first_admin`, an empty state store gets its first admin (MEMFED_ADMIN_KEY, or a key printed
    once) under the startup lock, with the tables (gateway/state/startup.py)."""
    preflight(config)  # an unknown adapter or an unset key variable: one line, before anything is opened
    private_dir(config.data_dir)
    if (url := config.database_url()).startswith("sqlite+aiosqlite:///") and ":memory:" not in url:
        private_file(Path(url[len("sqlite+aiosqlite:///") :]))  # before SQLite makes it world-readable
    configure_tracing(config.telemetry_exporter, otlp_endpoint=config.otlp_endpoint)
    given = os.environ.get("MEMFED_ADMIN_KEY", "") if first_admin else None
    async with contextlib.AsyncExitStack() as opened:
        store = await StateStore.open(url, search_path=config.state_schema, schemas=(create_audit_tables_on,),
                                      first_admin=given, progress=progress)
        opened.push_async_callback(store.close)
        if store.first_admin and not given:
            print(f"memfed: created the first admin member {store.first_admin[0]}; its API key (shown once): "
                  f"{store.first_admin[1]}", file=sys.stderr, flush=True)
        providers = await Providers.open(config, http_client)
        opened.push_async_callback(providers.close)
        audit_log = audit or AuditLog(store.engine, config.data_dir, enabled=config.audit_enabled,
                                        flush_interval=config.audit_flush_ms / 1000,
                                        batch_size=config.audit_batch_size, seal=Seal.from_env(config.audit_seal_env))
        await audit_log.start()
        opened.push_async_callback(audit_log.close)
        services = Services(
            config=config, store=store, providers=providers, files=FileStore(store, config.data_dir / "files"),
            audit=audit_log, idempotency=Idempotency(store, config.idempotency_hours, config.write_lease_seconds),
            limits=MemberLimits(config.limits),
        )
        if config.oidc:
            from gateway.identity.oidc import OidcSettings, OidcVerifier

            services.oidc = OidcVerifier(OidcSettings.from_toml(config.oidc), providers.client)
        # In a thread: building the document is a few hundred milliseconds of CPU that, on the loop, would hold
        # the probes `memfed serve` answers while it opens.
        services.openapi = await asyncio.to_thread(build_openapi, [*endpoints(), *health.DOCUMENTED])
        opened.pop_all()  # opened: from here on the caller closes them (Services.close)
    return services


async def bootstrap_admin(store: StateStore, announce: bool = True) -> str | None:
    """On an empty state store, make the first admin: MEMFED_ADMIN_KEY, or a key printed once. Under the
    startup lock, so a gateway starting beside this one does not make a second."""
    given = os.environ.get("MEMFED_ADMIN_KEY")
    secret = await store.make_first_admin(given)
    if secret is not None and not given and announce:
        print(f"memfed: created the first admin; its API key (shown once): {secret}", file=sys.stderr, flush=True)
    return secret


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        return route_not_found().response()
    if status == 405:
        answer = method_not_allowed("This route does not take that method.").response()
        # RFC 9110: a 405 names the methods the route does take (Starlette puts them on the exception).
        allow = (getattr(exc, "headers", None) or {}).get("Allow")
        if allow:
            answer.headers["allow"] = allow
        return answer
    return http_error(status, str(getattr(exc, "detail", "error"))).response()


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error", exc_info=exc)
    return JSONAnswer(internal_error().envelope(), status_code=500)


def create_app(config: Config, *, services: Services | None = None, http_client: httpx.AsyncClient | None = None,
               freeze_heap: bool = False, readiness: Readiness | None = None,
               telemetry: Telemetry | None = None) -> Starlette:
    """The app. Given `services`, it uses them as they are (tests); given `readiness` and no services, it
    waits for `begin_serving` (memfed serve: the port answers the probes while the state loads); otherwise
    its lifespan opens them.

    `freeze_heap` (for `memfed serve`): everything built at start-up (the tree, the routes, the imported
    modules) is moved out of the garbage collector's sight, so its full collections, which would otherwise
    walk all of it, stay short pauses in the middle of requests."""
    slot = ServicesSlot()
    deferred = readiness is not None and services is None
    ready = readiness or Readiness()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        if deferred:
            yield  # memfed serve opens the services beside the server and closes them after it
            return
        opened = services is None
        current = services or await open_services(config, http_client=http_client, first_admin=True)
        await begin_serving(app, current)
        try:
            yield
        finally:
            await end_serving(app)
            if opened:
                await current.close()

    # Routes are built before the lifespan opens the services; they look them up in the slot per request.
    routes: list[BaseRoute] = [*api_routes(endpoints(), slot.get)]
    console = Console(slot.get) if config.console_enabled else None
    if console is not None:
        routes += console.routes()
    if telemetry is not None and telemetry.serves_metrics_route:
        routes.append(Route("/metrics", telemetry.metrics_route, methods=["GET"]))  # no credentials: see README
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(TracingMiddleware), Middleware(VersionMiddleware),
                    Middleware(health.ReadinessGate, readiness=ready)],
        exception_handlers={HTTPException: _not_found, Exception: _server_error},
    )
    app.state.slot, app.state.readiness, app.state.freeze_heap = slot, ready, freeze_heap
    if services is not None:
        slot.current = services
        app.state.services = services
        ready.loaded(services)
    attach_mcp(app, slot.get)
    if console is not None:
        console.app = app  # its API calls go through the whole app, middleware included
    return app


async def begin_serving(app: Starlette, services: Services) -> None:
    """The services are open: requests reach them, the outbox worker starts, readiness turns ready."""
    app.state.slot.current = services
    app.state.services = services
    await outbox.start_background(services)
    if app.state.freeze_heap:
        gc.collect()
        gc.freeze()
    # Each caller's tops (where entry points are looked for) found again from the grants just loaded, in
    # steps, from now on: not during the start, whose every await would wait for a step of it.
    services.store.entries.prepare()
    # Said once the state store answered: a start that cannot reach it says only that, in one line.
    warn_unshared_default(services.config)
    app.state.readiness.checks["coherence"] = lambda: _caught_up(services)
    app.state.readiness.loaded(services)


async def _caught_up(services: Services) -> str:
    """Readiness of the tree: this instance has applied every change another instance wrote."""
    try:
        await services.store.catch_up()
    except Exception:  # the state store check names an unreachable store; this only says it is not current
        return "behind"
    return "ok"


async def end_serving(app: Starlette) -> None:
    """No more requests are taken; the outbox worker stops (a row it was sending keeps its lease and is
    looked for at its provider before it is sent again)."""
    app.state.readiness.drain()
    if (services := app.state.slot.current) is not None:
        await outbox.stop_background(services)
