"""Concurrent tree changes by several members, checked against a serial model of the chapter's rules.

Hypothesis builds a small branch (memories, restricted flags, grants to three members) and then sends
batches of concurrent requests: creates, moves, restricts, deletes, grants and revokes, each by a random
member after a random number of event-loop turns. After each batch:

* the parent links (in the database and in the in-memory tree) hold no cycle;
* the outcome is linearizable: some order of the batch's requests, replayed one at a time on a model
  that decides every request from the chapter's rules (tests/policies/tree_model.py for privileges),
  gives each request the status and code it got and ends in exactly the state the database holds, and
  the in-memory tree holds the same state;
* every member's privileges on every memory, read through the API, equal the reference model's.

A 409 memory_busy is a refusal only a running delete gives (a claim on its subtree): it changes nothing
and is left out of the replay, and it may appear only in a batch that holds a delete.
"""

from __future__ import annotations

import asyncio
import itertools
from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from sqlalchemy import select

from gateway.state import schema as t
from policies.access import Grant
from tests._tree_checks import cycle_in, hang_breaker
from tests.api._gateway import Gateway
from tests.policies.tree_model import World, ref_effective

PRIVS = ("read", "write", "create", "delete")
MEMBERS = 3
KINDS = ("create", "move", "restrict", "delete", "grant", "revoke")
_example = itertools.count()


@dataclass(frozen=True)
class Op:
    """One request by one member; indexes are taken modulo what exists when the batch starts."""

    kind: str
    member: int
    target: int
    other: int | None  # move: destination (None: to the root level); grant: grantee member; revoke: grant
    flag: bool  # create: restricted; restrict: the new value
    privileges: frozenset[str]
    turns: int  # event-loop turns before the request is sent
    aim: bool  # pick the target (and a move's destination) among the memories the member can see


@dataclass(frozen=True)
class Plan:
    parents: list[int | None]  # the branch: index 0 is its top, below the admin's root
    restricted: list[bool]
    grants: list[tuple[int, int, frozenset[str]]]  # (member, memory, privileges)
    batches: list[list[Op]]


ops = st.builds(
    Op,
    kind=st.sampled_from(KINDS),
    member=st.integers(0, MEMBERS - 1),
    target=st.integers(0, 40),
    other=st.one_of(st.none(), st.integers(0, 40)),
    flag=st.booleans(),
    privileges=st.frozensets(st.sampled_from(PRIVS), min_size=1),
    turns=st.integers(0, 6),
    aim=st.sampled_from((True, True, True, False)),
)
# Grants of everything are common, so that members can actually move, delete and grant.
privilege_sets = st.one_of(st.just(frozenset(PRIVS)), st.frozensets(st.sampled_from(PRIVS), min_size=1))


@st.composite
def plans(draw: st.DrawFn) -> Plan:
    size = draw(st.integers(2, 6))
    parents: list[int | None] = [None, *(draw(st.integers(0, i - 1)) for i in range(1, size))]
    restricted = [False, *(draw(st.booleans()) for _ in range(1, size))]
    grant = st.tuples(st.integers(0, MEMBERS - 1), st.integers(0, size - 1), privilege_sets)
    grants = draw(st.lists(grant, min_size=MEMBERS, max_size=8))
    batches = draw(st.lists(st.lists(ops, min_size=2, max_size=4), min_size=1, max_size=3))
    return Plan(parents, restricted, grants, batches)


# --------------------------------------------------------------------------- the state, as rows and as a model


@dataclass
class State:
    parent: dict[str, str | None]
    restricted: set[str]
    grants: dict[str, Grant] = field(default_factory=dict)

    def copy(self) -> State:
        return State(dict(self.parent), set(self.restricted), dict(self.grants))

    def world(self) -> World:
        return World(tuple(self.parent), self.parent, frozenset(self.restricted), tuple(self.grants.values()))

    def privileges(self, member_id: str, memory: str) -> frozenset[str]:
        return ref_effective(self.world(), frozenset({f"member:{member_id}"}), memory)

    def below(self, memory: str) -> set[str]:
        """The memory and every descendant."""
        found = {memory}
        while True:
            more = {m for m, p in self.parent.items() if p in found} - found
            if not more:
                return found
            found |= more

    def comparable(self) -> tuple[Any, ...]:
        # A new memory's implicit grant gets an id the answer does not show: it is matched by what it is.
        grants = {(g.memory_id, g.principal, g.privileges, True) if g.implicit else
                  (g.id, g.memory_id, g.principal, g.privileges) for g in self.grants.values()}
        return self.parent, self.restricted, grants


