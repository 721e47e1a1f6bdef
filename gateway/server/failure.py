"""One line that says why a start failed: what an operator reads first, with nothing secret in it.

A database error's text can carry the statement and its parameters, and a state store URL its password,
so neither is printed: the URL is shown with its password hidden, the driver's reason by its first line.
"""

from __future__ import annotations

import sqlite3

from sqlalchemy.engine import make_url
from sqlalchemy.exc import DBAPIError, SQLAlchemyError

from gateway.audit.seal import AuditLogRefused
from gateway.base.config import Config, ConfigError
from gateway.state.tree_check import StateCorrupt

_OURS = (ConfigError, AuditLogRefused, StateCorrupt)


def one_line(exc: BaseException, config: Config) -> str:
    if isinstance(exc, _OURS):
        return _first_line(str(exc))
    # sqlite3's own errors: the state file is switched to WAL before the engine opens it (state/engine.py)
    if isinstance(exc, OSError | SQLAlchemyError | sqlite3.Error) or type(exc).__module__.startswith("asyncpg"):
        cause = exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc
        return (f"cannot use the state store {_shown(config.database_url())}: "
                f"{type(cause).__name__}: {_first_line(str(cause))}")
    if isinstance(exc, RuntimeError):  # the audit journal held by another process, and the like: ours
        return _first_line(str(exc))
    return f"the start failed: {type(exc).__name__}: {_first_line(str(exc))}"


def _shown(url: str) -> str:
    try:
        return make_url(url).render_as_string(hide_password=True)
    except Exception:
        return "(its URL cannot be read)"


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or [""])[0][:500]
