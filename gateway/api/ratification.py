"""Ratification of drafts (adapters/ratification.py): approve or reject a record a provider holds as a draft.

`POST /v1/memories/{memory_id}/records/{record_id}/ratification` with `{"decision": "approve"|"reject"}`
needs `write` on the memory, as any change of its records does. It is offered only where the memory's
provider keeps drafts (a memory-provider plugin declaring `ratification_supported`); elsewhere it is 422
`memory_unsupported`. Approve answers the record, now no draft; reject discards the draft entirely.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal

from adapters.base import Provider, Record, Unsupported
from adapters.ratification import RatifyingProvider
from gateway.api._calls import handle_for, with_alias
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.models import Strict
from gateway.api.records import render
from gateway.api.responses import RatificationOut
from gateway.base.errors import unsupported


class Ratify(Strict):
    decision: Literal["approve", "reject"]


def _approve(memory_id: str) -> Callable[[str], Callable[[Provider], Awaitable[Record]]]:
    def on(record_id: str) -> Callable[[Provider], Awaitable[Record]]:
        async def run(provider: Provider) -> Record:
            if not isinstance(provider, RatifyingProvider):  # the provider changed under the request
                raise Unsupported("The memory's provider keeps no drafts.")
            return await provider.approve(memory_id, record_id)
        return run
    return on


def _reject(memory_id: str) -> Callable[[str], Callable[[Provider], Awaitable[None]]]:
    def on(record_id: str) -> Callable[[Provider], Awaitable[None]]:
        async def run(provider: Provider) -> None:
            if not isinstance(provider, RatifyingProvider):
                raise Unsupported("The memory's provider keeps no drafts.")
            await provider.reject(memory_id, record_id)
        return run
    return on


async def ratify(call: Call) -> dict[str, Any]:
    body = call.body_as(Ratify)
    node = require(call, call.path["memory_id"], "write", "records.ratify")
    provider = handle_for(call.services, node).provider
    if not isinstance(provider, RatifyingProvider) or not provider.ratifies():
        raise unsupported("The memory's provider keeps no drafts, so there is nothing to approve or reject.")
    record_id = call.path["record_id"]
    answer: dict[str, Any] = {"object": "memory.ratification", "memory_id": node.id, "record_id": record_id,
                              "decision": body.decision}
    if body.decision == "approve":
        record = await with_alias(call.services, node, record_id, _approve(node.id), read=False)
        answer["record"] = render(call, record, node)
    else:
        await with_alias(call.services, node, record_id, _reject(node.id), read=False)
        answer["record"] = None
    return answer


ENDPOINTS = [
    Endpoint("POST", "/v1/memories/{memory_id}/records/{record_id}/ratification", ratify,
             "Approve a draft into a record, or reject (discard) it; needs write, where the provider keeps drafts.",
             "records.ratify", body=Ratify, write=True, response=RatificationOut, tags=("records",)),
]
