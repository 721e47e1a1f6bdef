"""Harnesses (§9): an agent member and two settings, `default_memory_id` and `observe`.

What the agent may use is never stored here. `data` is read off the grants on every request (the
agent's own and its groups'), so a grant added shows at once and a revoked one is gone at once, and
nothing on a harness can widen or narrow what its agent was granted.

Who may read and change a harness: administrators, and the harness's own agent (the member it acts
as). Anyone else is told it does not exist, exactly as for an absent one.
"""

from __future__ import annotations

from typing import Any

from adapters import degraded as entries
from gateway.agent import outbox
from gateway.agent import prime as priming
from gateway.api._endpoint import Call, Endpoint
from gateway.api.agent import log_prime, observe_episodes, prime_memory
from gateway.api.agent_models import CreateHarness, HarnessSettings, PrimeQuery, Turn
from gateway.api.guard import require_admin
from gateway.api.records import parts_from, writer_for
from gateway.api.render import page_json, reader
from gateway.api.responses import HarnessList, HarnessOut
from gateway.api.responses_agent import HarnessMemoriesOut, HarnessPrimeOut, TurnOut
from gateway.base.answers import JSONAnswer
from gateway.base.clock import now, now_ms
from gateway.base.errors import ApiError, harness_not_found, invalid, memories_not_attached
from gateway.base.ids import new_id
from gateway.state.harnesses import Harness
from gateway.state.store import StateStore
from gateway.state.tree import MemoryNode, Tree
from policies import access


def agent_principals(store: StateStore, member_id: str) -> frozenset[str]:
    """Every grant principal that speaks for the agent: itself and each of its groups (§13)."""
    return frozenset((f"member:{member_id}", *(f"group:{g}" for g in store.groups_of(member_id))))


def granted(tree: Tree, principals: frozenset[str]) -> list[tuple[MemoryNode, frozenset[str]]]:
    """Every memory these principals hold a grant on, with the effective privileges there, highest in
    the tree first (then oldest, then by id, so the order is stable)."""
    found = []
    for memory_id, privileges in access.granted(tree, principals).items():
        if (node := tree.get(memory_id)) is not None:
            found.append((node, privileges))
    found.sort(key=lambda pair: (tree.depth_of(pair[0].id), pair[0].created_at, pair[0].id))
    return found


def not_found() -> ApiError:
    return harness_not_found()


async def load(call: Call, operation: str) -> Harness:
    """The harness row, for an administrator or for the harness's own agent; 404 for anyone else."""
    harness_id = call.path["harness_id"]
    row = await call.services.store.harnesses.get(harness_id)
    mine = row is not None and row.agent_member_id == call.authenticated().member_id
    if row is None or not (call.authenticated().is_admin or mine):
        call.audit(operation, None, "harness", False, f"refused: harness {harness_id} is not the caller's")
        raise not_found()
    call.audit(operation, None, "harness", True,
               f"allowed: {'the harness agent' if mine else 'administrator'} on {harness_id}")
    return row


def harness_json(row: Harness) -> dict[str, Any]:
    return {"id": row.id, "object": "harness", "name": row.name, "agent_member_id": row.agent_member_id,
            "principal": f"member:{row.agent_member_id}", "default_memory_id": row.default_memory_id,
            "observe": bool(row.observe), "created_at": row.created_at, "updated_at": row.updated_at}


def memories_json(store: StateStore, row: Harness) -> dict[str, Any]:
    tree = store.tree
    principals = agent_principals(store, row.agent_member_id)
    data = [{"id": node.id, "name": node.name, "description": node.description,
             "privileges": [p for p in access.PRIVILEGES if p in privileges],
             "default": node.id == row.default_memory_id}
            for node, privileges in granted(tree, principals)]
    out: dict[str, Any] = {"object": "harness.memories", "harness_id": row.id,
                           "principal": f"member:{row.agent_member_id}",
                           "default_memory_id": row.default_memory_id, "observe": bool(row.observe),
                           "data": data}
    if row.default_memory_id and not (tree.exists(row.default_memory_id)
                                      and access.can(tree, principals, row.default_memory_id, "write")):
        # Grants changed after the default was set: say so rather than drop turns in silence.
        out["x.memfed"] = {"warnings": ["default_memory_id is no longer a memory the agent may write; "
                                        "turns are not recorded until it is set again"]}
    return out


