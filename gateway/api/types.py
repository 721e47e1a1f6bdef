"""Types and their operations (§8): the listing of every type, and running a type's operation on a record.

The listing is the core types every server understands, then each type a configured provider registers
(an adapter that implements `adapters.operations.TypedProvider`). Types are a provider's description of
itself, like its capability document, so any authenticated caller may list them.

An operation runs on one record under its memory's access: the caller must see the memory, and hold
the privilege the operation `requires` on it, checked through the guard (and logged) like every other
route. The record's own type decides which operation that is, so the record is read before the final
check; it is read only for a caller that holds at least one privilege the operation could need.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from pydantic import Field

from adapters import degraded as entries
from adapters.base import CORE_TYPES, Provider, Unsupported
from adapters.operations import OperationInfo, OperationResult, TypedProvider, TypeInfo, find_type
from gateway.api._calls import handle_for, on_provider, with_alias
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require, require_visible
from gateway.api.models import Strict
from gateway.api.records import render_written, writer_for
from gateway.api.responses import OperationOut
from gateway.api.responses_admin import TypeList
from gateway.base.clock import now
from gateway.base.errors import invalid, operation_not_found, unsupported

if TYPE_CHECKING:
    from gateway.services import Services

log = logging.getLogger("memfed.api.types")

# §4.1's table, as the listing describes each core type.
CORE_DESCRIPTIONS = {
    "episode": "Raw experience as it arrived: a turn, a transcript, an action and its result, a document. "
               "Append-only.",
    "fact": "One thing worth remembering, as it was said.",
    "note": "A document an agent or a person wrote and maintains.",
    "procedure": "A how-to with the situation it applies to.",
    "link": "A pointer to something kept elsewhere: an address and a description, no content of its own.",
    "entity": "Something records are about: a person, a company, a product, a place. Its title is its name; "
              "its content is what is known of it.",
}
CORE_TEXT = "the title and the text of every part, file parts included"


class Operate(Strict):
    input: dict[str, Any] = Field(default_factory=dict)


def _core_entries() -> list[dict[str, Any]]:
    return [{"type": name, "description": CORE_DESCRIPTIONS[name], "schema": {"type": "object"},
             "text": CORE_TEXT, "operations": [], "x.memfed": {"core": True, "providers": []}}
            for name in CORE_TYPES]


def registered(services: Services) -> tuple[list[tuple[str, TypeInfo]], list[str]]:
    """(provider name, type) for every type a configured provider registers, and the providers whose
    listing failed. Core types a provider claims are left out: their meaning is the protocol's."""
    found: list[tuple[str, TypeInfo]] = []
    failed: list[str] = []
    for name, handle in services.providers.handles.items():
        provider = handle.provider
        if not isinstance(provider, TypedProvider):
            continue
        try:
            infos = list(provider.types())
        except Exception:  # an adapter bug must not fail the listing of every other provider's types
            log.exception("listing the types of provider %s failed", name)
            failed.append(entries.provider_entry(name, entries.entry("types", "unavailable")))
            continue
        found.extend((name, info) for info in infos if info.type not in CORE_TYPES)
    return found, failed


async def list_types(call: Call) -> dict[str, Any]:
    entries = _core_entries()
    found, failed = registered(call.services)
    # One entry per distinct description: two providers that register the same type alike share it.
    by_description: dict[str, dict[str, Any]] = {}
    for provider_name, info in found:
        doc = info.document()
        key = json.dumps(doc, sort_keys=True, default=str)
        if key not in by_description:
            by_description[key] = {**doc, "x.memfed": {"core": False, "providers": []}}
            entries.append(by_description[key])
        by_description[key]["x.memfed"]["providers"].append(provider_name)
    return {"object": "list", "data": entries, "next": None, "degraded": failed}


def _typed(services: Services, node: Any) -> TypedProvider:
    provider = handle_for(services, node).provider
    if not isinstance(provider, TypedProvider):
        raise unsupported("The memory's provider registers no types, so it has no operations.")
    return provider


def _operation_of(infos: list[TypeInfo], type_name: str, name: str) -> OperationInfo:
    info = find_type(infos, type_name)
    operation = info.operation(name) if info else None
    if operation is None:
        raise invalid(f"Records of type {type_name!r} have no operation {name!r}.", param="name")
    return operation


def _runner(memory_id: str, record_id: str, name: str, given: Mapping[str, Any], call: Call,
            ) -> Callable[[Provider], Awaitable[OperationResult]]:
    by, at = writer_for(call), now()

    async def run(provider: Provider) -> OperationResult:
        if not isinstance(provider, TypedProvider):  # the provider changed under the request
            raise Unsupported("The memory's provider registers no types.")
        return await provider.operate(memory_id, record_id, name, given, by, at)

    return run


async def operate(call: Call) -> dict[str, Any]:
    body = call.body_as(Operate)
    name = call.path["name"]
    services = call.services
    node, held = require_visible(call, call.path["memory_id"], "records.operate")
    infos = list(_typed(services, node).types())
    needs = {op.requires for info in infos for op in info.operations if op.name == name}
    if not needs:
        raise operation_not_found(name)
    if not needs & held:
        require(call, node.id, sorted(needs)[0], "records.operate")  # refuses, and logs why
    current = await with_alias(services, node, call.path["record_id"],
                               lambda rid: lambda p: p.get(node.id, rid), read=True)
    operation = _operation_of(infos, current.type, name)
    require(call, node.id, operation.requires, "records.operate")
    outcome = await on_provider(services, node, _runner(node.id, current.id, name, body.input, call),
                                read=operation.requires == "read")
    return {
        "object": "memory.operation",
        "operation": name,
        "memory_id": node.id,
        "record_id": current.id,
        "type": current.type,
        "result": dict(outcome.result),
        "record": render_written(call, outcome.record, node) if outcome.record is not None else None,
    }


ENDPOINTS = [
    Endpoint("GET", "/v1/memories/types", list_types,
             "The core types and every type a configured provider registers, with schemas and operations.",
             "types.list", response=TypeList, tags=("types",)),
    Endpoint("POST", "/v1/memories/{memory_id}/records/{record_id}/operations/{name}", operate,
             "Run an operation of the record's type; needs the privilege the operation requires.",
             "records.operate", body=Operate, write=True, response=OperationOut, tags=("types",)),
]
