"""The configured providers, each behind a timeout, a gate (concurrency bound) and a circuit breaker.

Every call the gateway makes to an adapter goes through `ProviderHandle.call`, so the rules live in one
place. A call first waits at the provider's gate (gateway/federation/breaker.py), then runs under the
provider's `timeout`, which measures the vendor's own time: what an adapter marks off the clock
(adapters/pace.py: its own pool's slots, a caller's statement budget) is not counted. All of it, the
waits, the call and a read's one retry, fits in the caller's deadline (a recall's), or else in the
timeout plus `[limits] queue_seconds`.

Only the vendor's faults reach the breaker: a call that used its whole timeout, an unavailable or
rate-limited answer. A call cut by its caller's deadline, or one that waited too long for a slot, is
`Missed` (`deadline`, `busy`) and counted by nobody; a refusal or an unsupported operation is an answer.
A read that fails is retried once, within the deadline, when the gate still admits it; a retry the
breaker turns away reports the first failure (a failed probe is `timeout` or `unavailable`, never
`circuit_open`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

import adapters
from adapters import pace
from adapters.base import (
    Capabilities,
    Provider,
    ProviderError,
    ProviderRateLimited,
    ProviderTimeout,
    ProviderUnauthorized,
    ProviderUnavailable,
)
from gateway.base.config import Config, ConfigError, ProviderConfig
from gateway.federation.breaker import Breaker, CircuitOpen, Gate
from gateway.federation.call_stats import CallStats
from gateway.state.private_files import private_dir
from gateway.telemetry import metrics, tracer

log = logging.getLogger("memfed.providers")
T = TypeVar("T")


class Missed(ProviderError):
    """A call that did not make it in the time its caller gave, through no fault of the vendor: its
    deadline passed (`deadline`: a recall's), or it waited for a slot longer than the queue allows
    (`busy`). Never counted by the breaker."""

    def __init__(self, reason: str, message: str, *, maybe_applied: bool) -> None:
        super().__init__(message, maybe_applied=maybe_applied)
        self.reason = reason


class ProviderHandle:
    def __init__(self, config: ProviderConfig, provider: Provider, *, queue_seconds: float = 5.0) -> None:
        self.name = config.name
        self.config = config
        self.provider = provider
        self.breaker = Breaker(config.failure_threshold, config.reset_after)
        self.gate = Gate(config.name, self.breaker, config.concurrency)
        self.queue_seconds = queue_seconds
        self._credential_refused = False  # said once in the log until a call succeeds again
        self.recent = CallStats()

    def capabilities(self) -> Capabilities:
        """Asked of the adapter each time, not kept from the start: a vendor may report at run time that it
        answers a signal by emulation (the SaaS API with its vector search off), and the capability
        document and the recall's `degraded` follow it."""
        return self.provider.capabilities()

    async def call(
        self, fn: Callable[[Provider], Awaitable[T]], *, read: bool, seconds: float | None = None,
        deadline: float | None = None,
    ) -> T:
        """`fn(provider)` under the rules above. `deadline` is a loop time everything must fit in."""
        with tracer.start_as_current_span(f"provider {self.name}") as span:
            span.set_attribute("memfed.provider", self.name)
            span.set_attribute("memfed.adapter", self.config.adapter)
            span.set_attribute("memfed.read", read)
            started = time.perf_counter()
            try:
                result = await self._call(fn, read=read, seconds=seconds, deadline=deadline)
            except ProviderError as exc:
                span.set_attribute("memfed.outcome", exc.reason)
                self.recent.note((time.perf_counter() - started) * 1000, exc.reason)
                metrics.provider_call(self.name, exc.reason, read, time.perf_counter() - started)
                self._note_refused_credential(exc)
                raise
            self.recent.note((time.perf_counter() - started) * 1000, "ok")
            span.set_attribute("memfed.outcome", "ok")
            metrics.provider_call(self.name, "ok", read, time.perf_counter() - started)
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
        """A call that says nothing of the provider's health (counting records): through the gate and
        under the timeout, never retried, never counted by the breaker, and not made at all while the
        breaker is not closed (it must not take the one probe an open breaker lets through)."""
        timeout = seconds or self.config.timeout
        try:
            async with asyncio.timeout(timeout + self.queue_seconds):
                await self.gate.enter(health=False)
        except TimeoutError as exc:
            raise Missed("busy", f"provider {self.name} had no free slot", maybe_applied=False) from exc
        try:
            async with asyncio.timeout(timeout):
                return await fn(self.provider)
        except TimeoutError as exc:
            raise ProviderTimeout(f"provider {self.name} did not answer in time") from exc
        finally:
            self.gate.leave()

    async def _call(self, fn: Callable[[Provider], Awaitable[T]], *, read: bool, seconds: float | None,
                    deadline: float | None) -> T:
        loop = asyncio.get_running_loop()
        timeout = seconds or self.config.timeout
        fault: ProviderError | None = None
        for _ in range(2 if read else 1):
            outer = deadline if deadline is not None else loop.time() + timeout + self.queue_seconds
            if fault is not None and outer - loop.time() < timeout:
                break  # a retry is made only when a whole call still fits in the deadline
            try:
                return await self._attempt(fn, timeout, outer, "deadline" if deadline is not None else "busy")
            except (CircuitOpen, Missed):
                if fault is not None:
                    raise fault from None  # the first failure (it may have opened the breaker) is the cause
                raise
            except (ProviderRateLimited, ProviderUnauthorized):
                raise  # retrying would not help: the vendor said wait, or refused memfed's key
            except (ProviderTimeout, ProviderUnavailable) as exc:
                fault = exc
        assert fault is not None  # the loop returns, raises, or leaves with the failure it had
        raise fault

    async def _attempt(self, fn: Callable[[Provider], Awaitable[T]], seconds: float, outer: float,
                       missed: str) -> T:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout_at(outer):
                await self.gate.enter()
        except TimeoutError as exc:
            raise Missed(missed, f"provider {self.name}: no free slot in time", maybe_applied=False) from exc
        started = loop.time()
        step = pace.Pace(None, outer)
        token = pace.enter(step)
        try:
            async with asyncio.timeout_at(min(started + seconds, outer)) as clock:
                step.clock = clock
                result = await fn(self.provider)
        except TimeoutError as exc:
            vendor_seconds = loop.time() - started - step.off
            if step.cut_while is None and vendor_seconds >= seconds * 0.99:
                self.breaker.failed()
                raise ProviderTimeout(f"provider {self.name} did not answer in time") from exc
            self.breaker.released()
            raise Missed(missed, f"provider {self.name}: cut short by the caller's time",
                         maybe_applied=step.cut_while != "slot") from exc
        except ProviderRateLimited as exc:
            self.breaker.failed(exc.retry_after)
            raise
        except (ProviderTimeout, ProviderUnavailable):
            self.breaker.failed()
            raise
        except ProviderError:
            self.breaker.succeeded()  # a refusal or an unsupported operation is an answer
            raise
        except BaseException:
            self.breaker.released()  # the caller went away, or an adapter bug: nothing said of the vendor
            raise
        else:
            self.breaker.succeeded()
            return result
        finally:
            pace.leave(token)
            self.gate.leave()

    def document(self) -> dict[str, Any]:
        doc = self.capabilities().document(self.name)
        doc["x.memfed"].update({
            "adapter": self.config.adapter,
            "breaker": self.breaker.document(),
            "recent": self.recent.document(),
            "timeout_seconds": self.config.timeout,
            "concurrency": self.config.concurrency,
            "in_flight": self.gate.in_flight,
        })
        # What an adapter learns of its vendor only once connected (a plugin's declared types, scopes,
        # ratification and hook points), under x.memfed.
        extra = getattr(self.provider, "document_extra", None)
        if callable(extra):
            doc["x.memfed"].update(extra())
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
        if client is None:
            # Building the client loads the CA bundle into a TLS context (~25 ms of CPU): off the event loop,
            # which a big tree's load is already keeping busy.
            client = await asyncio.to_thread(
                httpx.AsyncClient, timeout=httpx.Timeout(10.0), limits=httpx.Limits(max_connections=100))
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
            handles[name] = ProviderHandle(pconf, provider, queue_seconds=config.limits.queue_seconds)
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
