"""One declaration per route: path, models, auth. The same models validate requests and build OpenAPI.

A handler receives a `Call` whose `body` and `query` are already validated pydantic models, and
returns a dict (sent as JSON) or a Response. Everything that goes wrong before or inside it becomes
the error envelope.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

from pydantic import BaseModel, ValidationError
from starlette.background import BackgroundTask
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from gateway.base import limits
from gateway.base.answers import JSONAnswer
from gateway.base.errors import ApiError, bad_request, invalid, json_required, validation_failed
from gateway.base.ids import new_id
from gateway.federation.writes import WriteIntent
from gateway.identity.auth import Principal, authenticate, unauthenticated
from gateway.telemetry import annotate

if TYPE_CHECKING:  # the services import the api's pieces (fairness, idempotency): named here for types only
    from gateway.audit import Coverage, DecisionEntry
    from gateway.services import Services

log = logging.getLogger("memfed.api")
M = TypeVar("M", bound=BaseModel)


@dataclass
class Call:
    request: Request
    services: Services
    # None on a public route (the endpoint's `public`); an authenticated route reads `authenticated()`.
    principal: Principal | None
    # The route's validated models (its endpoint's `body` and `query`), read typed through `body_as`/`query_as`.
    body: BaseModel | None
    query: BaseModel | None
    path: dict[str, str]
    request_id: str
    # Decisions made while the request is handled, journaled in one write before the answer leaves.
    decisions: list[tuple[DecisionEntry, Sequence[Coverage]]] | None = None
    # Named spans of the request's time (ms) reported in Server-Timing beside the gateway's own total.
    timings: dict[str, float] = field(default_factory=dict)
    # Work the answer does not wait for, started once the answer has been sent (e.g. refreshing counts).
    after_answer: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    # The x-request-id the client sent, kept beside the gateway's own `request_id` (the audit id) and echoed.
    client_request_id: str | None = None
    # The write this request makes at a provider: set by its Idempotency-Key's claim (gateway/federation/idempotency.py)
    # or, without a key, when a handler first asks for it (gateway/api/_writes.py).
    write: WriteIntent | None = None

    def audit(self, operation: str, memory_id: str | None, privilege: str | None, allowed: bool,
              reason: str) -> None:
        self.services.decide(self, operation, memory_id, privilege, allowed, reason)

    def authenticated(self) -> Principal:
        """The caller of an authenticated route. A public route has none: asking there is answered as a
        request without credentials (the 401 envelope), never as a server error."""
        if self.principal is None:
            raise unauthenticated()
        return self.principal

    def body_as(self, model: type[M]) -> M:
        """The body as the route's model: the one its endpoint declared, which the runner validated."""
        return _declared(self.body, model, "body")

    def query_as(self, model: type[M]) -> M:
        """The query string as the route's model (its endpoint's `query`), validated by the runner."""
        return _declared(self.query, model, "query")


def _declared(value: BaseModel | None, model: type[M], part: str) -> M:
    # A handler asking for a model its endpoint does not declare is a wiring bug of the route, not the
    # client's doing: it fails loudly (a 500 that is logged) rather than reading the wrong shape.
    if not isinstance(value, model):
        raise TypeError(f"the route's {part} is {type(value).__name__}, not {model.__name__}")
    return value


# A route answers a JSON object (rendered by JSONAnswer) or a Response it built.
Answer = Response | Mapping[str, object]
Handler = Callable[[Call], Awaitable[Answer]]


@dataclass(frozen=True)
class Endpoint:
    method: str
    path: str
    handler: Handler
    summary: str
    operation: str
    body: type[BaseModel] | None = None
    query: type[BaseModel] | None = None
    response: type[BaseModel] | None = None
    status: int = 200
    public: bool = False
    write: bool = False
    invalid_code: str = "memory_invalid"
    tags: tuple[str, ...] = field(default_factory=tuple)
    # Other success statuses the route answers (observe: 202 when the provider writes later).
    also: tuple[int, ...] = ()
    # The success answer's media type when it is not JSON ("*/*": the bytes' own type).
    media: str = "application/json"
    # A body that is not JSON (the import's NDJSON), declared for /openapi.json; read by the handler.
    raw_body: str | None = None
    # The model of each line of an NDJSON `raw_body`, for /openapi.json (validated by the handler).
    raw_line: type[BaseModel] | None = None
    # Error statuses beyond those /openapi.json derives from the declaration (gateway/api/openapi.py).
    errors: tuple[int, ...] = ()


