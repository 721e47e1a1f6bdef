"""Routes build no SQL: no module of gateway/api imports SQLAlchemy or a table schema (issue 11, item 5).

The state store's repositories (gateway/state/) hold the queries; a route calls their typed methods.
"""

from __future__ import annotations

import ast
from pathlib import Path

API = Path(__file__).resolve().parents[2] / "gateway" / "api"


def _is_schema(module: str) -> bool:
    """gateway/state's table definitions (and their registry): a route reaching for one builds its own SQL."""
    return module in ("schema", "tables") or module.endswith("_schema")


def _forbidden(tree: ast.Module) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "sqlalchemy" or (parts[:2] == ["gateway", "state"] and len(parts) > 2
                                             and _is_schema(parts[2])):
                found.append(f"line {node.lineno}: {name}")
    return found


def test_no_route_module_imports_sqlalchemy_or_a_table_schema() -> None:
    """Every gateway/api/*.py is free of `sqlalchemy` and of gateway.state's table modules."""
    offenders = {path.name: bad for path in sorted(API.glob("*.py"))
                 if (bad := _forbidden(ast.parse(path.read_text(), filename=str(path))))}
    assert offenders == {}


def test_the_check_sees_the_imports_it_forbids() -> None:
    """The checker itself: each spelling of a forbidden import is caught, a repository import is not."""
    caught = _forbidden(ast.parse("import sqlalchemy\nfrom sqlalchemy import text\n"
                                  "from gateway.state import harness_schema as h\n"
                                  "from gateway.state.query_schema import named_queries\n"
                                  "from gateway.state.queries import NamedQueries\n"
                                  "from gateway.state import idempotency_keys as keys\n"))
    assert caught == ["line 1: sqlalchemy", "line 2: sqlalchemy", "line 2: sqlalchemy.text",
                      "line 3: gateway.state.harness_schema", "line 4: gateway.state.query_schema",
                      "line 4: gateway.state.query_schema.named_queries"]
