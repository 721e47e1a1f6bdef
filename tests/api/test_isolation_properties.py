"""Isolation, proven beyond the one-credential conformance suite.

Hypothesis builds random worlds (a forest of memories, restricted nodes, groups, members with their own
keys, grants to members and to groups, records that reference records in other memories) through the
HTTP API. Every member then reads the world every way the API allows: entry points, one-level and
subtree listings, each memory, each record, recall from every memory, the graph. Each answer is compared
with what a brute-force model, written from the chapter's words, says that member may see; and no
answer may contain the id, name or record text of a memory outside the member's reach, in any field,
including `ancestors`, `parent`, `children`, references and error messages.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.api._gateway import Gateway

PRIVS = ("read", "write", "create", "delete")
_world_counter = itertools.count()


@dataclass
class World:
    parents: list[int | None]
    restricted: list[bool]
    members: int
    groups: int
    membership: set[tuple[int, int]]  # (member, group)
    grants: list[tuple[str, int, int, frozenset[str]]]  # (kind, who, memory, privileges)
    references: list[tuple[int, int]]  # (from memory, to memory)

    # -- the brute-force model, from the chapter's words ------------------------------------------

    def path_up(self, node: int) -> list[int]:
        path = [node]
        while self.parents[path[-1]] is not None:
            path.append(self.parents[path[-1]])  # type: ignore[arg-type]
        return path

    def privileges(self, member: int, node: int) -> frozenset[str]:
        """Union of the grants to the member or its groups on the node and each ancestor it inherits from:
        walking up, a restricted node's own grants count, and nothing above it does."""
        held: set[str] = set()
        for ancestor in self.path_up(node):
            for kind, who, memory, privs in self.grants:
                if memory != ancestor:
                    continue
                if (kind == "member" and who == member) or (kind == "group" and (member, who) in self.membership):
                    held |= privs
            if self.restricted[ancestor]:
                break
        return frozenset(held)

    def visible(self, member: int, node: int) -> bool:
        return bool(self.privileges(member, node))

    def readable(self, member: int, node: int) -> bool:
        return "read" in self.privileges(member, node)

    def children(self, node: int) -> list[int]:
        return [i for i, p in enumerate(self.parents) if p == node]

    def descendants(self, node: int) -> list[int]:
        out, frontier = [], self.children(node)
        while frontier:
            out.extend(frontier)
            frontier = [c for n in frontier for c in self.children(n)]
        return out


@st.composite
def worlds(draw: st.DrawFn) -> World:
    size = draw(st.integers(2, 9))
    parents: list[int | None] = [None]
    for i in range(1, size):
        parents.append(draw(st.one_of(st.none(), st.integers(0, i - 1))) if i > 1 else 0)
    restricted = [draw(st.booleans()) for _ in range(size)]
    members = draw(st.integers(1, 3))
    groups = draw(st.integers(0, 2))
    membership = {(m, g) for m in range(members) for g in range(groups) if draw(st.booleans())}
    grant = st.tuples(
        st.sampled_from(("member", "group")) if groups else st.just("member"),
        st.integers(0, max(members, groups) - 1),
        st.integers(0, size - 1),
        st.frozensets(st.sampled_from(PRIVS), min_size=1),
    )
    grants = [g for g in draw(st.lists(grant, max_size=8))
              if (g[0] == "member" and g[1] < members) or (g[0] == "group" and g[1] < groups)]
    references = draw(st.lists(st.tuples(st.integers(0, size - 1), st.integers(0, size - 1)), max_size=4))
    return World(parents, restricted, members, groups, membership, grants, references)


@dataclass
class Built:
    memory_ids: list[str]
    names: list[str]
    record_ids: dict[int, str] = field(default_factory=dict)
    record_texts: dict[int, str] = field(default_factory=dict)
    member_ids: list[str] = field(default_factory=list)
    clients: list[httpx.AsyncClient] = field(default_factory=list)
    token: str = ""


async def build(gateway: Gateway, world: World) -> Built:
    n = next(_world_counter)
    token = f"tok{n}w"
    admin = gateway.admin
    built = Built([], [], token=token)
    for i, parent in enumerate(world.parents):
        body: dict[str, Any] = {"name": f"w{n}-m{i}-name", "restricted": world.restricted[i]}
        if parent is not None:
            body["parent_id"] = built.memory_ids[parent]
        made = await admin.post("/v1/memories", json=body)
        assert made.status_code == 201, made.text
        built.memory_ids.append(made.json()["id"])
        built.names.append(body["name"])
    for i, memory_id in enumerate(built.memory_ids):
        text = f"{token} w{n}secret{i}"
        record = await admin.post(f"/v1/memories/{memory_id}/records", json={"type": "fact", "content": text})
        built.record_ids[i] = record.json()["id"]
        built.record_texts[i] = f"w{n}secret{i}"
    for source, target in world.references:
        await admin.patch(f"/v1/memories/{built.memory_ids[source]}/records/{built.record_ids[source]}", json={
            "references": [{"rel": "about", "memory_id": built.memory_ids[target],
                            "record_id": built.record_ids[target]}]})
    group_ids = []
    for g in range(world.groups):
        group_ids.append((await admin.post("/v1/groups", json={"name": f"w{n}-g{g}"})).json()["id"])
    for m in range(world.members):
        member_id, client = await gateway.member(f"w{n}-member{m}", ("human", "agent")[m % 2])
        built.member_ids.append(member_id)
        built.clients.append(client)
    for m, g in world.membership:
        assert (await admin.put(f"/v1/groups/{group_ids[g]}/members/{built.member_ids[m]}")).status_code == 200
    for kind, who, memory, privs in world.grants:
        principal = f"member:{built.member_ids[who]}" if kind == "member" else f"group:{group_ids[who]}"
        made = await admin.post(f"/v1/memories/{built.memory_ids[memory]}/grants",
                                json={"principal": principal, "privileges": sorted(privs)})
        assert made.status_code == 201, made.text
    return built