def routes(endpoints: Iterable[Endpoint], services: Callable[[], Services]) -> list[Route]:
    """One Starlette route per path, taking every method declared on it: a method the path does not
    take is then a 405 whose `Allow` names all the ones it does (one route per method would name one).

    `services` answers the open services per request: routes are built before the app's lifespan opens them."""
    by_path: dict[str, dict[str, Callable[[Request], Awaitable[Response]]]] = {}
    for endpoint in endpoints:  # first appearance keeps its place: literal paths stay before parameters
        by_path.setdefault(endpoint.path, {})[endpoint.method] = _runner(endpoint, services)
    return [_dispatching(path, runners) for path, runners in by_path.items()]


def _dispatching(path: str, runners: dict[str, Callable[[Request], Awaitable[Response]]]) -> Route:
    async def dispatch(request: Request) -> Response:
        return await runners[request.method](request)

    only = next(iter(runners.values())) if len(runners) == 1 else None
    return Route(path, only or dispatch, methods=list(runners))


def _runner(endpoint: Endpoint, opened: Callable[[], Services]) -> Callable[[Request], Awaitable[Response]]:
    async def run(request: Request) -> Response:
        started = time.perf_counter()
        request_id, client_request_id = new_id("request"), _client_request_id(request)
        call: Call | None = None
        services = opened()
        try:
            annotate(request_id=request_id, operation=endpoint.operation)
            if client_request_id is not None:
                annotate(client_request_id=client_request_id)
            principal = await authenticate(request, services) if not endpoint.public else None
            if principal is not None:
                annotate(member=principal.member_id)
            if endpoint.write:
                _check_idempotency_key(request)
            with services.limits.hold(principal):  # per-member fairness (gateway/federation/fairness.py)
                query = _parse_query(endpoint, request)
                body = await _parse_body(endpoint, request)
                call = Call(request, services, principal, body, query, dict(request.path_params),
                            request_id, decisions=[], client_request_id=client_request_id)
                try:
                    if endpoint.write and principal is not None and request.headers.get("idempotency-key"):
                        response = await _once(endpoint, call)
                    else:
                        response = await _invoke(endpoint, call)
                finally:
                    services.journal_pending(call)
        except ApiError as error:
            response = error.response()
        response.headers["x-request-id"] = client_request_id or request_id
        response.headers["memfed-request-id"] = request_id
        # How long the gateway itself took (W3C Server-Timing): a client can tell its network and queueing
        # apart from the gateway's work, and the overhead bench reads it.
        spans = [f"app;dur={(time.perf_counter() - started) * 1000:.2f}"]
        spans += [f"{name};dur={ms:.2f}" for name, ms in (call.timings.items() if call is not None else ())]
        response.headers["server-timing"] = ", ".join(spans)
        return response

    run.__name__ = endpoint.operation
    return run


async def _once(endpoint: Endpoint, call: Call) -> Response:
    """The write under its Idempotency-Key (gateway/federation/idempotency.py): the same method, path and
    body from the same principal is the same request."""
    fingerprint = hashlib.sha256(
        f"{endpoint.method} {call.request.url.path}\n".encode() + await call.request.body()).hexdigest()

    def claimed(intent: WriteIntent) -> None:
        call.write = intent

    return await call.services.idempotency.run(call.authenticated().principal,
                                               call.request.headers["idempotency-key"], fingerprint, claimed,
                                               lambda: _invoke(endpoint, call))


async def _invoke(endpoint: Endpoint, call: Call) -> Response:
    result = await endpoint.handler(call)
    response = result if isinstance(result, Response) else JSONAnswer(result, status_code=endpoint.status)
    if call.after_answer and response.background is None:
        response.background = BackgroundTask(_run_after, list(call.after_answer))
    return response


