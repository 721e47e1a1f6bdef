"""A provider's `config` table, checked against the plugin's ConfigSchema before it goes to Configure.

The kernel decodes a plugin's block per the schema and resolves secrets before Configure (§2), so memfed
does the same: every key must be an attribute of the schema, of its type; required ones present; the
schema's `default_json` fills what is left out. A `sensitive` attribute is taken only from a named
environment variable (`api_token = { env = "NOTES_TOKEN" }`), never written in the file, and a
non-sensitive one may not be read from the environment either, so a secret cannot leak into a field the
plugin does not treat as one. Errors name the provider and the attribute, never a value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from google.protobuf import struct_pb2

from adapters.plugin._pb import memory_pb2 as pb


class ConfigRefused(ValueError):
    """The config table does not fit the plugin's schema (one line, no values)."""


def _typed(attr: pb.ConfigAttribute, value: Any, where: str) -> Any:
    kind = attr.type
    if kind == pb.ATTR_TYPE_STRING and isinstance(value, str):
        return value
    if kind == pb.ATTR_TYPE_NUMBER and isinstance(value, int | float) and not isinstance(value, bool):
        return value
    if kind == pb.ATTR_TYPE_BOOL and isinstance(value, bool):
        return value
    if kind == pb.ATTR_TYPE_LIST_STRING and isinstance(value, list) and all(isinstance(v, str) for v in value):
        return value
    if kind == pb.ATTR_TYPE_LIST_NUMBER and isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        return value
    if kind == pb.ATTR_TYPE_MAP_STRING and isinstance(value, Mapping) and all(
        isinstance(k, str) and isinstance(v, str) for k, v in value.items()
    ):
        return dict(value)
    if kind == pb.ATTR_TYPE_OBJECT and isinstance(value, Mapping):
        return _checked(attr.object_attributes, value, f"{where}.", {})
    raise ConfigRefused(f"config.{where} must be a {pb.AttrType.Name(kind).removeprefix('ATTR_TYPE_').lower()}")


def _checked(attrs: Sequence[pb.ConfigAttribute], table: Mapping[str, Any], prefix: str,
             environ: Mapping[str, str]) -> dict[str, Any]:
    by_name = {a.name: a for a in attrs}
    unknown = sorted(set(table) - set(by_name))
    if unknown:
        raise ConfigRefused(f"config.{prefix}{unknown[0]} is not in the plugin's ConfigSchema")
    out: dict[str, Any] = {}
    for name, attr in by_name.items():
        where = prefix + name
        value = table.get(name)
        named_env = isinstance(value, Mapping) and set(value) == {"env"} and attr.type != pb.ATTR_TYPE_OBJECT
        if attr.sensitive and value is not None and not named_env:
            raise ConfigRefused(f"config.{where} is sensitive: name an environment variable, {{ env = \"VAR\" }}")
        if named_env and not attr.sensitive:
            raise ConfigRefused(f"config.{where} is not sensitive: write its value in the file")
        if named_env:
            assert isinstance(value, Mapping)
            variable = str(value["env"])
            if variable not in environ:
                raise ConfigRefused(f"config.{where}: environment variable {variable} is not set")
            value = environ[variable]
        if value is None:
            if attr.HasField("default_json"):
                out[name] = json.loads(attr.default_json)
            elif attr.required:
                raise ConfigRefused(f"config.{where} is required by the plugin's ConfigSchema")
            continue
        out[name] = _typed(attr, value, where)
    return out


def configure_request(
    schema: pb.ConfigSchema, table: Mapping[str, Any], environ: Mapping[str, str]
) -> pb.ConfigureRequest:
    """The Configure request for `table`, or ConfigRefused."""
    decoded = _checked(schema.attributes, table, "", environ)
    config = struct_pb2.Struct()
    config.update(decoded)
    return pb.ConfigureRequest(config=config)