def assert_no_leak(text: str, world: World, built: Built, member: int, where: str) -> None:
    """No id, name or record text of a memory the member holds nothing on (or cannot read) appears."""
    for node in range(len(world.parents)):
        if not world.visible(member, node):
            assert built.memory_ids[node] not in text, (where, "memory id", node)
            assert built.names[node] not in text, (where, "memory name", node)
        if not world.readable(member, node):
            assert built.record_texts[node] not in text, (where, "record text", node)


async def check_member(world: World, built: Built, member: int) -> None:
    client = built.clients[member]
    ids = built.memory_ids
    n = len(world.parents)

    entry = (await client.get("/v1/memories", params={"limit": 200})).json()
    expected_entries = {ids[i] for i in range(n) if world.visible(member, i)
                        and (world.parents[i] is None or not world.visible(member, world.parents[i]))}  # type: ignore[arg-type]
    assert {m["id"] for m in entry["data"]} == expected_entries
    assert_no_leak(str(entry), world, built, member, "entry points")

    for i in range(n):
        got = await client.get(f"/v1/memories/{ids[i]}")
        privileges = world.privileges(member, i)
        if not privileges:
            assert got.status_code == 404
            assert got.json() == (await client.get("/v1/memories/hmem_" + "0" * 32)).json()
            continue
        body = got.json()
        assert body["privileges"] == [p for p in PRIVS if p in privileges]
        chain = []
        for ancestor in world.path_up(i)[1:]:
            if not world.visible(member, ancestor):
                break
            chain.append(ids[ancestor])
        assert body["ancestors"] == list(reversed(chain))
        assert body["children"]["count"] == sum(1 for c in world.children(i) if world.visible(member, c))
        assert_no_leak(got.text, world, built, member, f"get {i}")

        children = (await client.get("/v1/memories", params={"parent": ids[i], "limit": 200})).json()
        assert {m["id"] for m in children["data"]} == {ids[c] for c in world.children(i) if world.visible(member, c)}
        below = (await client.get("/v1/memories", params={"ancestor": ids[i], "limit": 200})).json()
        assert {m["id"] for m in below["data"]} == {ids[d] for d in world.descendants(i) if world.visible(member, d)}
        assert_no_leak(children_text := str(children) + str(below), world, built, member, f"lists {i}")
        del children_text

        record = await client.get(f"/v1/memories/{ids[i]}/records/{built.record_ids[i]}")
        if "read" not in privileges:
            assert record.status_code == 403
            recall = await client.post(f"/v1/memories/{ids[i]}/recall", json={"text": built.token})
            assert recall.status_code == 403
            continue
        assert record.status_code == 200
        for ref in record.json()["references"]:
            target = ids.index(ref["memory_id"]) if "memory_id" in ref else None
            if target is None:
                assert set(ref) == {"record_id", "available"} and ref["available"] is False
            else:
                assert world.readable(member, target)
        assert_no_leak(record.text, world, built, member, f"record {i}")

        recall = await client.post(f"/v1/memories/{ids[i]}/recall", json={"text": built.token, "limit": 200})
        assert recall.status_code == 200
        answer = recall.json()
        searched = {ids[d] for d in [i, *world.descendants(i)] if world.readable(member, d)}
        assert {r["memory"]["id"] for r in answer["results"]} == searched
        assert {c["id"] for c in answer["children"]} == {
            ids[c] for c in world.children(i) if world.readable(member, c)}
        parent = world.parents[i]
        if parent is not None and world.readable(member, parent):
            assert answer["parent"]["id"] == ids[parent]
        else:
            assert "parent" not in answer
        assert_no_leak(recall.text, world, built, member, f"recall {i}")

        graph = await client.post(f"/v1/memories/{ids[i]}/graph", json={"hops": 3})
        assert graph.status_code == 200
        assert {node["memory"]["id"] for node in graph.json()["nodes"]} <= {
            ids[d] for d in range(n) if world.readable(member, d)}
        assert_no_leak(graph.text, world, built, member, f"graph {i}")


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(world=worlds())
async def test_every_member_sees_exactly_what_the_model_allows(gateway: Gateway, world: World) -> None:
    """Random trees, grants, groups and restricted nodes: each member's answers match the brute-force model
    and nothing outside a member's reach appears anywhere in what it is answered."""
    built = await build(gateway, world)
    for member in range(world.members):
        await check_member(world, built, member)
