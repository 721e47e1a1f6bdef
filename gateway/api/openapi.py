"""/openapi.json, built from the same Endpoint declarations and pydantic models that validate requests."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from pydantic import BaseModel

from gateway import __version__
from gateway.api._endpoint import Endpoint

REF = "#/components/schemas/{model}"

ERROR_SCHEMA = {
    "type": "object",
    "required": ["error"],
    "properties": {"error": {
        "type": "object",
        "required": ["type", "code", "message", "param", "detail"],
        "properties": {
            "type": {"type": "string"}, "code": {"type": "string"}, "message": {"type": "string"},
            "param": {"type": ["string", "null"]}, "detail": {},
        },
    }},
}

MULTIPART_FILE = {
    "type": "object",
    "required": ["file"],
    "properties": {"file": {"type": "string", "format": "binary"}, "purpose": {"type": "string"}},
}


def _schema(model: type[BaseModel], components: dict[str, Any]) -> dict[str, Any]:
    schema = model.model_json_schema(ref_template=REF)
    for name, definition in schema.pop("$defs", {}).items():
        components[name] = _no_null_defaults(definition)
    components[model.__name__] = _no_null_defaults(schema)
    return {"$ref": REF.format(model=model.__name__)}


def _no_null_defaults(schema: dict[str, Any]) -> dict[str, Any]:
    """A field whose "not given" is None but that refuses null shows no `default: null`: the document
    would otherwise offer a value the server refuses."""
    for prop in schema.get("properties", {}).values():
        if prop.get("default", 0) is None and not _allows_null(prop):
            del prop["default"]
    return schema


def _allows_null(prop: dict[str, Any]) -> bool:
    kinds = prop.get("type")
    if kinds == "null" or (isinstance(kinds, list) and "null" in kinds):
        return True
    return any(_allows_null(option) for option in prop.get("anyOf", []) + prop.get("oneOf", []))


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def _errors(endpoint: Endpoint) -> list[int]:
    """The error statuses a route can answer, from what it declares: every route may be refused a bad
    `UHP-Version` (400), a member's limits (429) or a provider or the state store being down (503)."""
    statuses = {400, 429, 503}
    if not endpoint.public:
        statuses |= {401, 403, 404}
    if "{" in endpoint.path or endpoint.query is not None:
        statuses |= {404, 422}
    if endpoint.body is not None or endpoint.raw_body is not None:
        statuses |= {413, 415, 422}
    if endpoint.write:
        statuses |= {409, 422}  # an Idempotency-Key in use (409) or reused for another request (422)
    statuses |= set(endpoint.errors)
    return sorted(statuses)


def _success(endpoint: Endpoint, components: dict[str, Any]) -> dict[str, Any]:
    if endpoint.media == "*/*":
        return {"description": "The bytes, in their own media type", "content": {"*/*": {
            "schema": {"type": "string", "format": "binary"}}}}
    if endpoint.media != "application/json" and endpoint.response is not None:
        # NDJSON: the schema is that of each line (OpenAPI 3.1 has no item schema for a stream).
        return {"description": "Success: one JSON document a line, each of this schema",
                "content": {endpoint.media: {"schema": _schema(endpoint.response, components)}}}
    if endpoint.media != "application/json":
        return {"description": "Success", "content": {endpoint.media: {"schema": {"type": "string"}}}}
    schema = _schema(endpoint.response, components) if endpoint.response is not None else {"type": "object"}
    return {"description": "Success", "content": {"application/json": {"schema": schema}}}


def _request_body(endpoint: Endpoint, components: dict[str, Any]) -> dict[str, Any] | None:
    if endpoint.body is not None:
        # A route whose every field has a default also takes no body at all.
        try:
            endpoint.body.model_validate({})
            required = False
        except ValueError:
            required = True
        return {"required": required, "content": {"application/json": {"schema": _schema(endpoint.body, components)}}}
    if endpoint.raw_body == "multipart/form-data":
        return {"required": True, "content": {"multipart/form-data": {"schema": MULTIPART_FILE}}}
    if endpoint.raw_body is not None and endpoint.raw_line is not None:
        return {"required": False, "description": "One JSON document a line, each of this schema",
                "content": {endpoint.raw_body: {"schema": _schema(endpoint.raw_line, components)}}}
    if endpoint.raw_body is not None:  # an empty NDJSON file is a file of no lines
        return {"required": False, "content": {endpoint.raw_body: {"schema": {"type": "string"}}}}
    return None


def build(endpoints: Iterable[Endpoint]) -> dict[str, Any]:
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True,
             "schema": {"type": "integer", "minimum": 0} if name == "index" else {"type": "string", "minLength": 1}}
            for name in re.findall(r"{(\w+)}", endpoint.path)
        ]
        if endpoint.query is not None:
            parameters.extend(_query_parameters(endpoint.query))
        parameters.append({"name": "UHP-Version", "in": "header", "required": False,
                           "schema": {"type": "string", "enum": ["2026-10-04"]}})
        if endpoint.write:
            parameters.append({"name": "Idempotency-Key", "in": "header", "required": False,
                               "schema": {"type": "string", "minLength": 1, "maxLength": 255}})
        error = {"description": "An error, in the UHP envelope",
                 "content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}}}
        responses: dict[str, Any] = {str(status): _success(endpoint, components)
                                     for status in (endpoint.status, *endpoint.also)}
        # A status a route declares as its own answer keeps that schema (/readyz: 503 is the readiness body).
        responses.update({str(status): error for status in _errors(endpoint) if str(status) not in responses})
        operation: dict[str, Any] = {
            "operationId": endpoint.operation,
            "summary": endpoint.summary,
            "tags": list(endpoint.tags),
            "parameters": parameters,
            "responses": responses,
        }
        if (body := _request_body(endpoint, components)) is not None:
            operation["requestBody"] = body
        if not endpoint.public:
            operation["security"] = [{"bearer": []}]
        paths.setdefault(endpoint.path, {})[endpoint.method.lower()] = operation
    return {
        "openapi": "3.1.0",
        "info": {"title": "memfed", "version": __version__,
                 "description": "UHP Memories 2026-10-04 in front of many memory providers."},
        "paths": paths,
        "components": {"schemas": components,
                       "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}},
    }
