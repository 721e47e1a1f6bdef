"""Each route reads its body and query as the models its endpoint declares, so a handler's typed read
(`call.body_as(M)`, `call.query_as(M)`) can never name a model the runner did not validate."""

from __future__ import annotations

import ast
import inspect
import textwrap

import pytest
from pydantic import BaseModel

from gateway.api._endpoint import Endpoint
from gateway.api.health import DOCUMENTED
from gateway.server.app import endpoints


def _reads(endpoint: Endpoint) -> dict[str, list[type[BaseModel]]]:
    """The models the handler's own body asks for, by part ("body", "query")."""
    handler = endpoint.handler
    tree = ast.parse(textwrap.dedent(inspect.getsource(handler)))
    found: dict[str, list[type[BaseModel]]] = {"body": [], "query": []}
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("body_as", "query_as") and len(node.args) == 1
                and isinstance(node.args[0], ast.Name)):
            model = handler.__globals__[node.args[0].id]
            found[node.func.attr.removesuffix("_as")].append(model)
    return found


ALL = [*endpoints(), *DOCUMENTED]


@pytest.mark.parametrize("endpoint", ALL, ids=[e.operation for e in ALL])
def test_a_handler_reads_only_the_models_its_endpoint_declares(endpoint: Endpoint) -> None:
    """Every `body_as`/`query_as` in a route's handler names exactly the endpoint's `body`/`query` model
    (a route without one reads none)."""
    reads = _reads(endpoint)
    for model in reads["body"]:
        assert model is endpoint.body, f"{endpoint.operation} reads its body as {model.__name__}"
    for model in reads["query"]:
        assert model is endpoint.query, f"{endpoint.operation} reads its query as {model.__name__}"


def test_every_declared_body_and_query_is_read_by_its_handler() -> None:
    """A model an endpoint validates is one its handler reads: the check above then covers every route
    that has a body or a query."""
    unread = [f"{e.operation}.{part}" for e in ALL for part, model in (("body", e.body), ("query", e.query))
              if model is not None and model not in _reads(e)[part]]
    assert unread == []
