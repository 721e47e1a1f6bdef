"""Which tools a caller is offered (§9.1), decided afresh on every listing.

- The four read tools always: what they reach is the API's decision, call by call.
- The write tools only to a caller that holds `write` somewhere. A grant gives its privileges on the
  memory it sits on (a cutoff only stops grants from above), so the union of the privileges in the
  grants to the caller's principals is exactly what it holds somewhere: no walk of the tree needed.
- `memory_run_query` when a memory the caller may read lists a named query it may run.
- `memory_operate` when a registered type has an operation whose privilege the caller holds somewhere.
- `memory_query` when the provider of a memory the caller may read declares `queries.free`.
- `erase` never: it is a person's act (§5.2, §13).

The last three are read off the API's own answers (capability documents, the types listing, each
memory's named queries), with the caller's credential. A route this server does not serve yet
simply offers nothing.

An agent reads a tool description as the server's own instructions, so a description carries only
memfed's words: the tool's fixed text, memory ids, counts, language names, and what memfed's adapters
say of their types and query languages. Nothing a member or a vendor wrote is in one: no memory name,
no named query's name, description or params (memory_list with show=queries hands those over as
fenced data, like records).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from gateway.agent.mcp.api import Answer, Api, Caller, segment
from gateway.agent.mcp.tools import READ_TOOLS, SPECS, WRITE_TOOLS, ToolSpec
from policies import access, reach

READABLE_CAP = 200  # memories walked to learn which providers a caller reads from
QUERY_SCAN_CAP = 25  # memories asked for their named queries on one listing (~2 ms each, in-process)
QUERY_CONCURRENCY = 4  # of those asks at once: more only queue on the state store's connections
DESCRIBE_CAP = 40  # entries a description enumerates
TEXT_CAP = 200  # characters of an operation's description quoted into a tool description
SCHEMA_CAP = 4000  # characters of a provider's query schema shown in memory_query's description

# (provider name, language) -> what a statement in that language sees of a memory, in the adapter's own
# words (memfed's code, never a vendor's or a member's text), when the adapter says.
SchemaOf = Callable[[str, str], str | None]
# A memory id (memfed mints them) and a language name, as they may stand in a description.
_ID = re.compile(r"[A-Za-z0-9_.:-]{1,200}")
_LANGUAGE = re.compile(r"[A-Za-z][A-Za-z0-9_.+-]{0,49}")


@dataclass(frozen=True)
class Readable:
    """A memory the caller may read, as the tree stood when the listing began (it may change while
    the listing awaits the API)."""

    id: str
    provider: str
    privileges: frozenset[str]


def readable_memories(tree: Any, principals: frozenset[str], cap: int = READABLE_CAP) -> list[Readable]:
    """Memories the caller may read, breadth first from where it enters the tree, at most `cap`."""
    found: dict[str, Readable] = {}
    entries = sorted(access.entry_points(tree, principals), key=lambda m: (tree.depth_of(m), m))
    for entry in entries:
        for memory_id, _, privileges in access.walk_down(tree, principals, entry):
            if len(found) >= cap:
                return list(found.values())
            node = tree.get(memory_id)
            if node is not None and "read" in privileges and memory_id not in found:
                found[memory_id] = Readable(memory_id, node.provider, privileges)
    return list(found.values())


def tool(spec: ToolSpec, extra: Iterable[str] = ()) -> types.Tool:
    lines = list(extra)
    return types.Tool(
        name=spec.name, title=spec.title,
        description="\n".join([spec.description, *lines]) if lines else spec.description,
        input_schema=spec.input_schema,
        annotations=types.ToolAnnotations(title=spec.title, read_only_hint=spec.read_only,
                                          destructive_hint=spec.destructive, open_world_hint=False),
    )


def _quoted(value: Any, cap: int = TEXT_CAP) -> str:
    """An adapter's words inside a tool description: JSON-quoted (one line) and cut short."""
    text = str(value if value is not None else "")
    return json.dumps(text if len(text) <= cap else text[:cap] + "…", ensure_ascii=False)


def _compact(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)
    return text if len(text) <= 600 else text[:600] + "…"


def _data(body: Any) -> list[Mapping[str, Any]]:
    items = body.get("data") if isinstance(body, Mapping) else body
    return [i for i in items or [] if isinstance(i, Mapping)] if isinstance(items, list) else []


async def _providers(api: Api, caller: Caller) -> dict[str, Mapping[str, Any]]:
    answer = await api.call(caller, "GET", "/v1/memories/providers")
    return {str(d.get("id")): d for d in _data(answer.body)} if answer.ok else {}


def _free(doc: Mapping[str, Any]) -> Mapping[str, Any] | None:
    queries = doc.get("queries")
    free = queries.get("free") if isinstance(queries, Mapping) else None
    return free if isinstance(free, Mapping) and free.get("languages") else None


def _named(doc: Mapping[str, Any] | None) -> bool:
    queries = doc.get("queries") if doc else None
    return bool(isinstance(queries, Mapping) and queries.get("named"))


