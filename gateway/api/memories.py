"""The tree (§2): create, read, list, change and delete memories."""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from adapters.base import Provider
from gateway.api import tree_cursors as cursors
from gateway.api._calls import handle_for, on_provider, record_counts
from gateway.api._endpoint import Call, Endpoint
from gateway.api.guard import require, require_admin, require_visible, tree_change
from gateway.api.models import CreateMemory, ListMemories, UpdateMemory
from gateway.api.render import memory_json, page_json
from gateway.api.responses import MemoryDeleted, MemoryList, MemoryOut
from gateway.base.errors import invalid, memory_not_found, unsupported
from gateway.state.entries import EntryKey, still_entry
from gateway.state.tree import MemoryNode
from policies import access, pages


async def render_memories(call: Call, nodes: Sequence[MemoryNode]) -> list[dict[str, Any]]:
    tree = call.services.store.tree
    principals = call.authenticated().principals
    counts = await record_counts(call.services, nodes, call)
    return [memory_json(tree, principals, n, access.effective(tree, principals, n.id), counts.get(n.id))
            for n in nodes]


async def create_memory(call: Call) -> dict[str, Any]:
    body = call.body_as(CreateMemory)
    services = call.services
    tree = services.store.tree
    provider = body.provider
    async with tree_change(call):  # the parent cannot move, go or change hands between check and insert
        if body.parent_id is None:
            require_admin(call, "memories.create_root")
        else:
            parent = require(call, body.parent_id, "create", "memories.create")
            provider = provider or parent.provider
        provider = provider or services.providers.default
        if services.providers.get(provider) is None:
            raise invalid(f"No provider named {provider!r} is configured.", param="provider")
        node = await services.store.create_memory(
            name=body.name, description=body.description, parent_id=body.parent_id,
            restricted=body.restricted, provider=provider, created_by=call.authenticated().member_id,
        )
    return memory_json(tree, call.authenticated().principals, node,
                       access.effective(tree, call.authenticated().principals, node.id), 0)


async def get_memory(call: Call) -> dict[str, Any]:
    node, _ = require_visible(call, call.path["memory_id"], "memories.get")
    return (await render_memories(call, [node]))[0]


async def list_memories(call: Call) -> dict[str, Any]:
    """A page of one listing, resumed from the cursor's keys (gateway/api/tree_cursors.py): each page costs
    what it shows (and at most pages.BUDGET memories walked), not what lies before it."""
    query = call.query_as(ListMemories)
    tree = call.services.store.tree
    principals = call.authenticated().principals
    resume: str | None
    if query.parent:
        require_visible(call, query.parent, "memories.list")
        page = pages.children_page(tree, principals, query.parent, cursors.child_after(query.cursor), query.limit)
        ids = page.ids
        resume = cursors.child_cursor(page.resume[-1]) if page.resume else None
    elif query.ancestor:
        require_visible(call, query.ancestor, "memories.list")
        after, complete = cursors.subtree_after(query.cursor)
        try:
            page = pages.descendants_page(tree, principals, query.ancestor, after, query.limit, complete=complete)
        except pages.CursorGone:
            raise cursors.gone() from None
        ids = page.ids
        resume = cursors.subtree_cursor(page.resume) if page.resume else None
    else:
        ids, resume = await _entry_page(call, cursors.entry_after(query.cursor), query.limit)
    nodes = [tree.get(m) for m in ids]
    data = await render_memories(call, [n for n in nodes if n is not None])
    return page_json(data, resume)


async def _entry_page(call: Call, after: EntryKey | None, limit: int) -> tuple[list[str], str | None]:
    store = call.services.store
    principals = call.authenticated().principals
    keys = (await store.entries.sorted_for(principals)).keys
    start = bisect_right(keys, after) if after is not None else 0
    ids: list[str] = []
    for index in range(start, len(keys)):
        key = keys[index]
        if not still_entry(store.tree, principals, key[2]):
            continue  # the tree changed since the list was made
        if len(ids) == limit:
            return ids, cursors.entry_cursor(keys[index - 1])
        ids.append(key[2])
    return ids, None


