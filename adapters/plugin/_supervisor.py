"""Keeping one plugin running: start, Configure, restart after it dies, stop.

A call never waits for a restart: while the plugin is down it fails at once with ProviderUnavailable
naming the provider (the breaker counts it and reports the provider open), and a restart runs in the
background with a bounded backoff (`backoff` doubling to `backoff_max`). After `max_restarts` failed
starts in a row memfed stops trying and every call says why in one line; a successful start resets the
count. The plugin is configured again after every start, since a new process knows nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from adapters.base import ProviderUnavailable
from adapters.plugin._process import Launch, PluginProcess
from adapters.plugin.wire import Memory

log = logging.getLogger("memfed.adapters.plugin")


@dataclass(frozen=True)
class Restart:
    max_restarts: int = 5
    backoff: float = 0.5
    backoff_max: float = 30.0


class Supervisor:
    def __init__(self, launch: Launch, restart: Restart,
                 configure: Callable[[PluginProcess], Awaitable[None]]) -> None:
        self.launch = launch
        self.restart = restart
        self._configure = configure
        self.plugin: PluginProcess | None = None
        self.restarts = 0  # restarts done since memfed started the provider
        self._failures = 0  # failed starts in a row
        self._down: str | None = None  # why the plugin is not there, one line
        self._task: asyncio.Task[None] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._closed = False

    async def start(self) -> PluginProcess:
        """The first start: its failure is the provider's failure to open (PluginStartError)."""
        plugin = await self._start_once()
        self._up(plugin)
        return plugin

    async def _start_once(self) -> PluginProcess:
        plugin = await PluginProcess.start(self.launch)
        try:
            await self._configure(plugin)
        except BaseException:
            await plugin.kill()
            raise
        return plugin

    def _up(self, plugin: PluginProcess) -> None:
        self.plugin, self._down, self._failures = plugin, None, 0
        self._watch = asyncio.ensure_future(self._watch_exit(plugin))

    async def _watch_exit(self, plugin: PluginProcess) -> None:
        code = await plugin.proc.wait()
        if self._closed or plugin is not self.plugin:
            return
        log.warning("plugin provider %s exited (code %s); restarting", self.launch.name, code)
        self._lost(f"plugin provider {self.launch.name} exited (code {code})")

    def _lost(self, why: str) -> None:
        self._down = why
        if self._task is None or self._task.done():
            self._task = asyncio.ensure_future(self._restart_loop())

    async def _restart_loop(self) -> None:
        old, self.plugin = self.plugin, None
        if old is not None:
            await old.kill()
        delay = self.restart.backoff
        while not self._closed:
            if self._failures >= self.restart.max_restarts:
                self._down = (f"plugin provider {self.launch.name} failed to restart {self._failures} times in a"
                              f" row and is not restarted again; last: {self._down}")
                log.error("%s", self._down)
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, self.restart.backoff_max)
            try:
                plugin = await self._start_once()
            except Exception as exc:  # any failed start counts towards giving up; none may end the loop unsaid
                self._failures += 1
                self._down = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
                continue
            if self._closed:
                await plugin.kill()
                return
            self.restarts += 1
            self._up(plugin)
            log.info("plugin provider %s restarted", self.launch.name)
            return

    def memory(self) -> tuple[PluginProcess, Memory]:
        """The running plugin and its memory service, or ProviderUnavailable at once saying why not."""
        plugin = self.plugin
        if plugin is not None and not plugin.alive and self._down is None:
            self._lost(f"plugin provider {self.launch.name} exited (code {plugin.proc.returncode})")
        if self._down is not None or plugin is None or plugin.memory is None:
            raise ProviderUnavailable(self._down or f"plugin provider {self.launch.name} is not running",
                                      maybe_applied=False)
        return plugin, plugin.memory

    def state(self) -> str:
        return "running" if self._down is None and self.plugin is not None else (self._down or "stopped")

    async def close(self) -> None:
        self._closed = True
        for task in (self._task, self._watch):
            if task is not None and not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self.plugin is not None:
            await self.plugin.stop()
            self.plugin = None
