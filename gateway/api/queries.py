"""Named and free queries (§6.4, §6.5): define, list and run them, on one memory each.

The gateway keeps the named queries (gateway/state/queries.py), checks who may define and run
them, and validates a run's `params` against the definer's JSON Schema; the memory's provider runs the
statement, confined to that one memory by a means the statement cannot undo (adapters/queries.py).

Privileges (§3.1): defining (or deleting) a named query needs `write`; listing needs `read`; running
one needs `read`, since it answers with what it read, and `write` as well when it is marked so. A free
query needs `read`, and `write` too on a provider that lets one write.

A provider that does not implement `QueryingProvider`, or not the language asked, answers 422
`memory_unsupported`; listing still answers (the list of such a memory is empty).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, cast

from adapters.base import Provider
from adapters.queries import QueryingProvider, QueryParamError, QueryResult
from gateway.api._calls import handle_for, on_provider, record_counts
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.query_models import (
    DefineQuery,
    FreeQuery,
    RunQuery,
    check_name,
    check_schema,
    declared,
    validate_params,
)
from gateway.api.render import page_json, reader, recall_json, recall_result_json
from gateway.api.responses_agent import QueryDeleted, QueryList, QueryOut, QueryResultOut
from gateway.base.answers import JSONAnswer
from gateway.base.clock import now_ms
from gateway.base.errors import ApiError, invalid, query_conflict, query_not_found, unsupported
from gateway.federation.providers import ProviderHandle
from gateway.state.queries import Definition, DefinitionRaced, NamedQuery
from gateway.state.tree import MemoryNode
from policies import access

MAX_ROWS = 1000
MAX_SECONDS = 2.0  # and never more than half the provider's timeout: the rest is for copying the memory


def not_found() -> ApiError:
    return query_not_found()


def querying(call: Call, node: MemoryNode, *, named: bool) -> tuple[ProviderHandle, QueryingProvider]:
    handle = handle_for(call.services, node)
    caps = handle.capabilities()
    declared_ = caps.named_queries if named else bool(caps.free_query_languages)
    if not declared_ or not isinstance(handle.provider, QueryingProvider):
        kind = "named" if named else "free"
        raise unsupported(f"The memory's provider ({node.provider}) does not run {kind} queries.")
    return handle, handle.provider


def check_language(languages: tuple[str, ...] | list[str], language: str, node: MemoryNode) -> None:
    if language not in languages:
        raise unsupported(f"The memory's provider ({node.provider}) runs queries in "
                          f"{', '.join(languages) or 'no language'}, not {language!r}.", param="language")


def bounds(handle: ProviderHandle) -> dict[str, Any]:
    return {"max_rows": MAX_ROWS, "max_seconds": min(MAX_SECONDS, handle.config.timeout / 2)}


async def run_on(call: Call, node: MemoryNode,
                 fn: Callable[[QueryingProvider], Awaitable[QueryResult]]) -> QueryResult:
    """Through the provider's handle (timeout, breaker); a parameter the statement cannot bind is the
    caller's 422 naming it."""

    async def ask(provider: Provider) -> QueryResult:
        try:
            return await fn(cast(QueryingProvider, provider))
        except QueryParamError as exc:
            raise invalid(f"params.{exc.param}: {exc}", param=f"params.{exc.param}") from None

    return await on_provider(call.services, node, ask, read=True)


def query_json(row: NamedQuery) -> dict[str, Any]:
    return {"object": "memory.query", "memory_id": row.memory_id, "name": row.name,
            "description": row.description, "params": json.loads(row.params), "requires": row.requires,
            "language": row.language, "body": row.body, "created_by": f"member:{row.created_by}",
            "created_at": row.created_at, "updated_by": f"member:{row.updated_by}", "updated_at": row.updated_at}


async def answer(call: Call, node: MemoryNode, result: QueryResult) -> dict[str, Any]:
    """Records in the shape of a recall (§6.3), else the provider's rows."""
    degraded = list(result.degraded)
    if result.records is None:
        return {"object": "memory.query_result", "columns": list(result.columns),
                "rows": [list(r) for r in result.rows], "degraded": degraded}
    tree = call.services.store.tree
    principals = call.authenticated().principals
    # No ranking and no signal produced these: score is null and why is empty.
    shown = reader(call, "queries.reference")
    results = [recall_result_json(r, shown, node.id, None, ()) for r in result.records]
    around = access.readable_neighbours(tree, principals, node.id)
    parent = tree.get(around.parent) if around.parent is not None else None
    children = [c for c in (tree.get(i) for i in around.children) if c is not None]
    counts = await record_counts(call.services, [n for n in [parent, *children] if n is not None], call)
    return recall_json(results, parent, children, counts, degraded, abstain=False)


# ------------------------------------------------------------------ routes