async def _run_after(work: list[Callable[[], Awaitable[None]]]) -> None:
    # Started once the answer is sent, and not awaited: an in-process client (MCP tools call the API
    # through ASGITransport) would otherwise wait for it before it sees the answer.
    task = asyncio.create_task(_after(work))
    _running.add(task)  # a task nobody holds may be collected before it finishes
    task.add_done_callback(_running.discard)


_running: set[asyncio.Task[None]] = set()


async def _after(work: list[Callable[[], Awaitable[None]]]) -> None:
    for job in work:
        try:
            await job()
        except Exception:  # the answer is out: a failure here is logged, never the client's problem
            log.exception("work after the answer failed")


def _client_request_id(request: Request) -> str | None:
    """The client's x-request-id when it is a plain token: never the audit id, which the gateway mints, so a
    client cannot make its requests look like someone else's in the log."""
    given = request.headers.get("x-request-id", "")
    if 0 < len(given) <= 100 and given.isascii() and given.replace("-", "").replace("_", "").isalnum():
        return given
    return None


def _check_idempotency_key(request: Request) -> None:
    """A key given is 1 to 255 characters, as /openapi.json says: an empty one is not "no key"."""
    given = request.headers.get("idempotency-key")
    if given is not None and not 1 <= len(given) <= 255:
        raise invalid("An Idempotency-Key is 1 to 255 characters.", param="Idempotency-Key",
                      code="memfed_invalid_request")


def _parse_query(endpoint: Endpoint, request: Request) -> BaseModel | None:
    if endpoint.query is None:
        if request.query_params:
            name = next(iter(request.query_params))
            raise invalid(f"Unknown query parameter {name!r}.", name, endpoint.invalid_code)
        return None
    raw: dict[str, str] = {}
    for name, value in request.query_params.multi_items():
        if name in raw:
            raise invalid(f"Query parameter {name!r} given twice.", name, endpoint.invalid_code)
        raw[name] = value
    try:
        return endpoint.query.model_validate(raw)
    except ValidationError as exc:
        raise _validation_error(exc, endpoint.invalid_code) from None


async def _parse_body(endpoint: Endpoint, request: Request) -> BaseModel | None:
    if endpoint.body is None:
        return None
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media and media != "application/json" and not media.endswith("+json"):
        raise json_required(media[:100])
    declared = limits.declared_length(request.headers)
    if declared is not None and declared > limits.MAX_JSON_BYTES:
        raise limits.body_too_large()
    # Counted while it streams: a chunked body has no length to trust, and is never held past the limit.
    raw = bytearray()
    async for chunk in limits.bounded(request.stream(), limits.MAX_JSON_BYTES, limits.body_too_large):
        raw += chunk
    request._body = bytes(raw)  # what request.body() answers from now on (the idempotency key's hash reads it)
    if not raw.strip():
        data: object = {}  # no body at all: every field its default (a body of `null` is not this)
    else:
        try:
            data = limits.loads(bytes(raw))
        except (ValueError, UnicodeDecodeError):
            raise bad_request("The request body is not valid JSON.", code="memfed_invalid_json") from None
    if (problem := limits.plain_problem(data, bytes(raw))) is not None:
        where, what = problem
        raise invalid(f"{where or 'The body'} {what}.", where or None, endpoint.invalid_code)
    try:
        # Strict, as JSON Schema reads the document: `true` is not 1 and 1 is not "1". JSON mode still
        # reads RFC 3339 strings as datetimes. The text is known to be bounded and plain by now.
        return endpoint.body.model_validate_json(bytes(raw) if raw.strip() else b"{}", strict=True)
    except ValidationError as exc:
        raise _validation_error(exc, endpoint.invalid_code) from None


def _validation_error(exc: ValidationError, code: str, status: int = 422) -> ApiError:
    first = exc.errors(include_url=False, include_input=False)[0]
    param = ".".join(str(p) for p in first["loc"]) or None
    message = first["msg"]
    if param:
        message = f"{param}: {message}"
    detail = [
        {"param": ".".join(str(p) for p in e["loc"]), "message": e["msg"], "type": e["type"]}
        for e in exc.errors(include_url=False, include_input=False)
    ]
    return validation_failed(status, code, message, param, detail)
