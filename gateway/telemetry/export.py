"""Where metrics go: the Prometheus text format at `/metrics` (on the gateway's port or one of its own), and
OTLP over HTTP to a collector; spans by OTLP too (gateway/telemetry/tracing.py).

The exporters are OpenTelemetry's own (opentelemetry-exporter-prometheus, opentelemetry-exporter-otlp-
proto-http): the metrics are recorded once, through the SDK, and each reader renders them in its format.
The OTLP exporter honours the standard OTEL_EXPORTER_OTLP_HEADERS variable, so a collector's token stays
in the environment and out of the config file.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, generate_latest, start_http_server
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.requests import Request
from starlette.responses import Response

from gateway import __version__
from gateway.base.config import Config
from gateway.telemetry import metrics

Backlog = Callable[[], Awaitable[tuple[int, int | None]]]

log = logging.getLogger("memfed.telemetry")
SAMPLE_EVERY = 5.0  # seconds between two reads of the outbox's backlog (a query; the other gauges are free)
OTLP_EVERY_MS = 10_000


class Telemetry:
    """The metric readers one gateway runs, and the sampler of the figures that cost a query."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.registry: CollectorRegistry | None = None
        self.provider: MeterProvider | None = None
        self._port: Any = None
        self._sampler: asyncio.Task[None] | None = None
        readers: list[MetricReader] = []
        if "prometheus" in config.telemetry_metrics:
            from opentelemetry.exporter.prometheus import PrometheusMetricReader

            self.registry = CollectorRegistry(auto_describe=True)
            readers.append(PrometheusMetricReader(registry=self.registry))
        if "otlp" in config.telemetry_metrics:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter
            from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader

            exporter = OTLPMetricExporter(endpoint=f"{config.otlp_endpoint}/v1/metrics")
            readers.append(PeriodicExportingMetricReader(exporter, export_interval_millis=OTLP_EVERY_MS))
        if readers:
            self.provider = MeterProvider(metric_readers=readers, resource=Resource.create(
                {"service.name": "memfed", "service.version": __version__}))
        metrics.use(self.provider)

    @property
    def serves_metrics_route(self) -> bool:
        """Whether `/metrics` is answered on the gateway's own port."""
        return self.registry is not None and self.config.metrics_port is None

    def prometheus_text(self) -> bytes:
        return generate_latest(self.registry) if self.registry is not None else b""

    async def metrics_route(self, request: Request) -> Response:
        body = await asyncio.to_thread(self.prometheus_text)  # collection runs every gauge's callback
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    async def start(self, services: metrics.Observed, backlog: Backlog) -> None:
        """Serve the gauges from `services`; `backlog` samples the observe outbox (pending rows, the oldest's
        creation in ms), asked of the outbox rather than read here so telemetry knows no table."""
        metrics.watch(services)
        if self.registry is not None and self.config.metrics_port is not None:
            self._port = start_http_server(self.config.metrics_port, addr=self.config.host, registry=self.registry)
        if self.provider is not None:
            self._sampler = asyncio.create_task(_sample(backlog), name="memfed-metrics-sampler")

    async def close(self) -> None:
        """Stop sampling and serving; the OTLP reader exports what it holds before it stops."""
        if self._sampler is not None:
            self._sampler.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._sampler
            self._sampler = None
        if self._port is not None:
            server, thread = self._port
            server.shutdown()
            server.server_close()
            thread.join(timeout=5)
            self._port = None
        metrics.watch(None)
        if self.provider is not None:
            await asyncio.to_thread(self.provider.shutdown)
            self.provider = None
        metrics.use(None)


async def _sample(backlog: Backlog) -> None:
    while True:
        try:
            pending, oldest = await backlog()
            metrics.outbox_sampled(pending, oldest)
        except Exception:  # a sample missed is a stale gauge, never a failing gateway
            log.warning("metrics: the outbox could not be sampled", exc_info=True)
        await asyncio.sleep(SAMPLE_EVERY)
