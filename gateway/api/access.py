"""Why: `GET /v1/memories/{id}/access?principal=member:X` — X's privileges here and how they arise.

For an admin, or a caller holding `delete` on the memory (who may change its grants anyway). The
derivation names each contributing grant, the node it sits on and whether it comes through a group,
and where a restricted memory cuts inheritance off. A caller who is not an admin is told it as far up as
it can see, and of the rest only that it is inherited from above its reach.
"""

from __future__ import annotations

from typing import Any

from pydantic import Field

from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require
from gateway.api.models import PRINCIPAL_PATTERN, Strict
from gateway.api.responses_admin import AccessOut
from gateway.base.errors import invalid
from gateway.state.store import StateStore
from policies import access, reach


class AccessQuery(Strict):
    principal: str = Field(min_length=3, max_length=200, pattern=PRINCIPAL_PATTERN,
                           description="member:<id> or group:<id>")


def principals_of(store: StateStore, principal: str) -> frozenset[str] | None:
    """Every grant principal that speaks for `principal`: a member with its groups, or a group alone."""
    kind, _, ident = principal.partition(":")
    if kind == "member" and store.member(ident) is not None:
        return frozenset((principal, *(f"group:{g}" for g in store.groups_of(ident))))
    if kind == "group" and store.group(ident) is not None:
        return frozenset((principal,))
    if kind.startswith("x.") and ident:
        return frozenset((principal,))
    return None


def explain_document(store: StateStore, memory_id: str, principal: str, principals: frozenset[str],
                     viewer: frozenset[str] | None) -> dict[str, Any]:
    """The derivation as JSON; with `viewer` set, cut at that viewer's reach (policies/reach.py): the path
    stops below the first memory it cannot see, and grants above are only "inherited from above"."""
    tree = store.tree
    decision = access.explain(tree, principals, memory_id)
    head = {
        "object": "memory.access",
        "memory_id": memory_id,
        "principal": principal,
        "groups": sorted(p for p in principals if p.startswith("group:") and p != principal),
        "privileges": [p for p in access.PRIVILEGES if p in decision.privileges],
    }
    if viewer is None:
        return {**head, "grants": [_grant_entry(c) for c in decision.contributions],
                "inherited_from_above_reach": False, "cutoff_at": decision.cutoff_at,
                "inheritance_cut": decision.cutoff_at is not None, "path": list(decision.path),
                "reasons": {p: decision.reason(p) for p in access.PRIVILEGES}}
    seen = reach.within_reach(decision, lambda node: bool(access.effective(tree, viewer, node)))
    return {**head, "grants": [_grant_entry(c) for c in seen.contributions],
            "inherited_from_above_reach": bool(seen.from_above), "cutoff_at": seen.cutoff_at,
            "inheritance_cut": seen.cutoff_at is not None, "path": list(seen.path),
            "reasons": {p: seen.reason(p) for p in access.PRIVILEGES}}


def _grant_entry(contribution: access.Contribution) -> dict[str, Any]:
    grant = contribution.grant
    return {
        "grant_id": grant.id,
        "memory_id": grant.memory_id,
        "principal": grant.principal,
        "via_group": grant.principal.startswith("group:"),
        "implicit": grant.implicit,
        "privileges": [p for p in access.PRIVILEGES if p in grant.privileges],
    }


async def explain_access(call: Call) -> dict[str, Any]:
    query = call.query_as(AccessQuery)
    memory_id = call.path["memory_id"]
    store = call.services.store
    if call.authenticated().is_admin and store.tree.exists(memory_id):
        call.audit("access.explain", memory_id, "admin", True, "allowed: administrator")
        viewer = None
    else:
        require(call, memory_id, "delete", "access.explain")
        viewer = call.authenticated().principals
    principals = principals_of(store, query.principal)
    if principals is None:
        raise invalid(f"No such principal {query.principal!r}.", param="principal")
    return explain_document(store, memory_id, query.principal, principals, viewer)


ENDPOINTS = [
    Endpoint("GET", "/v1/memories/{memory_id}/access", explain_access,
             "Why: a principal's effective privileges on this memory and their derivation.", "access.explain",
             query=AccessQuery, response=AccessOut, tags=("grants",)),
]
