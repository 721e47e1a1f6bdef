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
        components[name] = definition
    components[model.__name__] = schema
    return {"$ref": REF.format(model=model.__name__)}


def _query_parameters(model: type[BaseModel]) -> list[dict[str, Any]]:
    schema = model.model_json_schema(ref_template=REF)
    required = set(schema.get("required", []))
    return [
        {"name": name, "in": "query", "required": name in required, "schema": prop}
        for name, prop in schema.get("properties", {}).items()
    ]


def build(endpoints: Iterable[Endpoint]) -> dict[str, Any]:
    components: dict[str, Any] = {"Error": ERROR_SCHEMA}
    paths: dict[str, dict[str, Any]] = {}
    for endpoint in endpoints:
        parameters: list[dict[str, Any]] = [
            {"name": name, "in": "path", "required": True, "schema": {"type": "string", "minLength": 1}}
            for name in re.findall(r"{(\w+)}", endpoint.path)
        ]
        if endpoint.query is not None:
            parameters.extend(_query_parameters(endpoint.query))
        parameters.append({"name": "UHP-Version", "in": "header", "required": False,
                           "schema": {"type": "string", "enum": ["2026-10-04"]}})
        if endpoint.write:
            parameters.append({"name": "Idempotency-Key", "in": "header", "required": False,
                               "schema": {"type": "string", "maxLength": 255}})
        operation: dict[str, Any] = {
            "operationId": endpoint.operation,
            "summary": endpoint.summary,
            "tags": list(endpoint.tags),
            "parameters": parameters,
            "responses": {
                str(endpoint.status): {"description": "Success",
                                       "content": {"application/json": {"schema": {"type": "object"}}}},
                "default": {"description": "An error, in the UHP envelope",
                            "content": {"application/json": {"schema": {"$ref": REF.format(model="Error")}}}},
            },
        }
        if endpoint.body is not None:
            operation["requestBody"] = {"required": True, "content": {
                "application/json": {"schema": _schema(endpoint.body, components)}}}
        elif endpoint.operation == "files.upload":
            operation["requestBody"] = {"required": True,
                                        "content": {"multipart/form-data": {"schema": MULTIPART_FILE}}}
        if endpoint.operation == "records.content":
            operation["responses"]["200"] = {"description": "The part's bytes",
                                             "content": {"application/octet-stream": {}}}
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
