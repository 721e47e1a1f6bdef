"""The ASGI app: the routes table, the error envelope everywhere, and the lifespan that opens services."""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import BaseRoute

from gateway.agent import outbox
from gateway.agent.mcp.server import attach as attach_mcp
from gateway.answers import JSONAnswer
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
    members,
    memories,
    migration,
    recall,
    records,
    snapshots,
)
from gateway.api import queries as queries_api
from gateway.api import types as types_api
from gateway.api._endpoint import Endpoint, route
from gateway.api.idempotency import Idempotency
from gateway.api.limits import MemberLimits
from gateway.api.openapi import build as build_openapi
from gateway.api.versions import VersionMiddleware
from gateway.audit import AuditLog
from gateway.audit.seal import Seal
from gateway.config import Config
from gateway.errors import ApiError
from gateway.federation.preflight import preflight
from gateway.federation.providers import Providers
from gateway.services import Services
from gateway.state.files import FileStore
from gateway.state.private_files import private_dir, private_file
from gateway.state.store import StateStore
from gateway.telemetry import TracingMiddleware
from gateway.telemetry import configure as configure_tracing

log = logging.getLogger("memfed.app")


def endpoints() -> list[Endpoint]:
    """Every route of the HTTP API. Order matters only where paths overlap (literal before parameter)."""
    return [
        *discovery.ENDPOINTS,
        *types_api.ENDPOINTS, *consolidations.ENDPOINTS,  # /v1/memories/types before /v1/memories/{memory_id}
        *members.ENDPOINTS,
        *memories.ENDPOINTS,
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
    ]


async def open_services(config: Config, *, http_client: Any = None, audit: AuditLog | None = None) -> Services:
    preflight(config)  # an unknown adapter or an unset key variable: one line, before anything is opened
    private_dir(config.data_dir)
    if (url := config.database_url()).startswith("sqlite+aiosqlite:///") and ":memory:" not in url:
        private_file(Path(url[len("sqlite+aiosqlite:///") :]))  # before SQLite makes it world-readable
    configure_tracing(config.telemetry_exporter)
    store = await StateStore.open(config.database_url(), search_path=config.state_schema)
    try:
        providers = await Providers.open(config, http_client)
    except BaseException:
        await store.close()  # its connection thread would keep a command from exiting after it said why
        raise
    audit_log = audit or AuditLog(store.engine, config.data_dir, enabled=config.audit_enabled,
                                    flush_interval=config.audit_flush_ms / 1000, batch_size=config.audit_batch_size,
                                    seal=Seal.from_env(config.audit_seal_env))
    await audit_log.start()
    services = Services(
        config=config, store=store, providers=providers, files=FileStore(store, config.data_dir / "files"),
        audit=audit_log, idempotency=Idempotency(store, config.idempotency_hours, config.write_lease_seconds),
        limits=MemberLimits(config.limits),
    )
    if config.oidc:
        from gateway.identity.oidc import OidcSettings, OidcVerifier

        services.oidc = OidcVerifier(OidcSettings.from_toml(config.oidc), providers.client)
    services.openapi = build_openapi(endpoints())
    return services


async def bootstrap_admin(store: StateStore, announce: bool = True) -> str | None:
    """On an empty state store, make the first admin: MEMFED_ADMIN_KEY, or a key printed once."""
    if store.member_count():
        return None
    given = os.environ.get("MEMFED_ADMIN_KEY")
    admin = await store.create_member("admin", "human", is_admin=True)
    _, secret = await store.create_key(admin.id, given or None)
    if not given and announce:
        print(f"memfed: created the first admin member {admin.id}; its API key (shown once): {secret}",
              file=sys.stderr, flush=True)
    return secret


async def _not_found(request: Request, exc: Exception) -> Response:
    status = exc.status_code if isinstance(exc, HTTPException) else 500
    if status == 404:
        return ApiError(404, "memfed_route_not_found", "No such route.").response()
    if status == 405:
        return ApiError(405, "memfed_method_not_allowed", "This route does not take that method.").response()
    return ApiError(status, "memfed_http_error", str(getattr(exc, "detail", "error"))).response()


async def _server_error(request: Request, exc: Exception) -> Response:
    log.exception("unhandled error", exc_info=exc)
    return JSONAnswer(ApiError(500, "memfed_internal_error", "The server failed; the error is logged.")
                        .envelope(), status_code=500)


def create_app(config: Config, *, services: Services | None = None, http_client: Any = None,
               freeze_heap: bool = False) -> Starlette:
    """The app. Given `services`, it uses them as they are (tests); otherwise its lifespan opens them.

    `freeze_heap` (for `memfed serve`): everything built at start-up (the tree, the routes, the imported
    modules) is moved out of the garbage collector's sight, so its full collections, which would otherwise
    walk all of it, stay short pauses in the middle of requests."""
    holder: dict[str, Services] = {}

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        opened = services is None
        current = services or await open_services(config, http_client=http_client)
        holder["services"] = current
        app.state.services = current
        await bootstrap_admin(current.store)
        await outbox.start_background(current)
        if freeze_heap:
            gc.collect()
            gc.freeze()
        try:
            yield
        finally:
            await outbox.stop_background(current)
            if opened:
                await current.close()

    class _Lazy:
        """Routes are built before the lifespan opens the services; they look them up per request."""

        def __getattr__(self, name: str) -> Any:
            return getattr(holder["services"], name)

    lazy: Any = _Lazy()
    routes: list[BaseRoute] = [route(e, lazy) for e in endpoints()]
    app = Starlette(
        routes=routes,
        lifespan=lifespan,
        middleware=[Middleware(TracingMiddleware), Middleware(VersionMiddleware)],
        exception_handlers={HTTPException: _not_found, Exception: _server_error},
    )
    if services is not None:
        holder["services"] = services
        app.state.services = services
    attach_mcp(app, lambda: holder["services"])
    return app
