"""Traces: one span per HTTP request and one per provider call (opentelemetry-sdk).

Spans carry the route, the status, the request id, the calling member's id and the provider's name and
outcome. They never carry a header, a body, a key or record content: a trace is shipped to places a
secret must not go.
"""

from __future__ import annotations

import sys

from opentelemetry import trace
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import ConsoleSpanExporter, SimpleSpanProcessor, SpanExporter
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway import __version__

tracer = trace.get_tracer("memfed", __version__)
_configured: TracerProvider | None = None


def configure(exporter: str, extra: SpanExporter | None = None) -> TracerProvider | None:
    """Install the SDK's tracer provider once: `console` prints spans on standard error (never standard
    output, which is a command's answer: `memfed export` writes its NDJSON there), `none` records nothing."""
    global _configured
    if _configured is None and (exporter != "none" or extra is not None):
        provider = TracerProvider(resource=Resource.create({"service.name": "memfed",
                                                            "service.version": __version__}))
        trace.set_tracer_provider(provider)
        _configured = provider
    if _configured is not None:
        if exporter == "console":
            _configured.add_span_processor(SimpleSpanProcessor(ConsoleSpanExporter(out=sys.stderr)))
        if extra is not None:
            _configured.add_span_processor(SimpleSpanProcessor(extra))
    return _configured


class TracingMiddleware:
    """A server span around each HTTP request; handlers add attributes through the current span."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        with tracer.start_as_current_span(f"{scope['method']} {scope['path'][:200]}",
                                          kind=trace.SpanKind.SERVER) as span:
            span.set_attribute("http.request.method", scope["method"])
            span.set_attribute("url.path", scope["path"][:500])

            async def send_traced(message: Message) -> None:
                if message["type"] == "http.response.start":
                    span.set_attribute("http.response.status_code", message["status"])
                await send(message)

            await self.app(scope, receive, send_traced)


def annotate(**attributes: str | int | bool) -> None:
    """Add attributes to the current span (request id, member id): never pass a secret here."""
    span = trace.get_current_span()
    for key, value in attributes.items():
        span.set_attribute(f"memfed.{key}", value)
