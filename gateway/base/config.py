"""The gateway's settings: a TOML file read into frozen dataclasses.

Secrets are never written in the file: a provider names the environment variable that holds its key
(`api_key_env`), and the value is read from the environment when the provider is opened.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_PROVIDER = "local"


class ConfigError(ValueError):
    """The configuration cannot be used; the message names the setting."""


@dataclass(frozen=True)
class ProviderConfig:
    name: str
    adapter: str
    base_url: str | None = None
    api_key_env: str | None = None
    timeout: float = 2.0
    concurrency: int = 8
    failure_threshold: int = 5
    reset_after: float = 30.0
    # Seconds after a write's outcome became unknown (its call failed once it may have reached the vendor)
    # during which the vendor may still apply it: not finding the write before then does not mean it was
    # not made, so it is not sent again until then. None: 0 for the embedded adapters, whose writes settle
    # when its call ends, and 30 for the others.
    write_settle: float | None = None
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def embedded(self) -> bool:
        """Whether the provider is memfed's own store (SQLite or PostgreSQL), not a vendor's service."""
        return self.adapter in ("local", "postgres")

    def settle_seconds(self) -> float:
        if self.write_settle is not None:
            return self.write_settle
        return 0.0 if self.embedded else 30.0

    def api_key(self) -> str | None:
        if not self.api_key_env:
            return None
        return os.environ.get(self.api_key_env)


@dataclass(frozen=True)
class Limits:
    """`[limits]`: what one member may ask at once, and how long a call waits for a provider's slot.

    `member_concurrency` requests in flight and `member_rate` requests per second (with bursts of
    `member_burst`) per member, administrators excepted; 0 is no limit. Past either the answer is 429
    `rate_limit_error` with Retry-After. `queue_seconds` is the longest a provider call outside a recall
    waits for a slot (the provider's concurrency bound, an adapter's own pool) before it is answered 503
    `busy`; a recall waits only within its deadline."""

    member_concurrency: int = 0
    member_rate: float = 0.0
    member_burst: int = 0
    queue_seconds: float = 5.0

    def burst(self) -> int:
        """Requests one member may make at once above the rate: `member_burst`, else a second's worth."""
        return self.member_burst or max(1, int(self.member_rate))


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path(".memfed")
    state_url: str | None = None
    state_schema: str | None = None
    default_provider: str = DEFAULT_PROVIDER
    providers: Mapping[str, ProviderConfig] = field(default_factory=dict)
    recall_cap: int = 200
    recall_default_limit: int = 10
    recall_max_limit: int = 200
    # The most a recall takes (s): waits for providers' slots, their calls and a retry all fit in it, and
    # what missed it is in `degraded`. A request's `timeout` may shorten it.
    recall_deadline: float = 2.5
    limits: Limits = field(default_factory=Limits)
    recall_scoring: str = "uniform"
    file_max_bytes: int = 10 * 1024 * 1024
    audit_enabled: bool = True
    audit_flush_ms: int = 1000
    audit_batch_size: int = 5000
    audit_seal_env: str | None = None
    oidc: Mapping[str, Any] | None = None
    idempotency_hours: int = 24
    # How long a gateway's claim on a write outlives the gateway if it dies holding it: an Idempotency-Key
    # (renewed while its request runs) and an observe outbox row being sent.
    write_lease_seconds: float = 15.0
    telemetry_exporter: str = "none"
    console_enabled: bool = True
    telemetry_metrics: tuple[str, ...] = ()  # "prometheus" (served at /metrics), "otlp" (sent to otlp_endpoint)
    metrics_port: int | None = None  # /metrics on a port of its own instead of the gateway's
    otlp_endpoint: str | None = None  # a collector's base URL (OTLP over HTTP): /v1/traces, /v1/metrics
    # After the first SIGTERM, how long requests already taken may run before they are cancelled.
    grace_seconds: float = 30.0

    def database_url(self) -> str:
        """SQLAlchemy async URL of the state store; `postgresql://` is given the asyncpg driver."""
        url = self.state_url or f"sqlite+aiosqlite:///{(self.data_dir / 'state.sqlite3').as_posix()}"
        if url.startswith("postgresql://") or url.startswith("postgres://"):
            url = "postgresql+asyncpg://" + url.split("://", 1)[1]
        elif url.startswith("sqlite:///"):
            url = "sqlite+aiosqlite:///" + url[len("sqlite:///") :]
        return url

    def with_overrides(self, **changes: Any) -> Config:
        values = {k: v for k, v in changes.items() if v is not None}
        return _replace(self, values)