async def list_queries(call: Call) -> dict[str, Any]:
    node = require(call, call.path["memory_id"], "read", "queries.list")
    rows = await call.services.store.queries.of_memory(node.id)
    out = page_json((query_json(r) for r in rows), None)
    handle = call.services.providers.get(node.provider)
    provider = handle.provider if handle is not None else None
    if handle is not None and isinstance(provider, QueryingProvider):
        caps = handle.capabilities()
        free = [{"language": lang, "write": caps.free_query_write, "schema": provider.query_schema(lang)}
                for lang in caps.free_query_languages]
        # What an agent needs to write a statement: the language and what the memory looks like (§6.5).
        out["x.memfed"] = {"named_languages": list(provider.query_languages()) if caps.named_queries else [],
                           "free": free}
    return out


async def define_query(call: Call) -> Any:
    body = call.body_as(DefineQuery)
    name = call.path["name"]
    check_name(name)
    if body.name is not None and body.name != name:
        raise invalid("name must be the one in the path.", param="name")
    node = require(call, call.path["memory_id"], "write", "queries.define")
    _, provider = querying(call, node, named=True)
    check_language(provider.query_languages(), body.language, node)
    check_schema(body.params)
    try:
        found = await on_provider(call.services, node,
                                  lambda p: cast(QueryingProvider, p).check_query(body.language, body.body), read=True)
    except ApiError as error:
        if error.code == "memory_invalid":
            error.param = "body"
        raise
    missing = [p for p in found.parameters if p not in declared(body.params)]
    if missing:
        raise invalid(f"body uses the parameter {missing[0]!r}, which params does not declare.", param="params")
    created = await _store(call, node, name, body)
    row = await call.services.store.queries.get(node.id, name)
    if row is None:  # deleted by another request between this one's write and its read back
        raise not_found()
    return JSONAnswer(query_json(row), status_code=201 if created else 200)


async def _store(call: Call, node: MemoryNode, name: str, body: DefineQuery) -> bool:
    """Insert or replace (gateway/state/queries.py); True when the name was new."""
    what = Definition(body.description, json.dumps(body.params), body.requires, body.language, body.body)
    try:
        return await call.services.store.queries.define(node.id, name, what, call.authenticated().member_id, now_ms())
    except DefinitionRaced:
        raise query_conflict() \
            from None


async def delete_query(call: Call) -> dict[str, Any]:
    node = require(call, call.path["memory_id"], "write", "queries.delete")
    row = await call.services.store.queries.get(node.id, call.path["name"])
    if row is None:
        raise not_found()
    await call.services.store.queries.delete(node.id, row.name)
    return {**query_json(row), "deleted": True}


async def run_query(call: Call) -> dict[str, Any]:
    body = call.body_as(RunQuery)
    memory_id = call.path["memory_id"]
    node = require(call, memory_id, "read", "queries.run")
    row = await call.services.store.queries.get(node.id, call.path["name"])
    if row is None:
        raise not_found()
    if row.requires == "write":
        require(call, memory_id, "write", "queries.run")
    schema = json.loads(row.params)
    validate_params(schema, body.params)
    handle, provider = querying(call, node, named=True)
    check_language(provider.query_languages(), row.language, node)
    # A declared parameter left out is passed as null, so a body can say `(:x IS NULL OR ...)`.
    params = {**dict.fromkeys(declared(schema)), **body.params}
    result = await run_on(call, node, lambda p: p.run_named(node.id, row.language, row.body, params,
                                                            **bounds(handle)))
    return await answer(call, node, result)


async def free_query(call: Call) -> dict[str, Any]:
    body = call.body_as(FreeQuery)
    node = require(call, call.path["memory_id"], "read", "queries.free")
    handle, _ = querying(call, node, named=False)
    caps = handle.capabilities()
    check_language(caps.free_query_languages, body.language, node)
    if caps.free_query_write:
        require(call, node.id, "write", "queries.free")
    result = await run_on(call, node, lambda p: p.run_free(node.id, body.language, body.statement, body.params,
                                                           **bounds(handle)))
    return await answer(call, node, result)


M = "/v1/memories/{memory_id}"
ENDPOINTS = [
    Endpoint("GET", M + "/queries", list_queries, "The named queries of this memory, with their parameters.",
             "queries.list", response=QueryList, tags=("queries",)),
    Endpoint("PUT", M + "/queries/{name}", define_query, "Define or replace a named query; needs write.",
             "queries.define", body=DefineQuery, also=(201,), write=True, response=QueryOut, tags=("queries",)),
    Endpoint("POST", M + "/queries/{name}", run_query, "Run a named query with params.", "queries.run",
             body=RunQuery, response=QueryResultOut, tags=("queries",)),
    Endpoint("DELETE", M + "/queries/{name}", delete_query, "Delete a named query; needs write.",
             "queries.delete", write=True, response=QueryDeleted, tags=("queries",)),
    Endpoint("POST", M + "/query", free_query, "Run a free query in the provider's language, confined to "
             "this memory.", "queries.free", body=FreeQuery, response=QueryResultOut, tags=("queries",)),
]