# ------------------------------------------------------------------ routes


async def create_harness(call: Call) -> dict[str, Any]:
    body = call.body_as(CreateHarness)
    require_admin(call, "harnesses.create")
    store = call.services.store
    if store.member(body.agent_member_id) is None:
        raise invalid(f"No member with id {body.agent_member_id!r}.", param="agent_member_id")
    stamp = now_ms()
    made = Harness(new_id("harness"), body.name, body.agent_member_id, None, True, call.authenticated().member_id,
                   stamp, stamp)
    await store.harnesses.create(made)
    return harness_json(made)


async def list_harnesses(call: Call) -> dict[str, Any]:
    store = call.services.store
    rows = await store.harnesses.listed(None if call.authenticated().is_admin else call.authenticated().member_id)
    return page_json((harness_json(r) for r in rows), None)


async def get_harness(call: Call) -> dict[str, Any]:
    return harness_json(await load(call, "harnesses.get"))


async def delete_harness(call: Call) -> dict[str, Any]:
    require_admin(call, "harnesses.delete")
    row = await load(call, "harnesses.delete")
    await call.services.store.harnesses.delete(row.id)
    return {**harness_json(row), "deleted": True}


async def get_memories(call: Call) -> dict[str, Any]:
    row = await load(call, "harnesses.memories.get")
    return memories_json(call.services.store, row)


def _outside_notice(call: Call, node: MemoryNode) -> str | None:
    handle = call.services.providers.get(node.provider)
    if handle is not None and handle.capabilities().data_location == "gateway":
        return None
    adapter = handle.config.adapter if handle is not None else "unknown"
    return (f"The default memory {node.name!r} is kept by provider {node.provider!r} ({adapter}), outside "
            "this server: while observe is on, every turn of this harness will be sent to it, and "
            "records the agent remembers without naming a memory go there too.")


async def put_memories(call: Call) -> dict[str, Any]:
    body = call.body_as(HarnessSettings)
    row = await load(call, "harnesses.memories.put")
    store = call.services.store
    notice = None
    if "default_memory_id" in body.model_fields_set:
        memory_id = body.default_memory_id
        if memory_id is not None:
            principals = agent_principals(store, row.agent_member_id)
            verdict = access.decide(store.tree, principals, memory_id, "write")
            call.audit("harnesses.memories.default", memory_id, "write", verdict.allowed, verdict.reason)
            if not verdict.allowed:
                # One answer for a missing memory and one the agent may not write (§13).
                raise invalid("default_memory_id must be a memory the agent may write.", param="default_memory_id")
            node = store.tree.get(memory_id)
            notice = _outside_notice(call, node) if node is not None else None
    observe = bool(body.observe) if "observe" in body.model_fields_set else None
    changed = await store.harnesses.change(row.id, updated_at=now_ms(), default_memory_id=body.default_memory_id,
                                           set_default="default_memory_id" in body.model_fields_set, observe=observe)
    if changed is None:  # deleted while this request checked the new default
        raise not_found()
    out = memories_json(store, changed)
    if notice:
        out["notice"] = notice
    return out


