"""Access checks as the routes use them: decide, record the decision, answer 404 or 403.

The rules are in policies/access.py; this module only applies them to a request and logs each
decision with its reason. A memory the caller holds nothing on answers exactly like a missing one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from gateway.api._endpoint import Call
from gateway.base.errors import ApiError, admin_only, busy, invalid, memory_forbidden, memory_not_found
from gateway.state.tree import MemoryNode
from gateway.state.tree_writes import TreeRefused
from policies import access


def require(call: Call, memory_id: str, privilege: str, operation: str) -> MemoryNode:
    tree = call.services.store.tree
    node = tree.get(memory_id)
    verdict = access.decide(tree, call.authenticated().principals, memory_id, privilege)
    call.audit(operation, memory_id, privilege, verdict.allowed, verdict.reason)
    if node is None or not verdict.visible:
        raise memory_not_found()
    if not verdict.allowed:
        raise memory_forbidden(privilege)
    return node


def require_visible(call: Call, memory_id: str, operation: str) -> tuple[MemoryNode, frozenset[str]]:
    """The memory and the caller's privileges on it, when it holds any."""
    tree = call.services.store.tree
    node = tree.get(memory_id)
    decision = access.explain(tree, call.authenticated().principals, memory_id) if node else None
    if node is None or decision is None or not decision.privileges:
        reason = decision.reason("read") if decision else "refused: no such memory"
        call.audit(operation, memory_id, None, False, reason)
        raise memory_not_found()
    call.audit(operation, memory_id, None, True, "allowed: holds " + ",".join(sorted(decision.privileges)))
    return node, decision.privileges


def require_admin(call: Call, operation: str) -> None:
    if not call.authenticated().is_admin:
        call.audit(operation, None, "admin", False, "refused: not an administrator")
        raise admin_only()
    call.audit(operation, None, "admin", True, "allowed: administrator")


@asynccontextmanager
async def tree_change(call: Call) -> AsyncIterator[None]:
    """Hold the tree still from a route's access checks to its write (gateway/state/tree_writes.py), and
    answer what the rows refuse inside the writing transaction as the route's own checks would."""
    try:
        async with call.services.store.tree_lock.held():
            yield
    except TreeRefused as refused:
        raise tree_refusal(refused) from None


def tree_refusal(refused: TreeRefused) -> ApiError:
    if refused.kind == "not_found":
        return memory_not_found()
    if refused.kind == "busy":
        return busy(refused.message)
    return invalid(refused.message, param="parent_id")
