"""The gateway's metrics (OpenTelemetry instruments) and the calls that record them.

Every label is a name memfed chose or an operator configured: a route template (never the path, which
holds ids), a method, a status, a provider's configured name, an outcome word. Nothing a caller or a
vendor wrote, no key, no member, no memory: a metric is scraped by systems a secret must not reach, and
an unbounded label would grow the series without end.

Until `use` is given a meter provider (memfed serve with `[telemetry] metrics` set) the instruments are
the API's no-op ones, so the calls cost next to nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, NoOpMeterProvider, Observation

from gateway import __version__
from gateway.base.clock import now_ms
from gateway.telemetry import stall


class Observed(Protocol):
    """What the observed gauges read of the serving app (its services, gateway/services.py); telemetry
    knows nothing else of it."""

    def breaker_states(self) -> list[tuple[str, str]]:  # (provider, closed | half_open | open)
        ...

    def audit_backlog(self) -> int: ...

    def tree_size(self) -> int: ...

BREAKER_CODES = {"closed": 0, "half_open": 1, "open": 2}
_SECONDS_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
_FANOUT_BUCKETS = (1, 2, 5, 10, 20, 50, 100, 200, 500, 1000)


class Metrics:
    """The instruments of one meter provider, and what the observed gauges read (the serving services and
    the sampled outbox figures)."""

    def __init__(self, provider: MeterProvider) -> None:
        meter: Meter = provider.get_meter("memfed", __version__)
        self.services: Observed | None = None
        self.outbox: tuple[int, float] = (0, 0.0)  # pending rows, age of the oldest in seconds (sampled)
        self.requests = meter.create_histogram(
            "http.server.request.duration", unit="s", description="HTTP requests by route template and status",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS)
        self.provider_calls = meter.create_histogram(
            "memfed.provider.call.duration", unit="s", description="Provider calls by provider and outcome",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS)
        self.fanout_memories = meter.create_histogram(
            "memfed.recall.fanout.memories", unit="{memory}", description="Memories one recall searched",
            explicit_bucket_boundaries_advisory=_FANOUT_BUCKETS)
        self.fanout_providers = meter.create_histogram(
            "memfed.recall.fanout.providers", unit="{provider}", description="Providers one recall asked",
            explicit_bucket_boundaries_advisory=_FANOUT_BUCKETS)
        self.deadline_misses = meter.create_counter(
            "memfed.recall.deadline.misses", unit="{call}",
            description="Recall calls to a provider that did not answer in time")
        self.coherence_lag = meter.create_histogram(
            "memfed.coherence.lag", unit="s",
            description="From a change written by any instance to this instance applying it",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS)
        self.audit_flushes = meter.create_histogram(
            "memfed.audit.flush.duration", unit="s", description="Committing the journal's batch to the log",
            explicit_bucket_boundaries_advisory=_SECONDS_BUCKETS)
        meter.create_observable_gauge("memfed.provider.breaker.state", [self._breakers], unit="",
                                      description="Each provider's breaker: 0 closed, 1 half open, 2 open")
        meter.create_observable_gauge("memfed.audit.backlog", [self._audit_backlog], unit="{entry}",
                                      description="Decisions journaled and not yet committed to the log")
        meter.create_observable_gauge("memfed.outbox.backlog", [self._outbox_backlog], unit="{row}",
                                      description="Observe outbox rows not yet delivered (sampled)")
        meter.create_observable_gauge("memfed.outbox.oldest.age", [self._outbox_age], unit="s",
                                      description="Age of the oldest undelivered outbox row (sampled)")
        meter.create_observable_gauge("memfed.tree.memories", [self._tree_size], unit="{memory}",
                                      description="Memories in the tree this gateway holds")
        meter.create_observable_gauge("memfed.loop.stall.max", [self._stall_max], unit="s",
                                      description="Longest the event loop was held, since the start")
        meter.create_observable_gauge("memfed.loop.stall.recent", [self._stall_recent], unit="s",
                                      description="Longest the event loop was held in the last 10 seconds")
        meter.create_observable_gauge("memfed.loop.stalls", [self._stalls], unit="{stall}",
                                      description="Times the event loop was held over 20 ms, since the start")

    def _breakers(self, _options: CallbackOptions) -> Iterable[Observation]:
        if self.services is None:
            return []
        return [Observation(BREAKER_CODES.get(state, 2), {"provider": name})
                for name, state in self.services.breaker_states()]

    def _audit_backlog(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [] if self.services is None else [Observation(self.services.audit_backlog())]

    def _outbox_backlog(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [] if self.services is None else [Observation(self.outbox[0])]

    def _outbox_age(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [] if self.services is None else [Observation(self.outbox[1])]

    def _tree_size(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [] if self.services is None else [Observation(self.services.tree_size())]

    def _stall_max(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [] if (watch := stall.current()) is None else [Observation(watch.longest)]

    def _stall_recent(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [] if (watch := stall.current()) is None else [Observation(watch.recent())]

    def _stalls(self, _options: CallbackOptions) -> Iterable[Observation]:
        return [] if (watch := stall.current()) is None else [Observation(watch.stalls)]


_current = Metrics(NoOpMeterProvider())


def use(provider: MeterProvider | None) -> Metrics:
    """Record into `provider` from now on (None: back to the no-op instruments)."""
    global _current
    _current = Metrics(provider or NoOpMeterProvider())
    return _current


def current() -> Metrics:
    return _current


def watch(services: Observed | None) -> None:
    """The services the observed gauges read (None once they are closed)."""
    _current.services = services


def request(route: str, method: str, status: int, seconds: float) -> None:
    _current.requests.record(seconds, {"http.route": route, "http.request.method": method,
                                       "http.response.status_code": status})


def provider_call(provider: str, outcome: str, read: bool, seconds: float) -> None:
    _current.provider_calls.record(seconds, {"provider": provider, "outcome": outcome, "read": read})


def recall_fanout(memories: int, providers: int) -> None:
    _current.fanout_memories.record(memories)
    _current.fanout_providers.record(providers)


def coherence_lag(seconds: float) -> None:
    _current.coherence_lag.record(max(0.0, seconds))


def deadline_missed(provider: str) -> None:
    _current.deadline_misses.add(1, {"provider": provider})


def audit_flushed(seconds: float) -> None:
    _current.audit_flushes.record(seconds)


def outbox_sampled(pending: int, oldest_created_ms: int | None) -> None:
    age = max(0.0, (now_ms() - oldest_created_ms) / 1000) if oldest_created_ms is not None else 0.0
    _current.outbox = (pending, age)
