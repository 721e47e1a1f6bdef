"""Traces: one span per HTTP request and one per provider call (opentelemetry-sdk), and the request metric.

Spans carry the route, the status, the request id, the calling member's id and the provider's name and
outcome. They never carry a header, a body, a key or record content: a trace is shipped to places a
secret must not go. A request's span is named by its route template (`POST /v1/memories/{memory_id}/recall`),
and so is its metric: ids in a path would make a series per memory.
"""

from __future__ import annotations

import sys
import time

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import __version__
from gateway.telemetry import metrics

tracer = trace.get_tracer("memfed", __version__)
_configured: TracerProvider | None = None


def configure(exporter: str, extra: SpanExporter | None = None, *,
              otlp_endpoint: str | None = None) -> TracerProvider | None:
    """Install the SDK's tracer provider once: `console` prints spans on standard error (never standard
    output, which is a command's answer: `memfed export` writes its NDJSON there), `otlp` sends them in
    batches to `otlp_endpoint` (a collector's base URL), `none` records nothing."""
    global _configured
    if _configured is None and (exporter != "none" or extra is not None):
        provider = TracerProvider(resource=Resource.create({"service.name": "memfed",
                                                            "service.version": __version__}))
        trace.set_tracer_provider(provider)
        _configured = provider
    if _configured is not None:
        if exporter == "console":
            _configured.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
        if exporter == "otlp" and otlp_endpoint:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.trace.export import BatchSpanProcessor

            exporting = OTLPSpanExporter(endpoint=f"{otlp_endpoint}/v1/traces")
            _configured.add_span_processor(BatchSpanProcessor(exporting))
        if extra is not None:
            _configured.add_span_processor(SimpleSpanProcessor(extra))
    return _configured


def flush() -> None:
    """Send the spans still batched (a stopping gateway)."""
    if _configured is not None:
        _configured.force_flush(timeout_millis=5000)


class TracingMiddleware:
    """A server span around each HTTP request; handlers add attributes through the current span."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started, status = time.perf_counter(), 500
        with tracer.start_as_current_span(f"{scope['method']} {scope['path'][:200]}",
                                          kind=trace.SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", scope["method"])
            span.set_attribute("url.path", scope["path"][:500])

            async def send_traced(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    span.set_attribute("http.response.status_code", status)
                await send(message)

            try:
                await self.app(scope, receive, send_traced)
            finally:
                template = route_template(scope)
                span.update_name(f"{scope['method']} {template}")
                span.set_attribute("http.route", template)
                metrics.request(template, scope["method"], status, time.perf_counter() - started)


def route_template(scope: Scope) -> str:
    """The matched route's path template; the few paths answered ahead of the router by their own name;
    anything else one label, so a scan of random paths adds no series."""
    matched = scope.get("route")
    path = getattr(matched, "path", None)
    if isinstance(path, str):
        return path or "/"
    if scope["path"] in ("/healthz", "/readyz", "/metrics"):
        return str(scope["path"])
    return "unmatched"


def annotate(**attributes: str | int | bool) -> None:
    """Add attributes to the current span (request id, member id): never pass a secret here."""
    span = trace.get_current_span()
    for key, value in attributes.items():
        span.set_attribute(f"memfed.{key}", value)
