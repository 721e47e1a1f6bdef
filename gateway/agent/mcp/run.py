"""A tool call becomes the API request the agent could have made itself, and its answer a tool result.

Nothing here decides access: the API does, for the caller whose credential the call carried. A call
to a tool the caller was not offered (a write tool by a reader, say) is still only the request it
maps to, and the API refuses it as it would refuse that request.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import mcp_types as types

from gateway.agent.mcp import depth, harness, results
from gateway.agent.mcp.api import Answer, Api, Caller, segment
from gateway.agent.mcp.tools import argument_error

log = logging.getLogger("memfed.mcp")

Args = Mapping[str, Any]
Runner = Callable[[Api, Caller, Args], Awaitable[types.CallToolResult]]


def _memory(args: Args) -> str:
    return "/v1/memories/" + segment(args["memory_id"])


def _record(args: Args) -> str:
    return _memory(args) + "/records/" + segment(args["record_id"])


def _pick(args: Args, *names: str) -> dict[str, Any]:
    return {n: args[n] for n in names if n in args}


def _record_fields(args: Args) -> dict[str, Any]:
    return _pick(args, "type", "title", "content", "attributes", "references")


async def memory_list(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    if "memory_id" not in args:
        answer = await api.call(caller, "GET", "/v1/memories", params=_pick(args, "cursor", "limit"))
        if not answer.ok:
            return results.api_failure("memory_list", answer)
        return results.memories(answer.body, "The memories you enter the tree at")
    show = args.get("show", "children")
    if show == "records":
        answer = await api.call(caller, "GET", _memory(args) + "/records",
                                params=_pick(args, "type", "include", "cursor", "limit"))
        if not answer.ok:
            return results.api_failure("memory_list", answer)
        return results.records(answer.body, answer.body.get("data") or [])
    if show == "queries":
        answer = await api.call(caller, "GET", _memory(args) + "/queries")
        if not answer.ok:
            return results.api_failure("memory_list", answer)
        return results.data("The named queries this memory offers (run one with memory_run_query)", answer.body)
    params = {"parent": args["memory_id"], **_pick(args, "cursor", "limit")}
    answer = await api.call(caller, "GET", "/v1/memories", params=params)
    if not answer.ok:
        return results.api_failure("memory_list", answer)
    return results.memories(answer.body, "The child memories you may enter")


async def memory_recall(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    body = _pick(args, "query", "text", "filters", "types", "depth", "limit", "as_of")
    answer = await api.call(caller, "POST", _memory(args) + "/recall", body=body)
    return results.recall(answer.body) if answer.ok else results.api_failure("memory_recall", answer)


async def memory_graph(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    answer = await api.call(caller, "POST", _memory(args) + "/graph",
                            body=_pick(args, "around", "hops", "types", "limit"))
    return results.graph(answer.body) if answer.ok else results.api_failure("memory_graph", answer)


async def memory_get(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    if args.get("history"):
        answer = await api.call(caller, "GET", _record(args) + "/history")
        if not answer.ok:
            return results.api_failure("memory_get", answer)
        return results.records(answer.body, answer.body.get("data") or [])
    answer = await api.call(caller, "GET", _record(args), params=_pick(args, "as_of"))
    return results.records(answer.body, [answer.body]) if answer.ok else results.api_failure("memory_get", answer)


def _written(verb: str, answer: Answer, tool: str) -> types.CallToolResult:
    if not answer.ok:
        return results.api_failure(tool, answer)
    record = answer.body
    version = record.get("version")
    # The record's id is the provider's: it is shown in the fenced record's header, not in this line.
    lead = f"{verb} the record below" + (f" (version {version})." if isinstance(version, int) else ".")
    if record.get("object") == "memory.record.acknowledgement":
        lead += " You may write this memory but not read it: below is which record and version, not what it says."
    return results.records(record, [record], lead=lead)


async def memory_remember(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    if "memory_id" not in args:  # §9: an unaddressed remember goes to the harness's default memory
        try:
            args = {**args, "memory_id": await harness.default_memory(api, caller)}
        except harness.NoDefault as reason:
            return results.failure(str(reason), "memory_invalid", "memory_id")
    answer = await api.call(caller, "POST", _memory(args) + "/records", body=_record_fields(args))
    return _written("Remembered", answer, "memory_remember")


async def memory_revise(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    answer = await api.call(caller, "PATCH", _record(args), body=_record_fields(args))
    return _written("Revised", answer, "memory_revise")


async def memory_forget(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    answer = await api.call(caller, "DELETE", _record(args))
    return _written("Forgot", answer, "memory_forget")


async def memory_run_query(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    answer = await api.call(caller, "POST", _memory(args) + "/queries/" + segment(args["name"]),
                            body={"params": dict(args.get("params") or {})})
    if not answer.ok:
        return results.api_failure("memory_run_query", answer)
    return results.query_answer(f"The answer of named query {args['name']}", answer.body)


async def memory_operate(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    path = _record(args) + "/operations/" + segment(args["operation"])
    answer = await api.call(caller, "POST", path, body={"input": dict(args.get("input") or {})})
    if not answer.ok:
        return results.api_failure("memory_operate", answer)
    return results.operation(args["operation"], answer.body)


async def memory_query(api: Api, caller: Caller, args: Args) -> types.CallToolResult:
    body = {"language": args["language"], "statement": args["statement"], "params": dict(args.get("params") or {})}
    answer = await api.call(caller, "POST", _memory(args) + "/query", body=body)
    if not answer.ok:
        return results.api_failure("memory_query", answer)
    return results.query_answer("The query's answer", answer.body)


RUNNERS: dict[str, Runner] = {
    "memory_list": memory_list,
    "memory_recall": memory_recall,
    "memory_graph": memory_graph,
    "memory_get": memory_get,
    "memory_remember": memory_remember,
    "memory_revise": memory_revise,
    "memory_forget": memory_forget,
    "memory_run_query": memory_run_query,
    "memory_operate": memory_operate,
    "memory_query": memory_query,
}


class _DepthSafe:
    """The API, with every answer cut to what an MCP client can take (gateway/agent/mcp/depth.py), and the
    records whose values were cut remembered for the tool's result to name."""

    def __init__(self, api: Api) -> None:
        self._api = api
        self.records: dict[str, None] = {}
        self.elsewhere = 0

    async def call(self, caller: Caller, method: str, path: str, *, params: Mapping[str, Any] | None = None,
                   body: Any = None) -> Answer:
        answer = await self._api.call(caller, method, path, params=params, body=body)
        shaped = depth.cut(answer.body)
        self.records.update(dict.fromkeys(shaped.records))
        self.elsewhere += shaped.elsewhere
        return Answer(answer.method, answer.path, answer.status, shaped.value)


async def run_tool(api: Api, caller: Caller, name: str,
                   arguments: Mapping[str, Any] | None) -> types.CallToolResult:
    """Validate, call, shape. Every failure is a tool result: an agent reads it, a stack trace never."""
    runner = RUNNERS.get(name)
    if runner is None:
        return results.failure(f"No tool named {name[:100]!r}.", "memfed_unknown_tool", "name")
    args = dict(arguments or {})
    problem = argument_error(name, args)
    if problem is not None:
        return results.failure(problem, "memory_invalid", problem.partition(":")[0] or None)
    safe = _DepthSafe(api)
    try:
        result = await runner(safe, caller, args)
    except Exception:
        log.exception("tool %s failed for %s", name, caller.principal.principal)
        return results.failure("The tool failed; the error is logged.", "memfed_internal_error")
    return results.too_deep(result, list(safe.records), safe.elsewhere)
