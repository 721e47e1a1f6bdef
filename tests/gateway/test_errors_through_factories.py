"""Gateway error codes go through the `gateway.base.errors` factories (issue 11, item 6).

Only gateway/base/errors.py builds an `ApiError`; every other module calls a named factory, so each code's
status, message and param are written in one place and a client reads the same envelope wherever it is
raised.
"""

from __future__ import annotations

import ast
from pathlib import Path

GATEWAY = Path(__file__).resolve().parents[2] / "gateway"
FACTORIES = GATEWAY / "base" / "errors.py"


def _constructions(tree: ast.Module) -> list[int]:
    """Lines calling `ApiError(...)` however it is spelled: the bare name, `errors.ApiError`, an alias."""
    aliases = {"ApiError"}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            aliases.update(alias.asname for alias in node.names if alias.name == "ApiError" and alias.asname)
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if (isinstance(func, ast.Name) and func.id in aliases) or \
                (isinstance(func, ast.Attribute) and func.attr == "ApiError"):
            lines.append(node.lineno)
    return sorted(lines)


def test_no_gateway_module_but_errors_constructs_api_error() -> None:
    """Every gateway/**/*.py other than gateway/base/errors.py builds its errors through a factory."""
    offenders = {str(path.relative_to(GATEWAY)): lines for path in sorted(GATEWAY.rglob("*.py"))
                 if path != FACTORIES and (lines := _constructions(ast.parse(path.read_text(), str(path))))}
    assert offenders == {}


def test_the_check_sees_each_spelling_of_a_construction() -> None:
    """The checker itself: the bare name, an attribute and an import alias are caught; a factory is not."""
    caught = _constructions(ast.parse(
        "from gateway.base.errors import ApiError as E\n"
        "ApiError(404, 'x', 'y')\n"
        "errors.ApiError(404, 'x', 'y')\n"
        "E(400, 'x', 'y')\n"
        "errors.memory_not_found()\n"
        "isinstance(e, ApiError)\n"))
    assert caught == [2, 3, 4]
    assert _constructions(ast.parse(FACTORIES.read_text())) != []
