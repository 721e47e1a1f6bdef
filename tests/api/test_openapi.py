"""/openapi.json says what the server does: statuses, media types, bodies, parameter types, limits."""

from __future__ import annotations

from typing import Any

import jsonschema
import pytest

from gateway.api.openapi import build
from gateway.app import endpoints

DOCUMENT = build(endpoints())


def _operation(method: str, path: str) -> dict[str, Any]:
    operation: dict[str, Any] = DOCUMENT["paths"][path][method.lower()]
    return operation


def _body_schema(method: str, path: str) -> dict[str, Any]:
    """The request body's schema, resolved against the document's components."""
    ref = _operation(method, path)["requestBody"]["content"]["application/json"]["schema"]["$ref"]
    name = ref.rsplit("/", 1)[-1]
    return {**DOCUMENT["components"]["schemas"][name], "components": DOCUMENT["components"]}


def _valid(schema: dict[str, Any], value: Any) -> bool:
    try:
        jsonschema.validate(value, schema)
    except jsonschema.ValidationError:
        return False
    return True


def test_success_statuses_are_the_ones_the_routes_answer() -> None:
    """observe is 201 or 202, a turn 200, 201 or 202, defining a named query 200 (replaced) or 201 (new)."""
    assert {"201", "202"} <= set(_operation("POST", "/v1/memories/{memory_id}/observe")["responses"])
    assert {"200", "201", "202"} <= set(_operation("POST", "/v1/harnesses/{harness_id}/turns")["responses"])
    assert {"200", "201"} <= set(_operation("PUT", "/v1/memories/{memory_id}/queries/{name}")["responses"])


def test_media_types_are_the_real_ones() -> None:
    """An export is NDJSON, a part's bytes come in their own type, an import takes NDJSON."""
    export = _operation("GET", "/v1/memories/{memory_id}/export")["responses"]["200"]["content"]
    assert list(export) == ["application/x-ndjson"]
    content = _operation("GET", "/v1/memories/{memory_id}/records/{record_id}/content/{index}")
    assert list(content["responses"]["200"]["content"]) == ["*/*"]
    index = next(p for p in content["parameters"] if p["name"] == "index")
    assert index["schema"]["type"] == "integer" and index["schema"]["minimum"] == 0
    imported = _operation("POST", "/v1/memories/{memory_id}/import")["requestBody"]["content"]
    assert list(imported) == ["application/x-ndjson"]


@pytest.mark.parametrize("endpoint", [e for e in endpoints() if not e.public], ids=lambda e: e.operation)
def test_every_route_lists_the_errors_it_can_answer(endpoint: Any) -> None:
    """No `default` catch-all: each route names its statuses, in the envelope, and a body route its 413,
    415 and 422."""
    responses = _operation(endpoint.method, endpoint.path)["responses"]
    assert "default" not in responses
    assert {"400", "401", "403", "404", "429", "503"} <= set(responses)
    if endpoint.body is not None:
        assert {"413", "415", "422"} <= set(responses)
    assert responses["401"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/Error"}


def test_limits_json_schema_can_state_are_in_the_schemas() -> None:
    """What the models refuse and JSON Schema can say, the schema refuses too: a recall without a signal,
    a signal given as null, a record with neither title nor content, an unknown part type, a principal
    without its kind, an empty update, a null name, an empty record id."""
    recall = _body_schema("POST", "/v1/memories/{memory_id}/recall")
    assert not _valid(recall, {}) and not _valid(recall, {"query": None}) and _valid(recall, {"query": "q"})
    assert not _valid(recall, {"filters": {"field": "colour"}})
    remember = _body_schema("POST", "/v1/memories/{memory_id}/records")
    assert not _valid(remember, {"type": "note"}) and _valid(remember, {"content": "x"})
    assert not _valid(remember, {"content": [{"type": "pdf"}]})
    grant = _body_schema("POST", "/v1/memories/{memory_id}/grants")
    assert not _valid(grant, {"principal": "alice", "privileges": ["read"]})
    update = _body_schema("PUT", "/v1/memories/{memory_id}")
    assert not _valid(update, {}) and not _valid(update, {"name": None}) and _valid(update, {"name": "n"})
    erase = _body_schema("POST", "/v1/memories/{memory_id}/erase")
    assert not _valid(erase, {"record_ids": [""]})
    observe = _body_schema("POST", "/v1/memories/{memory_id}/observe")
    assert not _valid(observe, {"content": "x", "episodes": [{"content": "y"}]})