async def rows_state(gateway: Gateway, ids: set[str]) -> State:
    async with gateway.services.store.engine.connect() as conn:
        memories = list(await conn.execute(select(t.memories).where(t.memories.c.id.in_(ids))))
        grants = list(await conn.execute(select(t.grants).where(t.grants.c.memory_id.in_(ids))))
    state = State({r.id: r.parent_id for r in memories}, {r.id for r in memories if r.restricted})
    for r in grants:
        state.grants[r.id] = Grant(r.id, r.memory_id, r.principal, frozenset(p for p in r.privileges.split(",") if p),
                                   bool(r.implicit))
    return state


def tree_state(gateway: Gateway, ids: set[str]) -> State:
    tree = gateway.services.store.tree
    present = [m for m in ids if tree.exists(m)]
    state = State({m: tree.parent_of(m) for m in present}, {m for m in present if tree.is_restricted(m)})
    for m in present:
        for grant in tree.grants_on(m):
            state.grants[grant.id] = grant
    return state


# --------------------------------------------------------------------------- one request, sent and modelled


@dataclass(frozen=True)
class Request:
    op: Op
    member_id: str
    target: str
    other: str | None  # destination memory, grantee member id, or grant id
    grant_memory: str | None  # revoke: the memory the grant sat on when the batch started


def bind(op: Op, state: State, known: list[str], member_ids: list[str]) -> Request:
    me = member_ids[op.member]
    seen = [m for m in known if m in state.parent and state.privileges(me, m)]
    pool = seen if op.aim and seen else known
    target = pool[op.target % len(pool)]
    other: str | None = None
    grant_memory = None
    if op.kind == "move" and op.other is not None:
        other = pool[op.other % len(pool)]
    elif op.kind == "grant":
        other = member_ids[(op.other or 0) % MEMBERS]
    elif op.kind == "revoke":
        grants = sorted(state.grants.values(), key=lambda g: g.id)
        if grants:
            chosen = grants[(op.other or 0) % len(grants)]
            other, grant_memory = chosen.id, chosen.memory_id
    return Request(op, me, target, other, grant_memory)


async def send(request: Request, client: httpx.AsyncClient) -> httpx.Response:
    for _ in range(request.op.turns):
        await asyncio.sleep(0)
    op, target = request.op, request.target
    if op.kind == "create":
        return await client.post("/v1/memories", json={"name": "n", "parent_id": target, "restricted": op.flag})
    if op.kind == "move":
        return await client.put(f"/v1/memories/{target}", json={"parent_id": request.other})
    if op.kind == "restrict":
        return await client.put(f"/v1/memories/{target}", json={"restricted": op.flag})
    if op.kind == "delete":
        return await client.delete(f"/v1/memories/{target}")
    if op.kind == "grant":
        return await client.post(f"/v1/memories/{target}/grants",
                                 json={"principal": f"member:{request.other}", "privileges": sorted(op.privileges)})
    grant_id = request.other or "hgrt_" + "0" * 32
    return await client.delete(f"/v1/memories/{request.grant_memory or target}/grants/{grant_id}")


Outcome = tuple[int, str | None]
NOT_FOUND: Outcome = (404, "memory_not_found")


def forbidden() -> Outcome:
    return (403, "memory_forbidden")


def apply(state: State, request: Request, answer: httpx.Response) -> Outcome:
    """What the chapter's rules answer to `request` in `state`, changing `state` as the request would."""
    op, me = request.op, request.member_id
    x = request.grant_memory if op.kind == "revoke" and request.grant_memory else request.target
    if x not in state.parent or not state.privileges(me, x):
        return NOT_FOUND
    held = state.privileges(me, x)
    if op.kind == "create":
        if "create" not in held:
            return forbidden()
        if answer.status_code != 201:
            return (201, None)  # the model creates; the gateway did not: no order can match
        made = answer.json()["id"]
        state.parent[made] = x
        if op.flag:
            state.restricted.add(made)
        state.grants[f"implicit-{made}"] = Grant(f"implicit-{made}", made, f"member:{me}", frozenset(PRIVS), True)
        return (201, None)
    if op.kind == "move":
        parent = state.parent[x]
        shown = parent if parent is not None and state.privileges(me, parent) else None
        destination = request.other
        if destination == shown:
            return (200, None)
        if "delete" not in held:
            return forbidden()
        if destination is None:
            return (403, "memfed_admin_required")
        if destination not in state.parent or not state.privileges(me, destination):
            return NOT_FOUND
        if "create" not in state.privileges(me, destination):
            return forbidden()
        if destination in state.below(x):
            return (422, "memory_invalid")
        state.parent[x] = destination
        return (200, None)
    if op.kind == "restrict":
        if op.flag == (x in state.restricted):
            return (200, None)
        if "delete" not in held:
            return forbidden()
        (state.restricted.add if op.flag else state.restricted.discard)(x)
        return (200, None)
    if "delete" not in held:
        return forbidden()
    if op.kind == "delete":
        gone = state.below(x)
        for m in gone:
            del state.parent[m]
        state.restricted -= gone
        state.grants = {i: g for i, g in state.grants.items() if g.memory_id not in gone}
        return (200, None)
    if op.kind == "grant":
        if answer.status_code != 201:
            return (201, None)
        made = answer.json()["id"]
        state.grants[made] = Grant(made, x, f"member:{request.other}", op.privileges)
        return (201, None)
    if request.other is None or request.other not in state.grants or state.grants[request.other].memory_id != x:
        return (404, "memfed_grant_not_found")
    del state.grants[request.other]
    return (200, None)