def _replace(config: Config, values: Mapping[str, Any]) -> Config:
    from dataclasses import replace

    return replace(config, **values)


_TOP_KEYS = {
    "server", "state", "recall", "files", "providers", "default", "auth", "audit", "idempotency", "telemetry",
    "console",
    "limits",
}


def load(path: Path | None) -> Config:
    """Read a TOML file (or nothing) into a Config; the embedded provider is always available."""
    raw: dict[str, Any] = {}
    if path is not None:
        try:
            raw = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}") from exc
    return from_mapping(raw)


def _scoring(recall: Mapping[str, Any]) -> str:
    value = recall.get("scoring", "uniform")
    if value not in ("uniform", "rrf"):
        raise ConfigError(f"recall.scoring must be \"uniform\" or \"rrf\", not {value!r}")
    return str(value)


def from_mapping(raw: Mapping[str, Any]) -> Config:
    unknown = set(raw) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"unknown config sections: {', '.join(sorted(unknown))}")
    server = _table(raw, "server")
    state = _table(raw, "state")
    recall = _table(raw, "recall")
    files = _table(raw, "files")
    audit = _table(raw, "audit")
    auth = _table(raw, "auth")
    providers = {DEFAULT_PROVIDER: ProviderConfig(name=DEFAULT_PROVIDER, adapter="local")}
    for name, table in _table(raw, "providers").items():
        providers[name] = _provider(name, table)
    default = _table(raw, "default").get("provider", DEFAULT_PROVIDER)
    if default not in providers:
        raise ConfigError(f"default.provider {default!r} is not a configured provider")
    oidc = auth.get("oidc")
    return Config(
        host=str(server.get("host", "127.0.0.1")),
        port=int(server.get("port", 8080)),
        grace_seconds=_seconds(server, "grace_seconds", 30.0, what="server.grace_seconds", zero=True) or 0.0,
        data_dir=Path(server.get("data_dir", ".memfed")),
        state_url=state.get("url"),
        state_schema=state.get("schema"),
        default_provider=default,
        providers=providers,
        recall_cap=_positive(recall, "cap", 200),
        recall_default_limit=_positive(recall, "default_limit", 10),
        recall_max_limit=_positive(recall, "max_limit", 200),
        recall_deadline=_seconds(recall, "deadline", 2.5, what="recall.deadline") or 2.5,
        limits=_limits(_table(raw, "limits")),
        recall_scoring=_scoring(recall),
        file_max_bytes=_positive(files, "max_bytes", 10 * 1024 * 1024),
        audit_enabled=bool(audit.get("enabled", True)),
        audit_flush_ms=_positive(audit, "flush_ms", 1000),
        audit_batch_size=_positive(audit, "batch_size", 5000),
        audit_seal_env=_env_name(audit, "seal_key_env"),
        oidc=dict(oidc) if isinstance(oidc, Mapping) else None,
        idempotency_hours=_positive(_table(raw, "idempotency"), "keep_hours", 24),
        write_lease_seconds=_seconds(_table(raw, "idempotency"), "lease_seconds", None) or 15.0,
        **_telemetry(_table(raw, "telemetry")),
        console_enabled=bool(_table(raw, "console").get("enabled", True)),
    )


def _telemetry(table: Mapping[str, Any]) -> dict[str, Any]:
    exporter = _choice(table, "exporter", ("none", "console", "otlp"), "none")
    wanted = table.get("metrics", [])
    if isinstance(wanted, str):
        wanted = [] if wanted == "off" else [wanted]
    if not isinstance(wanted, list) or any(w not in ("prometheus", "otlp") for w in wanted):
        raise ConfigError('telemetry.metrics must be "off", "prometheus", "otlp" or a list of those')
    endpoint = table.get("otlp_endpoint")
    if endpoint is not None and (not isinstance(endpoint, str) or not endpoint.startswith(("http://", "https://"))):
        raise ConfigError("telemetry.otlp_endpoint must be an http:// or https:// URL")
    if (exporter == "otlp" or "otlp" in wanted) and not endpoint:
        raise ConfigError("telemetry.otlp_endpoint is required to export by OTLP")
    port = table.get("metrics_port")
    if port is not None and (isinstance(port, bool) or not isinstance(port, int) or not 0 < port < 65536):
        raise ConfigError("telemetry.metrics_port must be a port number")
    return {"telemetry_exporter": exporter, "telemetry_metrics": tuple(dict.fromkeys(wanted)),
            "metrics_port": port, "otlp_endpoint": endpoint.rstrip("/") if endpoint else None}


