"""Liveness (`GET /healthz`) and readiness (`GET /readyz`), and the gate that holds requests while not ready.

A gateway is `loading` from the moment its port is bound until its state is in memory, `ready` while it
serves, and `draining` from the first SIGTERM on. Only `ready` takes requests: before, a request is 503
`memfed_loading`; after, 503 `memfed_draining` with `Connection: close`, so a client or balancer goes to
another instance while the requests already taken finish.

Both probes need no credentials, so they say nothing a stranger should learn: no memory, member or key,
no counts, no error text; only each check's one-word state and each provider's breaker state by its
configured name.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Literal

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.api._endpoint import Call, Endpoint
from gateway.api.responses_admin import LiveOut, ReadyOut
from gateway.base.answers import JSONAnswer
from gateway.base.errors import draining, loading, method_not_allowed, route_not_found
from gateway.state.loading import LoadProgress

if TYPE_CHECKING:
    from gateway.services import Services

Phase = Literal["loading", "ready", "draining"]
Check = Callable[[], Awaitable[str]]  # "ok", or one word saying what is wrong
PROBE_SECONDS = 1.0  # a state store that does not answer `SELECT 1` in this long is unreachable
PROBE_KEPT = 1.0  # a probe's answer is reused this long: balancers probing often cost one query a second
OPEN_PATHS = ("/healthz", "/readyz", "/metrics")


class Readiness:
    """The gateway's phase and the checks `/readyz` runs; `checks` takes more by name (e.g. coherence)."""

    def __init__(self) -> None:
        self.phase: Phase = "loading"
        self.services: Services | None = None
        self.checks: dict[str, Check] = {}
        self._store_seen: tuple[float, str] | None = None
        self.progress = LoadProgress()  # how far the tree's load is, shown while loading

    def loaded(self, services: Services) -> None:
        self.services = services
        if self.phase == "loading":
            self.phase = "ready"

    def drain(self) -> None:
        self.phase = "draining"

    async def report(self) -> tuple[int, dict[str, Any]]:
        """(status, body) of `/readyz`: 200 only when ready and every check is ok. An open breaker is shown
        but does not make the gateway unready: its answers degrade, and every replica shares the vendor."""
        checks: dict[str, Any] = {}
        services = self.services
        if services is None:
            checks.update(state_store="loading", tree="loading", journal="loading")
        else:
            checks["state_store"] = await self._state_store(services)
            checks["tree"] = "ok" if self.phase != "loading" else "loading"
            checks["journal"] = services.audit.journal_state()
            for name, check in self.checks.items():
                checks[name] = await check()
            checks["providers"] = {name: handle.breaker.state for name, handle in services.providers.handles.items()}
        healthy = all(v in ("ok", "disabled") for k, v in checks.items() if k != "providers")
        ready = self.phase == "ready" and healthy
        status = self.phase if self.phase != "ready" else ("ready" if healthy else "unready")
        body: dict[str, Any] = {"status": status, "checks": checks}
        if self.phase == "loading":
            body["progress"] = self.progress.percent()  # a share of the tree read: no counts to a stranger
        return (200 if ready else 503), body

    async def _state_store(self, services: Services) -> str:
        now = time.monotonic()
        if self._store_seen is not None and now - self._store_seen[0] < PROBE_KEPT:
            return self._store_seen[1]
        try:
            async with asyncio.timeout(PROBE_SECONDS):
                await services.store.ping()
            state = "ok"
        except Exception:  # the reason stays in the database driver: a probe answers one word
            state = "unreachable"
        self._store_seen = (time.monotonic(), state)
        return state


class ReadinessGate:
    """Answers the two probes itself (they work while loading, when no route can run yet) and refuses any
    other request unless the gateway is ready."""

    def __init__(self, app: ASGIApp, readiness: Readiness) -> None:
        self.app = app
        self.readiness = readiness

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path, phase = scope["path"], self.readiness.phase
        if path in ("/healthz", "/readyz"):
            if scope["method"] not in ("GET", "HEAD"):
                answer = method_not_allowed("This route takes GET.", allow="GET, HEAD").response()
            elif path == "/healthz":
                answer = JSONAnswer({"status": "ok"})
            else:
                status, body = await self.readiness.report()
                answer = JSONAnswer(body, status_code=status, headers={"Cache-Control": "no-store"})
            await answer(scope, receive, send)
            return
        if phase != "ready" and path not in OPEN_PATHS:
            if phase == "loading":
                refusal = loading()
                headers = {"Retry-After": "1"}
            else:
                refusal = draining()
                headers = {"Connection": "close"}
            answer = refusal.response()
            answer.headers.update(headers)
            await answer(scope, receive, send)
            return
        await self.app(scope, receive, send)


async def _answered_by_the_gate(call: Call) -> dict[str, Any]:
    raise route_not_found()  # the gate answers these paths first


# Declared for the OpenAPI document only: ReadinessGate answers both paths before any route is reached.
DOCUMENTED = [
    Endpoint("GET", "/healthz", _answered_by_the_gate, "The process answers: always 200 while it runs "
             "(no authentication).", "health.live", public=True, response=LiveOut, tags=("operations",)),
    Endpoint("GET", "/readyz", _answered_by_the_gate, "Ready to serve: 200, or 503 while loading, draining or "
             "when a check fails; each check's state and each provider's breaker (no authentication).",
             "health.ready", public=True, response=ReadyOut, also=(503,), tags=("operations",)),
]
