"""A plugin provider's `[providers.NAME]` table, read once at start, and what is checked against the
plugin's own declarations after every start (types and scopes it supports, its ConfigSchema).

Options: `command` (required), `env` (names passed from memfed's environment), `config` (given to
Configure after checking it against the plugin's ConfigSchema), `types` (memfed type = MemoryType name),
`scope` and `scopes` (the MemoryScope records are written with), `start_timeout`, `timeout`,
`restart = { max_restarts, backoff, backoff_max }`.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from adapters.base import ProviderError, Unsupported
from adapters.plugin._config import ConfigRefused, configure_request
from adapters.plugin._pb import memory_pb2 as pb
from adapters.plugin._process import Launch, PluginProcess, command_of
from adapters.plugin._supervisor import Restart

OPTIONS = {"command", "env", "config", "types", "scope", "scopes", "start_timeout", "timeout", "restart",
           "base_url"}
# The protocol's four types by what they hold (taxonomy): who the user is, corrections, ongoing work,
# pointers elsewhere. memfed's core types go to the nearest; `types` overrides.
DEFAULT_TYPES = {"fact": "user", "note": "project", "procedure": "feedback", "episode": "project",
                 "link": "reference", "entity": "reference"}


@dataclass(frozen=True)
class Settings:
    name: str
    launch: Launch
    restart: Restart
    types: Mapping[str, int]  # memfed type -> MemoryType
    scope: int  # MemoryScope
    scopes: Mapping[str, int]  # memfed type -> MemoryScope, where it differs from `scope`
    config: Mapping[str, Any]


def _enum(kind: Any, prefix: str, name: object, what: str) -> int:
    try:
        return int(kind.Value(f"{prefix}{str(name).upper()}"))
    except ValueError:
        raise ValueError(f"{what}: {name!r} is not a {prefix.rstrip('_').lower()}") from None


def parse(options: Mapping[str, Any], name: str) -> Settings:
    """The settings, or ValueError naming the option (the gateway adds the provider's name)."""
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise ValueError(f"unknown plugin options: {', '.join(unknown)}")
    if options.get("base_url"):
        raise ValueError("a plugin is launched by `command`, it has no base_url")
    env = options.get("env", [])
    if not isinstance(env, list) or not all(isinstance(v, str) and v for v in env):
        raise ValueError("plugin option 'env' must be a list of environment variable names")
    config = options.get("config", {})
    if not isinstance(config, Mapping):
        raise ValueError("plugin option 'config' must be a table")
    for table in ("types", "scopes"):
        if not isinstance(options.get(table, {}), Mapping):
            raise ValueError(f"plugin option {table!r} must be a table of memfed type = name")
    types = {**DEFAULT_TYPES, **dict(options.get("types", {}))}
    restart = options.get("restart", {})
    if not isinstance(restart, Mapping) or set(restart) - {"max_restarts", "backoff", "backoff_max"}:
        raise ValueError("plugin option 'restart' takes max_restarts, backoff, backoff_max")
    return Settings(
        name=name,
        launch=Launch(name=name, command=command_of(options.get("command"), name), env_names=tuple(env),
                      start_timeout=float(options.get("start_timeout", 30.0)),
                      call_timeout=float(options.get("timeout", 2.0))),
        restart=Restart(max_restarts=int(restart.get("max_restarts", 5)), backoff=float(restart.get("backoff", 0.5)),
                        backoff_max=float(restart.get("backoff_max", 30.0))),
        types={t: _enum(pb.MemoryType, "MEMORY_TYPE_", v, f"types.{t}") for t, v in types.items()},
        scope=_enum(pb.MemoryScope, "MEMORY_SCOPE_", options.get("scope", "project"), "scope"),
        scopes={t: _enum(pb.MemoryScope, "MEMORY_SCOPE_", v, f"scopes.{t}")
                for t, v in dict(options.get("scopes", {})).items()},
        config=dict(config),
    )


def configurer(settings: Settings) -> Callable[[PluginProcess], Awaitable[None]]:
    """What runs after every start: the mapping checked against what the plugin declared, then Configure,
    then a first ListRecords (a plugin of the first generation, 3b2c109, has none, and without it no
    memory can be read back: refused at start rather than on the first read)."""
    name = settings.name

    async def configure(plugin: PluginProcess) -> None:
        assert plugin.memory is not None
        caps = plugin.capabilities
        for memfed_type, plugin_type in settings.types.items():
            if plugin_type not in caps.supported_types:
                raise ValueError(f"plugin provider {name}: types.{memfed_type} maps onto "
                                 f"{pb.MemoryType.Name(plugin_type)}, which the plugin does not support")
        for where, scope in [("scope", settings.scope), *((f"scopes.{t}", s) for t, s in settings.scopes.items())]:
            if scope not in caps.supported_scopes:
                raise ValueError(f"plugin provider {name}: {where} is {pb.MemoryScope.Name(scope)}, "
                                 "which the plugin does not support")
        try:
            request = configure_request(caps.config_schema, settings.config, os.environ)
        except ConfigRefused as exc:
            raise ValueError(f"plugin provider {name}: {exc}") from None
        try:
            await plugin.memory.call("Configure", request, pb.ConfigureResponse)
            await plugin.memory.call("ListRecords", pb.ListRecordsRequest(page_size=1), pb.ListRecordsResponse)
        except Unsupported as exc:
            raise ValueError(f"plugin provider {name} serves no ListRecords/GetRecord (a plugin of the "
                             "first protocol generation), which memfed needs to read records back") from exc
        except ProviderError as exc:
            raise ValueError(str(exc)) from None

    return configure
