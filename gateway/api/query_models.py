"""Wire models of the named and free queries (§6.4, §6.5), and the JSON Schema rules for `params`.

A named query's `params` is a JSON Schema (2020-12) of `type: object`: it is the input schema of the
tool an agent is offered, and every run's parameters are validated against it before the provider
is called, so a mismatch is the caller's 422 naming the parameter, never a provider failure.

Two things a schema may not do, because the gateway evaluates it on every run:
- reference anything outside itself (`$ref` must start with `#`): the validator would otherwise fetch
  a URL the definer chose, from inside the gateway's network;
- use `pattern` or `patternProperties`: a regular expression from a definer would run on every call,
  and Python's `re` cannot be bounded in time (one crafted pattern stalls the gateway).
"""

from __future__ import annotations

import re
from typing import Any, Literal

import referencing
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError, best_match
from pydantic import Field

from gateway.api.models import Strict
from gateway.base.errors import invalid

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}\Z")
MAX_BODY = 20_000
EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class DefineQuery(Strict):
    """`PUT /v1/memories/{id}/queries/{name}`. `name`, when given, must repeat the path's."""

    name: str | None = Field(default=None, min_length=1, max_length=64)
    description: str = Field(default="", max_length=4000)
    params: dict[str, Any] = Field(default_factory=lambda: dict(EMPTY_SCHEMA))
    requires: Literal["read", "write"] = "read"
    language: str = Field(min_length=1, max_length=50)
    body: str = Field(min_length=1, max_length=MAX_BODY)


class RunQuery(Strict):
    """`POST /v1/memories/{id}/queries/{name}`."""

    params: dict[str, Any] = Field(default_factory=dict)


class FreeQuery(Strict):
    """`POST /v1/memories/{id}/query`."""

    language: str = Field(min_length=1, max_length=50)
    statement: str = Field(min_length=1, max_length=MAX_BODY)
    params: dict[str, Any] = Field(default_factory=dict)


def check_name(name: str) -> None:
    if not NAME.match(name):
        raise invalid("A query's name is a letter then up to 63 letters, digits, _ or -, so that it can "
                      "name the tool an agent is offered.", param="name")


def check_schema(schema: dict[str, Any]) -> None:
    """422 unless `schema` is a JSON Schema of an object that the gateway can evaluate safely."""
    if schema.get("type") != "object":
        raise invalid('params must be a JSON Schema with "type": "object".', param="params")
    try:
        Draft202012Validator.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.path)
        raise invalid(f"params is not a valid JSON Schema{' at ' + where if where else ''}: {exc.message}",
                      param="params") from None
    _refuse_unsafe(schema, "params")


# Keywords whose values are data, not schemas: nothing under them is a keyword.
_DATA = frozenset({"enum", "const", "default", "examples", "description", "title"})
# Keywords whose value maps names to schemas: its keys are names, not keywords.
_NAMED = frozenset({"properties", "$defs", "definitions", "dependentSchemas"})


def _refuse_unsafe(node: Any, where: str, names: bool = False) -> None:
    if isinstance(node, list):
        for i, item in enumerate(node):
            _refuse_unsafe(item, f"{where}.{i}")
        return
    if not isinstance(node, dict):
        return
    for key, value in node.items():
        at = f"{where}.{key}"
        if names:
            _refuse_unsafe(value, at)
            continue
        if key in ("$ref", "$dynamicRef", "$recursiveRef") and isinstance(value, str) and not value.startswith("#"):
            raise invalid("params may only refer to its own definitions ($ref starting with #).", param=at)
        if key == "pattern" or key == "patternProperties":
            raise invalid(f"params may not use {key}: the gateway cannot bound the time a regular expression "
                          "takes.", param=at)
        if key not in _DATA:
            _refuse_unsafe(value, at, names=key in _NAMED)


def declared(schema: dict[str, Any]) -> tuple[str, ...]:
    properties = schema.get("properties")
    return tuple(properties) if isinstance(properties, dict) else ()


def validate_params(schema: dict[str, Any], params: dict[str, Any]) -> None:
    """422 memory_invalid naming the first parameter that does not match (§12)."""
    # An empty registry: a reference is resolved inside the schema or not at all, never fetched.
    validator = Draft202012Validator(schema, registry=referencing.Registry())
    try:
        error = best_match(validator.iter_errors(params))
    except Exception:  # an unresolvable $ref and the like: the definer's schema, checked at define time
        raise invalid("params cannot be checked against this query's schema.", param="params") from None
    if error is None:
        return
    name = ".".join(str(p) for p in error.absolute_path)
    if not name and error.validator == "required":
        name = next((r for r in error.validator_value if r not in params), "")
    elif not name and error.validator == "additionalProperties":
        known = set(declared(schema))
        name = next((k for k in params if k not in known), "")
    param = f"params.{name}" if name else "params"
    raise invalid(f"{param}: {error.message}", param=param, detail={"validator": str(error.validator)})
