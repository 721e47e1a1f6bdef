"""Hypothesis strategies for small worlds of memories: forests, cutoffs, grants and group memberships."""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import strategies as st

from policies.access import Grant
from tests.policies.tree_model import ALL_PRIVILEGES, World

MEMBERS = ("m0", "m1", "m2", "m3")
GROUPS = ("g0", "g1", "g2", "g3")
# Who grants can name: every member and group above, a server's own kind, and two principals that
# nobody the tests ask as holds (grants to them must never count).
GRANTEES = (
    *(f"member:{m}" for m in MEMBERS),
    *(f"group:{g}" for g in GROUPS),
    "x.team:t0",
    "member:stranger",
    "group:nobody",
)
PRIVILEGE_NAMES = ("read", "write", "create", "delete")
MAX_NODES = 40
MAX_DEPTH = 8


@st.composite
def worlds(draw: st.DrawFn, max_nodes: int = MAX_NODES, max_grants: int = 30) -> World:
    """A forest of up to `max_nodes` memories no deeper than MAX_DEPTH below a root, some restricted,
    with grants (some empty, some the creator's implicit grant) and members spread over groups."""
    count = draw(st.integers(min_value=1, max_value=max_nodes))
    nodes: list[str] = []
    parent: dict[str, str | None] = {}
    level: dict[str, int] = {}
    for i in range(count):
        node = f"n{i}"
        can_hold = [n for n in nodes if level[n] < MAX_DEPTH]
        # Either hang it under the last node (long chains) or under any node, or start a new root.
        if can_hold and nodes[-1] in can_hold and draw(st.booleans()):
            up: str | None = nodes[-1]
        else:
            up = draw(st.sampled_from([None, *can_hold]))
        nodes.append(node)
        parent[node] = up
        level[node] = 0 if up is None else level[up] + 1
    restricted = frozenset(n for n in nodes if draw(st.integers(min_value=0, max_value=3)) == 0)

    grants: list[Grant] = []
    grant_count = draw(st.integers(min_value=0, max_value=max_grants))
    for i in range(grant_count):
        memory = draw(st.sampled_from(nodes))
        if draw(st.integers(min_value=0, max_value=7)) == 0:
            member = draw(st.sampled_from(MEMBERS))
            grants.append(Grant(f"c{i}", memory, f"member:{member}", ALL_PRIVILEGES, implicit=True))
            continue
        principal = draw(st.sampled_from(GRANTEES))
        privileges = draw(st.frozensets(st.sampled_from(PRIVILEGE_NAMES)))
        grants.append(Grant(f"g{i}", memory, principal, privileges))

    groups = {m: draw(st.frozensets(st.sampled_from(GROUPS))) for m in MEMBERS}
    return World(tuple(nodes), parent, restricted, tuple(grants), groups)


def callers(world: World) -> list[frozenset[str]]:
    """Every member as the gateway would resolve it, plus a caller acting only as a server-own kind."""
    return [world.principals_of(m) for m in MEMBERS] + [frozenset({"x.team:t0"})]


@dataclass(frozen=True)
class Question:
    """One world, one caller in it, one memory asked and a depth."""

    world: World
    principals: frozenset[str]
    memory_id: str
    depth: int | None


@st.composite
def questions(draw: st.DrawFn, max_nodes: int = MAX_NODES) -> Question:
    world = draw(worlds(max_nodes=max_nodes))
    principals = draw(st.sampled_from(callers(world)))
    memory_id = draw(st.sampled_from(world.nodes))
    depth = draw(st.none() | st.integers(min_value=0, max_value=MAX_DEPTH + 1))
    return Question(world, principals, memory_id, depth)