async def update_memory(call: Call) -> dict[str, Any]:
    body = call.body_as(UpdateMemory)
    memory_id = call.path["memory_id"]
    services = call.services
    tree = services.store.tree
    given = body.model_fields_set
    async with tree_change(call):  # checked and written with no other tree change in between
        node, _ = require_visible(call, memory_id, "memories.update")
        if "provider" in given and body.provider != node.provider:
            raise unsupported("A memory's provider is changed by migrating it (memfed migrate), which keeps "
                              "every record and id.", param="provider")
        changes: dict[str, Any] = {}
        if given & {"name", "description"}:
            require(call, memory_id, "write", "memories.update")
            if "name" in given:
                changes["name"] = body.name
            if "description" in given:
                changes["description"] = body.description or ""
        if "restricted" in given and body.restricted != node.restricted:
            # Restricting changes who may reach the branch, like a change of grants.
            require(call, memory_id, "delete", "memories.restrict")
            changes["restricted"] = body.restricted
        # Compared with the parent as the caller sees it: against the true one, a hidden parent's id would
        # be told from a random one by the answer (a no-op here, a refusal there).
        if "parent_id" in given and body.parent_id != access.visible_parent(tree, call.authenticated().principals,
                                                                             memory_id):
            require(call, memory_id, "delete", "memories.move")
            if body.parent_id is None:
                require_admin(call, "memories.move_to_root")
            else:
                if not tree.exists(body.parent_id):
                    raise memory_not_found()
                require(call, body.parent_id, "create", "memories.move")
                if tree.is_descendant(body.parent_id, memory_id):
                    raise invalid("The new parent is this memory or one below it: that would make a cycle.",
                                  param="parent_id")
            services.guard_not_busy(memory_id)
            changes["parent_id"] = body.parent_id
        if changes:
            node = await services.store.update_memory(memory_id, **changes)
    return (await render_memories(call, [node]))[0]


def _dropper(memory_id: str) -> Callable[[Provider], Awaitable[None]]:
    def drop(provider: Provider) -> Awaitable[None]:
        return provider.drop_memory(memory_id)

    return drop


async def delete_memory(call: Call) -> dict[str, Any]:
    memory_id = call.path["memory_id"]
    services = call.services
    store = services.store
    async with tree_change(call):
        require(call, memory_id, "delete", "memories.delete")
        services.guard_not_busy(memory_id)
        doomed = store.tree.subtree(memory_id)
        # Claimed before the lock is let go: while the providers drop the records, nothing is created,
        # moved or granted in this subtree, so what is removed below is exactly what was dropped.
        claim = store.claims.claim(doomed)
        seen = sum(1 for _m, _level, privileges in access.walk_down(store.tree, call.authenticated().principals,
                                                                    memory_id) if privileges)
    try:
        # Records first: if a provider fails, the tree still shows every memory whose records remain.
        for node_id in reversed(doomed):
            node = store.tree.get(node_id)
            if node is not None:
                handle_for(services, node)
                await on_provider(services, node, _dropper(node_id), read=False)
        async with tree_change(call):
            removed = await store.delete_subtree(memory_id, claim)
    finally:
        store.claims.release(claim)
    # Counted as the caller saw the subtree: a number of memories it could not see would tell it how many
    # hide below; it learns only that some went too.
    return {"id": memory_id, "object": "memory", "deleted": True, "memories_deleted": seen,
            "unseen_memories_deleted": len(removed) > seen}


ENDPOINTS = [
    Endpoint("POST", "/v1/memories", create_memory, "Create a memory (a root needs an admin).",
             "memories.create", body=CreateMemory, response=MemoryOut, status=201, write=True, tags=("memories",)),
    Endpoint("GET", "/v1/memories", list_memories,
             "One level of the tree (?parent=), every readable descendant (?ancestor=), or entry points.",
             "memories.list", query=ListMemories, response=MemoryList, tags=("memories",)),
    Endpoint("GET", "/v1/memories/{memory_id}", get_memory, "One memory.", "memories.get", response=MemoryOut,
             tags=("memories",)),
    Endpoint("PUT", "/v1/memories/{memory_id}", update_memory, "Rename, describe, restrict or move a memory.",
             "memories.update", body=UpdateMemory, response=MemoryOut, write=True, tags=("memories",)),
    Endpoint("DELETE", "/v1/memories/{memory_id}", delete_memory,
             "Delete a memory, its records and its descendants.", "memories.delete", write=True,
             response=MemoryDeleted, tags=("memories",)),
]
