"""What is checked before the gateway serves: a configuration that cannot work stops the start with one
line naming the setting (the `memfed` command exits 2), and a provider that does not answer is warned
about once and does not stop it.

`preflight` needs nothing but the configuration and the environment; `check_providers` (for `memfed
serve`, before the server starts) opens every provider once, so an adapter's refusal of its own options
is said the same way, asks each one that can be asked whether it answers, and closes them again.
"""

from __future__ import annotations

import asyncio
import logging
import os

import httpx

import adapters
from adapters.base import ProviderError, ProviderUnauthorized
from gateway.base.config import Config, ConfigError
from gateway.federation.providers import Providers

log = logging.getLogger("memfed.startup")


def preflight(config: Config) -> None:
    """Refuse an unknown adapter and a key variable that is not set, naming the provider."""
    known = frozenset(adapters.REGISTRY)
    for name, provider in config.providers.items():
        if provider.adapter not in known:
            raise ConfigError(f"providers.{name}.adapter: unknown adapter {provider.adapter!r} "
                              f"(memfed has {', '.join(sorted(known))})")
        if provider.api_key_env and not os.environ.get(provider.api_key_env):
            raise ConfigError(f"providers.{name}.api_key_env: the environment variable {provider.api_key_env} "
                              "is not set (it must hold the provider's key)")


async def probe(providers: Providers) -> dict[str, str]:
    """Ask every provider that can be asked whether it answers; warn once for each that does not.
    Returns provider name -> the reason it did not answer (nothing for those that did)."""

    async def ask(name: str) -> str | None:
        handle = providers.handles[name]
        answers = getattr(handle.provider, "probe", None)
        if answers is None:
            return None
        try:
            await handle.call_without_breaker(lambda p: answers())
        except ProviderUnauthorized:
            log.warning("provider %s refused memfed's credential at start: check the key in the environment "
                        "variable %s; memfed starts, and calls to it fail until that is fixed",
                        name, handle.config.api_key_env)
            return "unauthorized"
        except ProviderError as exc:
            log.warning("provider %s did not answer at start (%s): memfed starts anyway, and calls to it "
                        "degrade until it answers", name, exc.reason)
            return exc.reason
        return None

    names = list(providers.handles)
    reasons = await asyncio.gather(*(ask(n) for n in names))
    return {name: reason for name, reason in zip(names, reasons, strict=True) if reason is not None}


def warn_unshared_default(config: Config) -> bool:
    """State on PostgreSQL is how several instances run, and the embedded SQLite provider is one
    instance's file: a new root landing there by default would be invisible to the others, so say so
    once at start (the operator may mean one instance; nothing is refused). True when it warned."""
    default = config.providers.get(config.default_provider)
    if default is None or default.adapter != "local" or not config.database_url().startswith("postgresql"):
        return False
    log.warning("the state is on PostgreSQL but [default] provider %s is the SQLite file in this instance's "
                "data directory: other instances will not see records of memories on it; for several "
                "instances name a provider with adapter = \"postgres\" (README: which providers several "
                "instances can share)", config.default_provider)
    return True


def check_providers(config: Config) -> dict[str, str]:
    """`preflight`, then open every provider, probe it and close it, on a loop of its own (the server's
    loop is not running yet). A ConfigError from any of it stops the start."""
    preflight(config)

    async def run() -> dict[str, str]:
        providers = await Providers.open(config, httpx.AsyncClient(timeout=httpx.Timeout(10.0)))
        try:
            return await probe(providers)
        finally:
            await providers.close()

    return asyncio.run(run())
