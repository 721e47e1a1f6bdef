"""Reading the decision log: `GET /v1/audit` and `GET /v1/audit/verify`.

Admins read everything. A member holding `delete` on a memory (who may change its grants anyway) reads
the entries about that memory's subtree, limited to the memories there it holds `delete` on, so the log
never names a memory the reader could not see.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require, require_admin
from gateway.api.models import Strict
from gateway.api.responses_admin import AuditList, VerificationOut
from gateway.audit import AuditQuery
from gateway.audit.query import InvalidCursor
from gateway.base.errors import admin_only, bad_cursor
from gateway.base.limits import Instant
from policies import access, reach


class AuditFilters(Strict):
    principal: str | None = Field(default=None, max_length=200)
    memory_id: str | None = Field(default=None, max_length=200)
    operation: str | None = Field(default=None, max_length=100)
    decision: Literal["allow", "deny"] | None = None
    since: Instant | None = None
    until: Instant | None = None
    order: Literal["oldest", "newest"] = "oldest"
    limit: int = Field(default=100, ge=1, le=1000)
    cursor: str | None = Field(default=None, max_length=500)


async def read_log(call: Call) -> dict[str, Any]:
    query = call.query_as(AuditFilters)
    scope: frozenset[str] | None = None
    if not call.authenticated().is_admin:
        if not query.memory_id:
            raise admin_only("Only administrators read the whole log; give memory_id of a memory you hold delete on.",
                             param="memory_id")
        require(call, query.memory_id, "delete", "audit.read")
        tree = call.services.store.tree
        scope = frozenset(m for m, _level, privileges in access.walk_down(tree, call.authenticated().principals,
                                                                          query.memory_id)
                          if "delete" in privileges)
    else:
        require_admin(call, "audit.read")
    filters = AuditQuery(
        principal=query.principal,
        memory_id=query.memory_id if scope is None else None,
        memory_ids=scope,
        operation=query.operation,
        decision=query.decision,
        since=query.since,
        until=query.until,
        newest_first=query.order == "newest",
    )
    await call.services.audit.flush()  # what was decided up to this request, not up to the last batch
    try:
        entries, next_cursor = await call.services.audit.query(filters, query.cursor, query.limit)
    except InvalidCursor:
        raise bad_cursor("memfed_invalid_request") from None
    if scope is not None:
        entries = [_hide_unseen(call, e) for e in entries]
    return {"object": "list", "data": entries, "next": next_cursor}


def _hide_unseen(call: Call, entry: dict[str, Any]) -> dict[str, Any]:
    """A reason names the grants that decided, often on nodes above the reader's subtree: it is cut at
    the reader's reach (policies/reach.py), so a grant up there is only "inherited from above your reach"."""
    tree, principals = call.services.store.tree, call.authenticated().principals
    return {**entry, "reason": reach.cut_reason(entry["reason"], lambda m: reach.sees(tree, principals, m))}


async def verify_log(call: Call) -> dict[str, Any]:
    require_admin(call, "audit.verify")
    await call.services.audit.flush()
    report = await call.services.audit.verify()
    return {"object": "audit.verification", "ok": report.ok, "checked": report.checked,
            "broken_at": report.broken_at, "problem": report.problem, "sealed_from": report.sealed_from}


ENDPOINTS = [
    Endpoint("GET", "/v1/audit", read_log,
             "The decision log, filtered and paginated (admins; holders of delete for their subtree).",
             "audit.read", query=AuditFilters, invalid_code="memfed_invalid_request",
             response=AuditList, tags=("audit",)),
    Endpoint("GET", "/v1/audit/verify", verify_log,
             "Check the hash chain: any edited, deleted, inserted or reordered entry and where it breaks.",
             "audit.verify", response=VerificationOut, tags=("audit",)),
]