_LIMIT_KEYS = {"member_concurrency", "member_rate", "member_burst", "queue_seconds"}


def _limits(table: Mapping[str, Any]) -> Limits:
    unknown = set(table) - _LIMIT_KEYS
    if unknown:
        raise ConfigError(f"limits.{sorted(unknown)[0]}: unknown setting")
    return Limits(
        member_concurrency=_count(table, "member_concurrency"),
        member_rate=_rate(table, "member_rate"),
        member_burst=_count(table, "member_burst"),
        queue_seconds=_seconds(table, "queue_seconds", 5.0, what="limits.queue_seconds") or 5.0,
    )


def _rate(table: Mapping[str, Any], key: str) -> float:
    value = table.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
        raise ConfigError(f"limits.{key} must be a number of requests per second, 0 or more (0: no limit)")
    return float(value)


def _count(table: Mapping[str, Any], key: str) -> int:
    value = table.get(key, 0)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"limits.{key} must be a whole number, 0 or more (0: no limit)")
    return value


_PROVIDER_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_PROVIDER_KEYS = {
    "adapter", "base_url", "api_key_env", "timeout", "concurrency", "failure_threshold", "reset_after",
    "write_settle",
}


def _provider(name: str, table: Any) -> ProviderConfig:
    if not isinstance(table, Mapping):
        raise ConfigError(f"providers.{name} must be a table")
    if not _PROVIDER_NAME.fullmatch(name):
        # The name stands in `degraded` entries (provider:NAME:...), whose parts a colon separates.
        raise ConfigError(f"providers.{name!r}: a provider's name is letters, digits, '_', '-' and '.'")
    if "api_key" in table:
        raise ConfigError(f"providers.{name}.api_key: put the key in an environment variable and name it "
                          "with api_key_env")
    adapter = table.get("adapter")
    if not isinstance(adapter, str):
        raise ConfigError(f"providers.{name}.adapter is required")
    options = {k: v for k, v in table.items() if k not in _PROVIDER_KEYS}
    return ProviderConfig(
        name=name,
        adapter=adapter,
        base_url=table.get("base_url"),
        api_key_env=table.get("api_key_env"),
        timeout=float(table.get("timeout", 2.0)),
        concurrency=int(table.get("concurrency", 8)),
        failure_threshold=int(table.get("failure_threshold", 5)),
        reset_after=float(table.get("reset_after", 30.0)),
        write_settle=_seconds(table, "write_settle", None, what=f"providers.{name}.write_settle", zero=True),
        options=options,
    )


def _table(raw: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = raw.get(key, {})
    if not isinstance(value, Mapping):
        raise ConfigError(f"[{key}] must be a table")
    return value


def _choice(table: Mapping[str, Any], key: str, allowed: tuple[str, ...], default: str) -> str:
    value = table.get(key, default)
    if value not in allowed:
        raise ConfigError(f"{key} must be one of {', '.join(allowed)}")
    return str(value)


def _env_name(table: Mapping[str, Any], key: str) -> str | None:
    """The name of an environment variable holding a secret: the secret itself never goes in the file."""
    value = table.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.replace("_", "").isalnum():
        raise ConfigError(f"{key} must name an environment variable (letters, digits, _)")
    return value


def _seconds(table: Mapping[str, Any], key: str, default: float | None, *, what: str | None = None,
             zero: bool = False) -> float | None:
    """A duration in seconds: a number above 0 (or at least 0 with `zero`)."""
    value = table.get(key, default)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or (value == 0 and not zero):
        raise ConfigError(f"{what or key} must be a number of seconds{' (0 or more)' if zero else ' above 0'}")
    return float(value)


def _positive(table: Mapping[str, Any], key: str, default: int) -> int:
    value = table.get(key, default)
    if not isinstance(value, int) or value <= 0:
        raise ConfigError(f"{key} must be a positive integer")
    return value