def observed(answer: httpx.Response) -> Outcome:
    if answer.status_code < 300:
        return (answer.status_code, None)
    return (answer.status_code, answer.json()["error"]["code"])


def linearizable(before: State, requests: list[Request], answers: list[httpx.Response], after: State) -> bool:
    """Some order of the requests, replayed one at a time from `before`, gives each its answer and ends in
    `after`."""
    counted = [(r, a) for r, a in zip(requests, answers, strict=True) if a.status_code != 409]
    for order in itertools.permutations(counted):
        state = before.copy()
        if all(apply(state, r, a) == observed(a) for r, a in order) and state.comparable() == after.comparable():
            return True
    return False


# --------------------------------------------------------------------------- the property


async def build(gateway: Gateway, plan: Plan) -> tuple[list[str], list[str], list[httpx.AsyncClient]]:
    n = next(_example)
    root = await gateway.root(f"conc-{n}")
    ids: list[str] = [root["id"]]  # the admin's root, which no member holds anything on
    for i, parent in enumerate(plan.parents):
        made = await gateway.child(gateway.admin, ids[0 if parent is None else parent + 1], f"c{n}-{i}",
                                   restricted=plan.restricted[i])
        ids.append(made["id"])
    member_ids, clients = [], []
    for m in range(MEMBERS):
        member_id, client = await gateway.member(f"c{n}-member{m}")
        member_ids.append(member_id)
        clients.append(client)
    for member, memory, privileges in plan.grants:
        await gateway.grant(ids[memory + 1], f"member:{member_ids[member]}", *sorted(privileges))
    return ids, member_ids, clients


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                HealthCheck.too_slow])
@given(plan=plans())
async def test_concurrent_tree_changes_stay_a_tree_and_match_the_model(gateway: Gateway, plan: Plan) -> None:
    """Concurrent random creates, moves, restricts, deletes, grants and revokes by several members never
    make a cycle, are linearizable against the chapter's rules, and leave every member's access exactly
    what the reference model derives."""
    with hang_breaker(120):
        await check_plan(gateway, plan)


async def check_plan(gateway: Gateway, plan: Plan) -> None:
    known, member_ids, clients = await build(gateway, plan)
    all_ids = set(known)
    for batch in plan.batches:
        before = await rows_state(gateway, all_ids)
        alive = [m for m in known if m in before.parent] or known
        requests = [bind(op, before, alive, member_ids) for op in batch]
        answers = await asyncio.gather(*(send(r, clients[r.op.member]) for r in requests))
        for r, a in zip(requests, answers, strict=True):  # --hypothesis-show-statistics: what was exercised
            event(f"{r.op.kind} answered {a.status_code}")
        for answer in answers:
            assert answer.status_code < 500, answer.text
            if answer.status_code == 201 and answer.json().get("object") == "memory":
                known.append(answer.json()["id"])
                all_ids.add(answer.json()["id"])
        if any(a.status_code == 409 for a in answers):
            assert any(r.op.kind == "delete" for r in requests), [a.text for a in answers]
        after = await rows_state(gateway, all_ids)
        assert cycle_in(after.parent) is None
        assert tree_state(gateway, all_ids).comparable() == after.comparable()
        assert linearizable(before, requests, list(answers), after), (
            [r.op for r in requests], [observed(a) for a in answers])
        for member_id, client in zip(member_ids, clients, strict=True):
            for memory in all_ids:
                got = await client.get(f"/v1/memories/{memory}")
                expected = after.privileges(member_id, memory) if memory in after.parent else frozenset()
                if not expected:
                    assert got.status_code == 404, got.text
                else:
                    assert got.json()["privileges"] == [p for p in PRIVS if p in expected]
