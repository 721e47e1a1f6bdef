"""The ten memory tools (§9.1): names, input schemas and the words an agent reads to choose one.

The input schemas are fixed per tool; only descriptions depend on the caller (the named queries,
operations and free-query languages it can use are appended by `offer`). A fixed schema lets the
SDK check `Mcp-Param-*` headers without running the caller-dependent listing, and lets `arguments`
be validated here before anything reaches the API.

Ids are opaque to the protocol, but an id travels into a URL path of the in-process API, so the
schema refuses the characters that would change which route it reaches (`/`, `?`, `#`, `%`, `\\`,
whitespace) and the dot segments.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from jsonschema import Draft202012Validator

# An id: 1-200 characters, none of which can leave its path segment.
ID_PATTERN = r"^(?!\.{1,2}$)[^/\\?#%\s]{1,200}$"


def _id(description: str) -> dict[str, Any]:
    return {"type": "string", "pattern": ID_PATTERN, "description": description}


MEMORY_ID = _id("The memory's id, as memory_list or a recall result named it.")
RECORD_ID = _id("The record's id.")
LIMIT = {"type": "integer", "minimum": 1, "maximum": 200}
TYPES = {"type": "array", "items": {"type": "string", "minLength": 1, "maxLength": 100}, "maxItems": 50,
         "description": "Only records of these types (fact, note, procedure, episode, link, entity, or x.…)."}
AS_OF = {"type": "string", "format": "date-time",
         "description": "Read the memory as it stood at this instant (ISO 8601)."}
CONDITION = {
    "type": "object",
    "required": ["field"],
    "additionalProperties": False,
    "properties": {
        "field": {"type": "string", "description": "type, attributes.<name> or time.<valid_from|valid_to|written_at>"},
        "op": {"enum": ["eq", "ne", "lt", "lte", "gt", "gte", "in"], "default": "eq"},
        "value": {"description": "A single value; a list for op in."},
    },
}
REFERENCES = {
    "type": "array",
    "maxItems": 100,
    "description": "Records this one points at; rel is derived_from, part_of, about, subject, object or your own.",
    "items": {
        "type": "object",
        "required": ["memory_id", "record_id"],
        "additionalProperties": False,
        "properties": {"memory_id": MEMORY_ID, "record_id": RECORD_ID,
                       "rel": {"type": "string", "minLength": 1, "maxLength": 100}},
    },
}
RECORD_FIELDS: dict[str, Any] = {
    "content": {"type": "string", "maxLength": 200_000, "description": "What the record says, in words."},
    "title": {"type": "string", "maxLength": 300, "description": "One line that names the record."},
    "attributes": {"type": "object", "description": "Structured fields."},
    "references": REFERENCES,
}


def _object(properties: Mapping[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    return {"type": "object", "properties": dict(properties), "required": list(required),
            "additionalProperties": False}


@dataclass(frozen=True)
class ToolSpec:
    name: str
    title: str
    description: str
    input_schema: dict[str, Any]
    read_only: bool
    destructive: bool = False


READ_TOOLS = ("memory_list", "memory_recall", "memory_graph", "memory_get")
WRITE_TOOLS = ("memory_remember", "memory_revise", "memory_forget")

SPECS: dict[str, ToolSpec] = {spec.name: spec for spec in (
    ToolSpec(
        "memory_list", "List memories or records",
        "Without memory_id: the memories you enter the tree at. With memory_id: its child memories "
        "(show=children, the default), its records (show=records, newest first) or the named queries it "
        "offers (show=queries). Pages: pass the `next` cursor back as cursor.",
        _object({
            "memory_id": MEMORY_ID,
            "show": {"enum": ["children", "records", "queries"], "default": "children"},
            "type": {"type": "string", "maxLength": 100, "description": "show=records: only this record type."},
            "include": {"enum": ["active", "all"], "description": "show=records: all adds forgotten records."},
            "cursor": {"type": "string", "maxLength": 500},
            "limit": LIMIT,
        }),
        read_only=True,
    ),
    ToolSpec(
        "memory_recall", "Search a memory and what is below it",
        "Search one memory and every memory below it that you may read. Give at least one of query "
        "(meaning), text (words) or filters (fields). Each result names the memory it is in: go there "
        "next. The answer also names the parent and children you may move to.",
        _object({
            "memory_id": MEMORY_ID,
            "query": {"type": "string", "minLength": 1, "maxLength": 4000,
                      "description": "A question in natural language."},
            "text": {"type": "string", "minLength": 1, "maxLength": 4000, "description": "Words to match."},
            "filters": {"oneOf": [CONDITION, {"type": "array", "items": CONDITION, "maxItems": 20}]},
            "types": TYPES,
            "depth": {"type": "integer", "minimum": 0, "maximum": 1000,
                      "description": "0: this memory alone; 1: and its children; left out: the whole subtree."},
            "limit": LIMIT,
            "as_of": AS_OF,
        }, ("memory_id",)),
        read_only=True,
    ),
    ToolSpec(
        "memory_graph", "Records and their references as a graph",
        "Records as nodes and their references as edges: around one record (around, within hops) or for "
        "the whole memory and what is below it.",
        _object({
            "memory_id": MEMORY_ID,
            "around": _id("A record id to centre the graph on."),
            "hops": {"type": "integer", "minimum": 0, "maximum": 3, "default": 1},
            "types": TYPES,
            "limit": {"type": "integer", "minimum": 1, "maximum": 1000},
        }, ("memory_id",)),
        read_only=True,
    ),
    ToolSpec(
        "memory_get", "Read one record",
        "One record of one memory, as it is now or at as_of; history=true returns every version, oldest "
        "first, each with its writer.",
        _object({"memory_id": MEMORY_ID, "record_id": RECORD_ID, "as_of": AS_OF,
                 "history": {"type": "boolean", "default": False}}, ("memory_id", "record_id")),
        read_only=True,
    ),
    ToolSpec(
        "memory_remember", "Remember something",
        "Write one record, as you state it, into a memory you may write. You are recorded as its writer. "
        "Without memory_id it goes to your harness's default memory.",
        _object({"memory_id": _id("The memory to write to; left out, your harness's default memory."),
                 "type": {"type": "string", "minLength": 1, "maxLength": 100, "default": "note",
                          "description": "fact, note, procedure, episode, link, entity, or x.…"},
                 **RECORD_FIELDS}),
        read_only=False, destructive=False,
    ),
    ToolSpec(
        "memory_revise", "Revise a record",
        "Write a new version of a record; the earlier version is kept in its history. Give only what "
        "changes.",
        _object({"memory_id": MEMORY_ID, "record_id": RECORD_ID,
                 "type": {"type": "string", "minLength": 1, "maxLength": 100}, **RECORD_FIELDS},
                ("memory_id", "record_id")),
        read_only=False, destructive=False,
    ),
    ToolSpec(
        "memory_forget", "Forget a record",
        "Close a record: it leaves every read that does not ask for history, and its trace is kept.",
        _object({"memory_id": MEMORY_ID, "record_id": RECORD_ID}, ("memory_id", "record_id")),
        read_only=False, destructive=True,
    ),
    ToolSpec(
        "memory_run_query", "Run a memory's named query",
        "Run a named query that a memory offers, with its params. Members write named queries: memory_list "
        "with memory_id and show=queries lists a memory's queries, with their descriptions and params, as "
        "data. The memories holding queries you can run:",
        _object({"memory_id": MEMORY_ID, "name": _id("The query's name."),
                 "params": {"type": "object", "description": "The query's parameters, as its schema says."}},
                ("memory_id", "name")),
        read_only=False,
    ),
    ToolSpec(
        "memory_operate", "Run an operation of a record's type",
        "Run an operation that a record's type offers (a calendar event's reschedule, say) on one record. "
        "The operations:",
        _object({"memory_id": MEMORY_ID, "record_id": RECORD_ID, "operation": _id("The operation's name."),
                 "input": {"type": "object", "description": "The operation's input, as its schema says."}},
                ("memory_id", "record_id", "operation")),
        read_only=False,
    ),
    ToolSpec(
        "memory_query", "Query a memory in its provider's language",
        "Write a query in the language of the memory's provider and run it on that one memory. It reads "
        "only what you may read, whatever the statement says.",
        _object({"memory_id": MEMORY_ID,
                 "language": {"type": "string", "minLength": 1, "maxLength": 50},
                 "statement": {"type": "string", "minLength": 1, "maxLength": 20_000},
                 "params": {"type": "object"}}, ("memory_id", "language", "statement")),
        read_only=False,
    ),
)}

_VALIDATORS = {name: Draft202012Validator(spec.input_schema) for name, spec in SPECS.items()}


def input_schema(name: str) -> dict[str, Any] | None:
    spec = SPECS.get(name)
    return spec.input_schema if spec else None


def argument_error(name: str, arguments: Mapping[str, Any]) -> str | None:
    """Why `arguments` do not fit the tool's schema (the first reason, with where), or None."""
    errors = sorted(_VALIDATORS[name].iter_errors(dict(arguments)), key=lambda e: list(e.absolute_path))
    if not errors:
        return None
    first = errors[0]
    where = ".".join(str(p) for p in first.absolute_path)
    if first.validator == "pattern" and where.endswith("id"):
        return f"{where}: not an id this server could have given"
    return f"{where}: {first.message}" if where else first.message
