"""The console's routes under /console: the page, its static files, sign-in and sign-out, and the API
as the signed-in member.

`/console/api/v1/...` is memfed's own API called in-process: the request is handed to the same ASGI
app with the session's bearer credential in place of the cookie, so every rule, every error and every
audit entry is exactly the API's. The console adds only the checks a cookie needs: a change (any
method but GET/HEAD) must carry the session's CSRF token, and a request from another origin is refused.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from importlib import resources
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import BaseRoute, Mount, Route, Router
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.base import errors
from gateway.base.errors import (
    ApiError,
    console_signed_out,
    cross_origin,
    invalid,
    invalid_credentials,
    media_refused,
    route_not_found,
)
from gateway.console.sessions import COOKIE, CSRF_HEADER, Session, Sessions, csrf_ok
from gateway.identity.auth import resolve_token

if TYPE_CHECKING:
    from gateway.services import Services

PREFIX = "/console"
API_PREFIX = PREFIX + "/api"
SAFE_METHODS = frozenset({"GET", "HEAD"})
# No inline script or style anywhere: every script and stylesheet is a file of this package.
CSP = ("default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
       "form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]
STATIC_TYPES = {".js": "text/javascript", ".css": "text/css", ".html": "text/html", ".svg": "image/svg+xml"}


def _static_root() -> Any:
    return resources.files("gateway.console").joinpath("static")


def signed_out() -> ApiError:
    return console_signed_out()


def _same_origin(request: Request) -> bool:
    """A browser names the page's origin on every change; one from elsewhere is refused (beside SameSite)."""
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    return urlsplit(origin).netloc == request.headers.get("host", "")


class Console:
    def __init__(self, services: Callable[[], Services], sessions: Sessions | None = None) -> None:
        self._services = services
        self.sessions = sessions or Sessions()
        self.app: ASGIApp | None = None  # the whole gateway, set once it is built

    # ------------------------------------------------------------------ pages

    async def page(self, request: Request) -> Response:
        return Response(_static_root().joinpath("index.html").read_bytes(), media_type="text/html")

    async def static(self, request: Request) -> Response:
        name = request.path_params["name"]
        if ".." in name.split("/") or name.startswith("/"):
            return route_not_found().response()
        file = _static_root().joinpath(*name.split("/"))
        suffix = "." + name.rsplit(".", 1)[-1] if "." in name else ""
        if suffix not in STATIC_TYPES or not file.is_file():
            return route_not_found().response()
        return Response(file.read_bytes(), media_type=STATIC_TYPES[suffix])

    # ------------------------------------------------------------------ session

    def _session(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(COOKIE))

    async def sign_in(self, request: Request) -> Response:
        if not _same_origin(request):
            return cross_origin("Sign-in from another origin is refused.").response()
        if request.headers.get("content-type", "").split(";")[0].strip() != "application/json":
            return media_refused("Send the credential as JSON.").response()
        try:
            body = json.loads(await request.body())
        except ValueError:
            body = None
        credential = body.get("credential") if isinstance(body, dict) else None
        if not isinstance(credential, str) or not credential.strip() or len(credential) > 8192:
            return invalid("Give `credential`: an API key or an OIDC token.", param="credential",
                           code="memfed_invalid_request").response()
        try:
            principal = await resolve_token(credential.strip(), self._services())
        except ApiError as error:  # e.g. the identity provider's keys cannot be fetched
            return error.response()
        if principal is None:
            return invalid_credentials("That credential is not valid.", "credential",
                                       challenge=False).response()
        self.sessions.close(request.cookies.get(COOKIE))
        cookie, session = self.sessions.open(credential.strip(), principal.member_id)
        answer = JSONResponse(_session_document(principal, session), status_code=201)
        answer.set_cookie(COOKIE, cookie, max_age=int(self.sessions.lifetime), path=PREFIX, httponly=True,
                          secure=request.url.scheme == "https", samesite="strict")
        return answer

    async def whoami(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return signed_out().response()
        principal = await resolve_token(session.token, self._services())
        if principal is None:  # the key was revoked since sign-in
            self.sessions.close(request.cookies.get(COOKIE))
            return signed_out().response()
        return JSONResponse(_session_document(principal, session))

    async def sign_out(self, request: Request) -> Response:
        session = self._session(request)
        if session is not None:
            if not csrf_ok(session, request.headers.get(CSRF_HEADER)):
                return csrf_refused().response()
            self.sessions.close(request.cookies.get(COOKIE))
        answer = Response(status_code=204)
        answer.delete_cookie(COOKIE, path=PREFIX, httponly=True, secure=request.url.scheme == "https",
                             samesite="strict")
        return answer

    # ------------------------------------------------------------------ the API, as the member

    async def api(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope)
        session = self._session(request)
        forwarded = scope["path"][len(API_PREFIX):]
        if session is None:
            error = signed_out()
        elif not forwarded.startswith("/v1/"):
            error = route_not_found()
        elif request.method not in SAFE_METHODS and not _same_origin(request):
            error = cross_origin("A change from another origin is refused.")
        elif request.method not in SAFE_METHODS and not csrf_ok(session, request.headers.get(CSRF_HEADER)):
            error = csrf_refused()
        else:
            assert self.app is not None
            await self.app(_as_member(scope, forwarded, session.token), receive, send)
            return
        await error.response()(scope, receive, send)

    def routes(self) -> list[BaseRoute]:
        return [
            Mount(PREFIX, app=_Secured(Router([
                Route("/", self.page, methods=["GET"]),
                Route("/static/{name:path}", self.static, methods=["GET"]),
                Route("/session", self.whoami, methods=["GET"]),
                Route("/session", self.sign_in, methods=["POST"]),
                Route("/session/end", self.sign_out, methods=["POST"]),
                Mount("/api", app=self.api),
            ]))),
            Route(PREFIX, lambda request: RedirectResponse(PREFIX + "/", status_code=308), methods=["GET"]),
        ]


def csrf_refused() -> ApiError:
    return errors.csrf_refused()


def _session_document(principal: Any, session: Session) -> dict[str, Any]:
    return {"object": "console.session", "member": {"id": principal.member_id, "name": principal.name,
                                                    "type": principal.type, "admin": principal.is_admin,
                                                    "groups": list(principal.groups)},
            "csrf_token": session.csrf}


def _as_member(scope: Scope, path: str, token: str) -> Scope:
    """The same request as the member would send it to the API: its bearer credential, no cookie."""
    dropped = {b"cookie", b"authorization", CSRF_HEADER.encode()}
    headers = [(k, v) for k, v in scope["headers"] if k.lower() not in dropped]
    headers.append((b"authorization", f"Bearer {token}".encode()))
    inner = {k: v for k, v in scope.items() if k not in {"endpoint", "path_params", "route", "router"}}
    inner.update(path=path, raw_path=path.encode(), root_path="", headers=headers)
    inner.pop("app_root_path", None)
    return inner


class _Secured:
    """Every console answer carries the strict CSP and no-store, the page and the proxied API alike."""

    def __init__(self, app: ASGIApp) -> None:
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self._app(scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                names = {name for name, _ in SECURITY_HEADERS}
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in names]
                message = {**message, "headers": [*kept, *SECURITY_HEADERS]}
            await send(message)

        await self._app(scope, receive, secured)