async def named_query_lines(api: Api, caller: Caller, readable: list[Readable],
                            providers: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """One line per memory holding named queries the caller may run, highest in the tree first: its id
    and how many, never a query's name, description or params, which members wrote (memory_list with
    show=queries hands those over as data). Where not every such memory could be asked, a last line says
    so: the tool is then offered even if none was found, since one further down cannot be ruled out."""
    keeping = [m for m in readable if _named(providers.get(m.provider))]
    asked = keeping[:QUERY_SCAN_CAP]
    gate = asyncio.Semaphore(QUERY_CONCURRENCY)

    async def queries_of(memory: Readable) -> Answer:
        async with gate:
            return await api.call(caller, "GET", f"/v1/memories/{segment(memory.id)}/queries")

    answers = await asyncio.gather(*(queries_of(m) for m in asked))
    if any(answer.route_missing for answer in answers):
        return []
    lines: list[str] = []
    for memory, answer in zip(asked, answers, strict=True):
        if not answer.ok or not _ID.fullmatch(memory.id):
            continue
        runnable = [q for q in _data(answer.body) if str(q.get("requires") or "read") in memory.privileges]
        if runnable:
            lines.append(f"- memory_id {memory.id}: {len(runnable)} named "
                         f"{'query' if len(runnable) == 1 else 'queries'}")
    walk_capped = len(readable) >= READABLE_CAP and any(_named(doc) for doc in providers.values())
    if len(keeping) > len(asked) or walk_capped:
        lines.append(f"- perhaps more: only {len(asked)} memories were asked; memory_list with show=queries "
                     "lists the named queries of any memory")
    return lines


async def operation_lines(api: Api, caller: Caller, held: frozenset[str]) -> list[str]:
    """The operations of registered types: a type is an adapter's description of itself (memfed's code,
    like its capability document), not something a member or a vendor writes."""
    answer = await api.call(caller, "GET", "/v1/memories/types")
    if not answer.ok:
        return []
    lines: list[str] = []
    for kind in _data(answer.body):
        for operation in kind.get("operations") or []:
            if not isinstance(operation, Mapping) or str(operation.get("requires") or "read") not in held:
                continue
            lines.append(f"- on records of type {_quoted(kind.get('type'), 100)}: operation "
                         f"{_quoted(operation.get('name'), 100)}: {_quoted(operation.get('description'))}; "
                         f"input schema {_compact(operation.get('input') or {'type': 'object'})}; "
                         f"requires {operation.get('requires') or 'read'}")
    return lines


def free_query_lines(readable: list[Readable], providers: Mapping[str, Mapping[str, Any]],
                     schema_of: SchemaOf | None = None) -> list[str]:
    """Per language a provider of a readable memory declares: the memories (by id) it applies to, and
    what a statement sees, in the adapter's own words. Memory names are members' words: left out."""
    by_provider: dict[str, list[Readable]] = {}
    for memory in readable:
        if _ID.fullmatch(memory.id):
            by_provider.setdefault(memory.provider, []).append(memory)
    lines: list[str] = []
    for name in sorted(by_provider):
        free = _free(providers.get(name) or {})
        if free is None:
            continue
        memories = by_provider[name]
        shown = ", ".join(m.id for m in memories[:DESCRIBE_CAP])
        more = f" and {len(memories) - DESCRIBE_CAP} more" if len(memories) > DESCRIBE_CAP else ""
        writes = "may write (needs write)" if free.get("write") else "reads only"
        for language in [str(lang) for lang in free.get("languages") or [] if _LANGUAGE.fullmatch(str(lang))]:
            lines.append(f"- language {language} ({writes}), on memories {shown}{more}")
            schema = schema_of(name, language) if schema_of else None
            if schema:
                lines.append(f"  What a statement in {language} sees of one memory:\n" + schema[:SCHEMA_CAP].rstrip())
    return lines


def _capped(lines: list[str]) -> list[str]:
    if len(lines) <= DESCRIBE_CAP:
        return lines
    return [*lines[:DESCRIBE_CAP], f"- and {len(lines) - DESCRIBE_CAP} more (memory_list show=queries lists a "
                                   "memory's own)"]


async def offered_tools(api: Api, caller: Caller, tree: Any, schema_of: SchemaOf | None = None) -> list[types.Tool]:
    principals = caller.principal.principals
    held = reach.held_anywhere(tree, principals)
    offered = [tool(SPECS[name]) for name in READ_TOOLS]
    if "write" in held:
        offered += [tool(SPECS[name]) for name in WRITE_TOOLS]
    readable = readable_memories(tree, principals)
    if not readable:
        return offered
    providers = await _providers(api, caller)
    named, operations = await asyncio.gather(named_query_lines(api, caller, readable, providers),
                                             operation_lines(api, caller, held))
    if named:
        offered.append(tool(SPECS["memory_run_query"], _capped(named)))
    if operations:
        offered.append(tool(SPECS["memory_operate"], _capped(operations)))
    free = free_query_lines(readable, providers, schema_of)
    if free:
        offered.append(tool(SPECS["memory_query"], ["Where you may use it:", *free]))
    return offered
