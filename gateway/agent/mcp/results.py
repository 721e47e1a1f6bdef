"""An API answer as a tool result: recalled content fenced as data, provenance carried with it (§13).

The text an agent reads puts every record inside one fenced data block (`gateway.agent.fence`), each with
its `written_by`; whatever else came from a memory (names and descriptions of memories, a query's
rows, edges with their `rel`) is fenced the same way. Only what the server itself says (cursors,
`degraded`, `abstain`) stands outside a fence. The structured content is the API's JSON, with
`trust: "untrusted"` on every record whatever produced it.

An error is the API's own message: a memory that does not exist and one the caller may not see
answer the same words, because the API answers them the same.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types

from gateway.agent.fence import fence_records, fence_text
from gateway.agent.mcp.api import Answer
from gateway.agent.mcp.depth import MAX_DEPTH, TOO_DEEP

# What may stand outside a fence when it came in an API answer: a code, a param, a degraded entry, a
# cursor. Words (spaces, line breaks) never: those could be a provider's.
_TOKEN = re.compile(r"[A-Za-z0-9_.:=+/@-]{1,1000}")


def mark_untrusted(value: Any) -> Any:
    """A copy in which every record (any object with `object: memory.record`) says `trust: untrusted`."""
    if isinstance(value, list):
        return [mark_untrusted(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: mark_untrusted(v) for k, v in value.items()}
    if out.get("object") == "memory.record":
        out["trust"] = "untrusted"
    return out


def too_deep(result: types.CallToolResult, records: list[str], elsewhere: int) -> types.CallToolResult:
    """`result`, saying which records held values nested too deep to show (gateway/agent/mcp/depth.py): a
    line of memfed's own outside the fence, and the record ids in `x.memfed.too_deep`."""
    if not records and not elsewhere:
        return result
    where = [f"{len(records)} record{'s' if len(records) != 1 else ''}"] if records else []
    where += [f"{elsewhere} other value{'s' if elsewhere != 1 else ''}"] if elsewhere else []
    line = (f"too deep: {' and '.join(where)} held values nested deeper than {MAX_DEPTH} levels; those "
            f"values are shown as {json.dumps(TOO_DEEP)} (the records are named in x.memfed.too_deep).")
    structured = dict(result.structured_content or {})
    extra = structured.get("x.memfed")
    structured["x.memfed"] = {**(extra if isinstance(extra, Mapping) else {}),
                              "too_deep": {"depth": MAX_DEPTH, "records": records, "elsewhere": elsewhere}}
    return types.CallToolResult(content=[*result.content, types.TextContent(text=line)],
                                structured_content=structured, is_error=result.is_error)


def ok(text: str, structured: Mapping[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(text=text)], structured_content=dict(structured))


def failure(message: str, code: str, param: str | None = None) -> types.CallToolResult:
    error = {"code": code, "message": message, "param": param}
    return types.CallToolResult(content=[types.TextContent(text=f"{code}: {message}")],
                                structured_content={"error": error}, is_error=True)


def api_failure(tool: str, answer: Answer) -> types.CallToolResult:
    """The API's refusal: its code (and param) in memfed's vocabulary outside the fence, its message
    inside, since a message can quote what a provider answered or the name of a record's source."""
    if answer.route_missing:
        return failure(f"{tool} is not available on this server: it does not serve {answer.method} "
                       f"{answer.path} yet.", "memfed_route_not_found")
    error = answer.error
    code = str(error.get("code"))
    code = code if _TOKEN.fullmatch(code) else "memfed_unexpected_answer"
    param = error.get("param") if isinstance(error.get("param"), str) and _TOKEN.fullmatch(error["param"]) else None
    message = str(error.get("message"))
    head = f"{code}: {tool} was refused" + (f" (param {param})" if param else "") + "; the API's message follows."
    structured = {"error": {"code": code, "message": message, "param": param}}
    return types.CallToolResult(content=[types.TextContent(text="\n".join([head, fence_text("The message", message)]))],
                                structured_content=structured, is_error=True)


def _json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, indent=1, sort_keys=True)


def _lines(items: Sequence[Any]) -> str:
    """One compact JSON value per line: a list an agent scans, at a fraction of the tokens of indented JSON."""
    return "\n".join(json.dumps(i, ensure_ascii=False, sort_keys=True, separators=(", ", ": ")) for i in items)


def _server_lines(body: Mapping[str, Any]) -> list[str]:
    """What the server says about an answer, outside the fence: it is not memory content. Only plain
    tokens are printed (a degraded entry, a cursor); one carrying other text is left to the structured
    content, since a provider's words could be in it."""
    lines = []
    degraded = body.get("degraded") if isinstance(body.get("degraded"), list) else []
    if degraded:
        plain = [str(d) for d in degraded if _TOKEN.fullmatch(str(d))]
        if len(plain) < len(degraded):
            plain.append(f"and {len(degraded) - len(plain)} more, in the structured content")
        lines.append("degraded (asked for and not done): " + ", ".join(plain))
    if "abstain" in body:
        lines.append(f"abstain: {str(bool(body['abstain'])).lower()}")
    if body.get("truncated"):
        lines.append("truncated: true")
    if body.get("next"):
        cursor = str(body["next"])
        lines.append(f"next cursor: {cursor}" if _TOKEN.fullmatch(cursor) else
                     "next cursor: in the structured content (`next`)")
    return lines


