"""Grants (§3.1): who holds what on a memory, and on which node each grant sits."""

from __future__ import annotations

from typing import Any

from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require, tree_change
from gateway.api.models import CreateGrant
from gateway.api.render import page_json
from gateway.api.responses import GrantDeleted, GrantList, GrantOut
from gateway.base.errors import grant_not_found, invalid
from policies import access, reach
from policies.access import Grant


def grant_json(grant: Grant) -> dict[str, Any]:
    return {
        "id": grant.id, "object": "memory.grant", "memory_id": grant.memory_id, "principal": grant.principal,
        "privileges": [p for p in access.PRIVILEGES if p in grant.privileges], "implicit": grant.implicit,
    }


async def list_grants(call: Call) -> dict[str, Any]:
    """Grants that reach this memory: its own and its ancestors' up to the cutoff, on nodes the caller sees."""
    memory_id = call.path["memory_id"]
    require(call, memory_id, "read", "grants.list")
    tree = call.services.store.tree
    principals = call.authenticated().principals
    return page_json([grant_json(g) for g in reach.grants_in_reach(tree, principals, memory_id)], None)


async def create_grant(call: Call) -> dict[str, Any]:
    memory_id = call.path["memory_id"]
    body = call.body_as(CreateGrant)
    store = call.services.store
    # Checked and written with no tree change in between: a move or a delete of the memory lands either
    # before the check (which then sees it) or after the grant.
    async with tree_change(call):
        require(call, memory_id, "delete", "grants.create")
        problem = access.principal_error(body.principal)
        if problem:
            raise invalid(problem, param="principal")
        kind, _, ident = body.principal.partition(":")
        if (kind == "member" and store.member(ident) is None) or (kind == "group" and store.group(ident) is None):
            raise invalid(f"No {kind} with id {ident!r}.", param="principal")
        grant = await store.add_grant(memory_id, body.principal, frozenset(body.privileges))
    return grant_json(grant)


async def delete_grant(call: Call) -> dict[str, Any]:
    memory_id = call.path["memory_id"]
    store = call.services.store
    async with tree_change(call):
        require(call, memory_id, "delete", "grants.delete")
        grant = store.tree.grant(call.path["grant_id"])
        if grant is None or grant.memory_id != memory_id:
            raise grant_not_found()
        await store.remove_grant(grant.id)
    return {**grant_json(grant), "deleted": True}


ENDPOINTS = [
    Endpoint("GET", "/v1/memories/{memory_id}/grants", list_grants,
             "Who holds what on this memory, and on which node each grant sits.", "grants.list",
             response=GrantList, tags=("grants",)),
    Endpoint("POST", "/v1/memories/{memory_id}/grants", create_grant, "Grant a principal privileges.",
             "grants.create", body=CreateGrant, response=GrantOut, status=201, write=True, tags=("grants",)),
    Endpoint("DELETE", "/v1/memories/{memory_id}/grants/{grant_id}", delete_grant, "Revoke one grant.",
             "grants.delete", write=True, response=GrantDeleted, tags=("grants",)),
]
