"""Traces and metrics: one span per HTTP request and per provider call, the gateway's metrics, and where
both are sent (the console, OTLP, the Prometheus text format at /metrics).

Nothing secret is in either: no header, body, key or record content in a span; only names memfed chose or
an operator configured in a metric's labels.
"""

from gateway.telemetry.tracing import TracingMiddleware, annotate, configure, tracer

__all__ = ["TracingMiddleware", "annotate", "configure", "tracer"]
