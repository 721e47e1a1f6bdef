"""The configured providers, each behind a timeout, a concurrency bound and a circuit breaker.

Every call the gateway makes to an adapter goes through `ProviderHandle.call`, so the rules live in one
place: a call that outlives its timeout is a `ProviderTimeout`; a provider that keeps failing is not
called again until its breaker lets one probe through; a read may be retried once, a write never.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx

import adapters
from adapters.base import (
    Capabilities,
    Provider,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from gateway.config import Config, ConfigError, ProviderConfig
from gateway.federation.call_stats import CallStats
from gateway.state.private_files import private_dir
from gateway.telemetry import tracer

log = logging.getLogger("memfed.providers")
T = TypeVar("T")


class CircuitOpen(ProviderUnavailable):
    reason = "circuit_open"
    maybe_applied = False  # the call was never made


@dataclass
class Breaker:
    """Closed until `threshold` failures in a row; then open for `reset_after` s; then one probe."""

    threshold: int
    reset_after: float
    failures: int = 0
    opened_at: float | None = None
    open_for: float = 0.0
    probing: bool = False

    @property
    def state(self) -> str:
        if self.opened_at is None:
            return "closed"
        if time.monotonic() - self.opened_at >= self.open_for:
            return "half_open"
        return "open"

    def admit(self) -> bool:
        state = self.state
        if state == "closed":
            return True
        if state == "half_open" and not self.probing:
            self.probing = True
            return True
        return False

    def succeeded(self) -> None:
        self.failures = 0
        self.opened_at = None
        self.probing = False

    def failed(self, retry_after: float | None = None) -> None:
        self.failures += 1
        self.probing = False
        if retry_after is not None or self.failures >= self.threshold or self.opened_at is not None:
            self.opened_at = time.monotonic()
            self.open_for = max(retry_after or 0.0, self.reset_after if retry_after is None else 0.0)

    def document(self) -> dict[str, Any]:
        return {"state": self.state, "consecutive_failures": self.failures}


class ProviderHandle:
    def __init__(self, config: ProviderConfig, provider: Provider) -> None:
        self.name = config.name
        self.config = config
        self.provider = provider
        self.breaker = Breaker(config.failure_threshold, config.reset_after)
        self.semaphore = asyncio.Semaphore(config.concurrency)
        self._capabilities = provider.capabilities()
        self._credential_refused = False  # said once in the log until a call succeeds again
        self.recent = CallStats()

    def capabilities(self) -> Capabilities:
        return self._capabilities

    async def call(
        self, fn: Callable[[Provider], Awaitable[T]], *, read: bool, seconds: float | None = None
    ) -> T:
        with tracer.start_as_current_span(f"provider {self.name}") as span:
            span.set_attribute("memfed.provider", self.name)
            span.set_attribute("memfed.adapter", self.config.adapter)
            span.set_attribute("memfed.read", read)
            started = time.perf_counter()
            try:
                result = await self._call(fn, read=read, seconds=seconds)
            except ProviderError as exc:
                span.set_attribute("memfed.outcome", exc.reason)
                self.recent.note((time.perf_counter() - started) * 1000, exc.reason)
                self._note_refused_credential(exc)
                raise
            self.recent.note((time.perf_counter() - started) * 1000, "ok")
            span.set_attribute("memfed.outcome", "ok")
            self._credential_refused = False
            return result

    def _note_refused_credential(self, exc: ProviderError) -> None:
        """A vendor that refuses memfed's key is memfed's configuration problem: said once, by name."""
        if isinstance(exc, ProviderUnauthorized) and not self._credential_refused:
            self._credential_refused = True
            where = (f"the key in the environment variable {self.config.api_key_env}" if self.config.api_key_env
                     else "no key (api_key_env is not set for it)")
            log.error("provider %s refused memfed's credential: memfed sent %s; every call to it fails until "
                      "that is fixed", self.name, where)

    async def call_without_breaker(self, fn: Callable[[Provider], Awaitable[T]], *, seconds: float | None = None) -> T:
        """A call that says nothing of the provider's health (counting records): under the concurrency
        bound and the timeout, never retried, never counted by the breaker, and not made at all while the
        breaker is not closed (it must not take the one probe an open breaker lets through)."""
        if self.breaker.state != "closed":
            raise CircuitOpen(f"provider {self.name} is resting after repeated failures")
        try:
            async with asyncio.timeout(seconds or self.config.timeout):
                async with self.semaphore:
                    return await fn(self.provider)
        except TimeoutError as exc:
            raise ProviderTimeout(f"provider {self.name} did not answer in time") from exc

    async def _call(self, fn: Callable[[Provider], Awaitable[T]], *, read: bool, seconds: float | None) -> T:
        attempts = 2 if read else 1
        for attempt in range(attempts):
            if not self.breaker.admit():
                raise CircuitOpen(f"provider {self.name} is resting after repeated failures")
            try:
                async with self.semaphore:
                    async with asyncio.timeout(seconds or self.config.timeout):
                        result = await fn(self.provider)
            except TimeoutError as exc:
                self.breaker.failed()
                if attempt + 1 == attempts:
                    raise ProviderTimeout(f"provider {self.name} did not answer in time") from exc
            except ProviderRateLimited as exc:
                self.breaker.failed(exc.retry_after)
                raise
            except (ProviderTimeout, ProviderUnavailable):
                self.breaker.failed()
                if attempt + 1 == attempts:
                    raise
            except ProviderError:
                # A refusal or an unsupported operation is an answer, not a sign of ill health.
                self.breaker.succeeded()
                raise
            else:
                self.breaker.succeeded()
                return result
        raise ProviderUnavailable(f"provider {self.name} failed")  # unreachable: the loop returns or raises

    def document(self) -> dict[str, Any]:
        doc = self._capabilities.document(self.name)
        doc["x.memfed"].update({
            "adapter": self.config.adapter,
            "breaker": self.breaker.document(),
            "recent": self.recent.document(),
            "timeout_seconds": self.config.timeout,
            "concurrency": self.config.concurrency,
        })
        return doc


async def _close_opened(handles: Mapping[str, ProviderHandle]) -> None:
    """Close what a failed open had opened: an embedded provider's connection thread left open would keep
    the process from exiting after it said what was wrong."""
    for handle in handles.values():
        with contextlib.suppress(Exception):
            await handle.provider.close()


class Providers:
    def __init__(self, handles: Mapping[str, ProviderHandle], default: str, client: httpx.AsyncClient) -> None:
        self.handles = dict(handles)
        self.default = default
        self.client = client

    @classmethod
    async def open(cls, config: Config, client: httpx.AsyncClient | None = None) -> Providers:
        client = client or httpx.AsyncClient(timeout=httpx.Timeout(10.0), limits=httpx.Limits(max_connections=100))
        handles: dict[str, ProviderHandle] = {}
        for name, pconf in config.providers.items():
            try:
                factory = adapters.factory(pconf.adapter)
            except adapters.UnknownAdapter:
                await _close_opened(handles)
                raise ConfigError(f"providers.{name}.adapter: unknown adapter {pconf.adapter!r}") from None
            options = dict(pconf.options)
            if pconf.base_url:
                options["base_url"] = pconf.base_url
            options.setdefault("timeout", pconf.timeout)
            if pconf.adapter == "postgres":
                # The shared embedded provider keeps its records beside the gateway's state by default.
                options.setdefault("url", config.database_url())
            data_dir = private_dir(Path(config.data_dir) / "providers" / name)
            try:
                provider = await factory(options, client=client, data_dir=data_dir, api_key=pconf.api_key())
            except ValueError as exc:  # the adapter refused its options: one line naming the provider
                await _close_opened(handles)
                if isinstance(exc, ConfigError):
                    raise
                raise ConfigError(f"providers.{name}: {exc}") from exc
            handles[name] = ProviderHandle(pconf, provider)
        return cls(handles, config.default_provider, client)

    def get(self, name: str) -> ProviderHandle | None:
        return self.handles.get(name)

    def __getitem__(self, name: str) -> ProviderHandle:
        return self.handles[name]

    async def close(self) -> None:
        for handle in self.handles.values():
            try:
                await handle.provider.close()
            except Exception:  # closing must not stop the others from closing
                log.exception("closing provider %s failed", handle.name)
        await self.client.aclose()