def _place(memory: Mapping[str, Any]) -> dict[str, Any]:
    keep = ("id", "name", "description", "privileges", "records", "children", "parent_id")
    return {k: memory[k] for k in keep if k in memory}


def records(body: Mapping[str, Any], items: Sequence[Mapping[str, Any]], lead: str = "") -> types.CallToolResult:
    """Records (or recall hits `{record, memory}`) as one fenced block plus the server's own lines."""
    marked = mark_untrusted(dict(body))
    text = "\n".join([*([lead] if lead else []), fence_records(mark_untrusted(list(items))), *_server_lines(body)])
    return ok(text, marked)


def recall(body: Mapping[str, Any]) -> types.CallToolResult:
    """A §6.3 answer: the results fenced, then where the agent can go next (fenced: names and
    descriptions are written by people and agents too)."""
    hits = [h for h in body.get("results") or [] if isinstance(h, Mapping)]
    marked = mark_untrusted(dict(body))
    parts = [fence_records(mark_untrusted(hits))]
    places: list[dict[str, Any]] = []
    if isinstance(body.get("parent"), Mapping):
        places.append({"place": "parent", **_place(body["parent"])})
    if isinstance(body.get("children"), list):
        places += [{"place": "child", **_place(c)} for c in body["children"] if isinstance(c, Mapping)]
    if places:
        parts.append(fence_text("Where you can go next: the parent and the children you may read", _lines(places)))
    parts.extend(_server_lines(body))
    return ok("\n".join(parts), marked)


def memories(body: Mapping[str, Any], heading: str) -> types.CallToolResult:
    data = [_place(m) for m in body.get("data") or [] if isinstance(m, Mapping)]
    text = "\n".join([fence_text(heading, _lines(data) if data else "(none)"), *_server_lines(body)])
    return ok(text, body)


def graph(body: Mapping[str, Any]) -> types.CallToolResult:
    nodes = [n for n in body.get("nodes") or [] if isinstance(n, Mapping)]
    edges = body.get("edges") or []
    edge_text = _lines(edges) if edges else "(none)"
    parts = [fence_records(mark_untrusted(nodes)), fence_text("Edges (from -> to, rel)", edge_text),
             *_server_lines(body)]
    return ok("\n".join(parts), mark_untrusted(dict(body)))


def data(label: str, body: Any) -> types.CallToolResult:
    """An answer that is not records (a query's rows, an operation's output, named query definitions):
    fenced whole, and said to be untrusted as a whole."""
    structured = mark_untrusted(body) if isinstance(body, dict) else {"data": mark_untrusted(body)}
    structured.setdefault("trust", "untrusted")
    return ok(fence_text(label, _json(body)), structured)


def operation(name: str, body: Any) -> types.CallToolResult:
    """An operation's answer: the version it appended (when it did) fenced as a record, and its own
    free-form result fenced as data. A bare record is taken as that version."""
    if not isinstance(body, Mapping):
        return data(f"The output of operation {name}", body)
    record = body if body.get("object") == "memory.record" else body.get("record")
    result = None if record is body else body.get("result")
    parts = [f"Ran operation {name}."]
    if isinstance(record, Mapping):
        parts.append(fence_records(mark_untrusted([record])))
    if result:
        parts.append(fence_text(f"The result of operation {name}", _json(result)))
    elif not isinstance(record, Mapping):
        parts.append(fence_text(f"The output of operation {name}", _json(body)))
    structured = mark_untrusted(dict(body))
    structured.setdefault("trust", "untrusted")
    return ok("\n".join(parts), structured)


def rows(label: str, body: Mapping[str, Any]) -> types.CallToolResult:
    """A provider's rows: the columns, then one JSON array per row, fenced whole; bounds outside."""
    table = [list(body.get("columns") or []), *(r for r in body.get("rows") or [] if isinstance(r, list))]
    structured = mark_untrusted(dict(body))
    structured.setdefault("trust", "untrusted")
    text = "\n".join([fence_text(f"{label}: the columns, then one row per line", _lines(table)),
                      *_server_lines(body)])
    return ok(text, structured)


def query_answer(label: str, body: Any) -> types.CallToolResult:
    """A query's answer: the §6.3 shape when it is records, the provider's own rows otherwise (§6.5)."""
    if isinstance(body, Mapping) and isinstance(body.get("results"), list):
        return recall(body)
    if isinstance(body, Mapping) and isinstance(body.get("rows"), list):
        return rows(label, body)
    return data(label, body)