async def harness_prime(call: Call) -> dict[str, Any]:
    query = call.query_as(PrimeQuery)
    row = await load(call, "harnesses.prime")
    services = call.services
    tree = services.store.tree
    principals = agent_principals(services.store, row.agent_member_id)
    shown = reader(call, "harnesses.prime.reference", principals)
    memories = [await prime_memory(services, shown, node, privileges,
                                   default=node.id == row.default_memory_id, tolerate=True)
                for node, privileges in granted(tree, principals)]
    if not memories:
        raise memories_not_attached()
    primed = priming.render(memories, query.budget)
    await log_prime(call, primed, f"member:{row.agent_member_id}", row.id)
    # "memory_unavailable: timeout" -> memory:ID:records:timeout
    degraded = [entries.memory_entry(m.id, "records", entries.token(m.problem.rsplit(": ", 1)[-1]))
                for m in memories if m.problem]
    return {"object": "harness.prime", "harness_id": row.id, "principal": f"member:{row.agent_member_id}",
            **primed.document(), "degraded": degraded}


async def record_turn(call: Call) -> Any:
    """A finished turn, as episodes in the default memory when observe is on (§9.1)."""
    body = call.body_as(Turn)
    row = await load(call, "harnesses.turn")
    base = {"object": "harness.turn", "harness_id": row.id}
    if not row.observe:
        return JSONAnswer({**base, "observed": False, "reason": "observe is off"}, status_code=200)
    if not row.default_memory_id:
        return JSONAnswer({**base, "observed": False, "reason": "no default memory"}, status_code=200)
    store = call.services.store
    principals = agent_principals(store, row.agent_member_id)
    node = store.tree.get(row.default_memory_id)
    decision = access.explain(store.tree, principals, node.id) if node is not None else None
    allowed = decision is not None and decision.allows("write")
    call.audit("harnesses.turn", row.default_memory_id, "write", allowed,
               decision.reason("write") if decision else "refused: no such memory")
    if node is None or not allowed:
        raise invalid("The default memory is no longer one the agent may write; set it again.",
                      param="default_memory_id")
    episode = outbox.Episode(content=await parts_from(call, node, body.parts), written_by=writer_for(call),
                             written_at=now(), title=body.title, attributes=dict(body.attributes or {}))
    return await observe_episodes(call, node, [episode], {**base, "observed": True})


H = "/v1/harnesses"
ENDPOINTS = [
    Endpoint("POST", H, create_harness, "Create a harness bound to a member (its agent).", "harnesses.create",
             body=CreateHarness, response=HarnessOut, status=201, write=True, tags=("harnesses",)),
    Endpoint("GET", H, list_harnesses, "Harnesses: all for an administrator, one's own for an agent.",
             "harnesses.list", response=HarnessList, tags=("harnesses",)),
    Endpoint("GET", H + "/{harness_id}", get_harness, "One harness.", "harnesses.get", response=HarnessOut,
             tags=("harnesses",)),
    Endpoint("DELETE", H + "/{harness_id}", delete_harness, "Delete a harness (its memories stay).",
             "harnesses.delete", response=HarnessOut, write=True, tags=("harnesses",)),
    Endpoint("GET", H + "/{harness_id}/memories", get_memories, "The agent's principal, the memories it was "
             "granted with its privileges on each, and the two settings.", "harnesses.memories.get",
             response=HarnessMemoriesOut, tags=("harnesses",)),
    Endpoint("PUT", H + "/{harness_id}/memories", put_memories, "Set default_memory_id and observe.",
             "harnesses.memories.put", body=HarnessSettings, write=True,
             response=HarnessMemoriesOut, tags=("harnesses",)),
    Endpoint("GET", H + "/{harness_id}/prime", harness_prime, "Prime: the standing records of every memory the "
             "agent was granted, as fenced instructions within a token budget.", "harnesses.prime",
             query=PrimeQuery, response=HarnessPrimeOut, tags=("harnesses",)),
    Endpoint("POST", H + "/{harness_id}/turns", record_turn, "Record a finished turn in the default memory "
             "(when observe is on).", "harnesses.turn", body=Turn, status=201, also=(200, 202), write=True,
             response=TurnOut, tags=("harnesses",)),
]
