"""A tree of memories for tests, and a reference model of §3 written as plainly as the spec reads.

Two things live here and they must not lean on each other:

* `DictTree`: the `TreeView` the policies read, backed by plain dicts, the shape a gateway keeps in
  memory (parent, ordered children, restricted flags, grants indexed by node and by principal).
* `World` and the `ref_*` functions: a brute-force reading of UHP Memories §2, §3 and §6.1 that
  enumerates whole paths for every question and never imports `policies` code. It is slow on
  purpose; it is only ever asked about trees of a few dozen memories.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from policies.access import Grant

ALL_PRIVILEGES = frozenset({"read", "write", "create", "delete"})


# --------------------------------------------------------------------------- the tree as a gateway keeps it


class DictTree:
    """A `TreeView` over dicts. Children keep the order in which they were added."""

    def __init__(self) -> None:
        self._parent: dict[str, str | None] = {}
        self._children: dict[str, list[str]] = {}
        self._restricted: dict[str, bool] = {}
        self._grants_on: dict[str, list[Grant]] = {}
        self._grants_to: dict[str, list[Grant]] = {}

    def add(self, memory_id: str, parent_id: str | None = None, *, restricted: bool = False) -> None:
        if memory_id in self._parent:
            raise ValueError(f"{memory_id} already exists")
        if parent_id is not None and parent_id not in self._parent:
            raise ValueError(f"parent {parent_id} of {memory_id} does not exist")
        self._parent[memory_id] = parent_id
        self._children[memory_id] = []
        self._restricted[memory_id] = restricted
        self._grants_on[memory_id] = []
        if parent_id is not None:
            self._children[parent_id].append(memory_id)

    def grant(self, grant: Grant) -> None:
        self._grants_on[grant.memory_id].append(grant)
        self._grants_to.setdefault(grant.principal, []).append(grant)

    # The TreeView protocol.

    def exists(self, memory_id: str) -> bool:
        return memory_id in self._parent

    def parent_of(self, memory_id: str) -> str | None:
        return self._parent[memory_id]

    def children_of(self, memory_id: str) -> Sequence[str]:
        return self._children[memory_id]

    def is_restricted(self, memory_id: str) -> bool:
        return self._restricted[memory_id]

    def grants_on(self, memory_id: str) -> Sequence[Grant]:
        return self._grants_on.get(memory_id, ())

    def grants_to(self, principal: str) -> Sequence[Grant]:
        return self._grants_to.get(principal, ())


# --------------------------------------------------------------------------- the reference model


@dataclass(frozen=True)
class World:
    """Everything §3 decides from, as raw data.

    `nodes` lists every memory in creation order (a parent before its children, siblings in the order
    their parent lists them); `parent` maps each to its parent or None; `groups` maps a member id to
    the ids of the groups the server resolves it into.
    """

    nodes: tuple[str, ...]
    parent: Mapping[str, str | None]
    restricted: frozenset[str]
    grants: tuple[Grant, ...]
    groups: Mapping[str, frozenset[str]] = field(default_factory=dict)

    def tree(self) -> DictTree:
        tree = DictTree()
        for node in self.nodes:
            tree.add(node, self.parent[node], restricted=node in self.restricted)
        for grant in self.grants:
            tree.grant(grant)
        return tree

    def principals_of(self, member: str) -> frozenset[str]:
        """`member:ID` plus `group:GID` for each group the member is in."""
        return frozenset({f"member:{member}"} | {f"group:{g}" for g in self.groups.get(member, ())})


def ref_path(world: World, node: str) -> list[str]:
    """The node, its parent, its parent's parent, ... up to its root."""
    path = [node]
    while world.parent[path[-1]] is not None:
        up = world.parent[path[-1]]
        assert up is not None
        path.append(up)
    return path


def ref_reaches(world: World, grant: Grant, node: str) -> bool:
    """§3.1 and §3.2 in words: a grant reaches a node when it sits on the node or on an ancestor, and
    no restricted memory lies between them. "Between" counts the node itself (a restricted node
    refuses what comes from above) but not the grant's own memory (a restricted node keeps its own
    grants, and they flow down)."""
    path = ref_path(world, node)
    if grant.memory_id not in path:
        return False
    below_the_grant = path[: path.index(grant.memory_id)]
    return not any(n in world.restricted for n in below_the_grant)


def ref_reaching_grants(world: World, principals: frozenset[str], node: str) -> list[Grant]:
    """Every grant to one of the principals that reaches the node, found by trying all of them."""
    return [g for g in world.grants if g.principal in principals and ref_reaches(world, g, node)]


def ref_effective(world: World, principals: frozenset[str], node: str) -> frozenset[str]:
    """Effective privileges: the union of every reaching grant's privileges."""
    held: set[str] = set()
    for grant in ref_reaching_grants(world, principals, node):
        held |= grant.privileges
    return frozenset(held)


def ref_visible(world: World, principals: frozenset[str], node: str) -> bool:
    """A caller sees a memory when it holds any effective privilege on it (§2: MUST NOT reveal others)."""
    return bool(ref_effective(world, principals, node))


def ref_cutoff(world: World, node: str) -> str | None:
    """The restricted memory where inheritance stops on the way up from `node`, if any stops.

    A restricted root cuts nothing off: there is nothing above it to stop."""
    for n in ref_path(world, node):
        if n in world.restricted:
            return n if world.parent[n] is not None else None
    return None


def ref_children(world: World, node: str) -> list[str]:
    return [n for n in world.nodes if world.parent[n] == node]


def ref_sibling_path(world: World, node: str) -> tuple[int, ...]:
    """Positions among siblings from the root down: (root's index among roots, child index, ...)."""
    positions: list[int] = []
    for n in reversed(ref_path(world, node)):
        up = world.parent[n]
        siblings = [m for m in world.nodes if world.parent[m] == up]
        positions.append(siblings.index(n))
    return tuple(positions)


def ref_subtree(world: World, root: str, depth: int | None) -> list[tuple[str, int]]:
    """Every memory at or below `root` within `depth`, with its distance, in breadth-first order.

    Breadth-first order is: nearer first; at the same distance, the order in which the memories are
    reached level by level, which is the lexicographic order of their positions among siblings."""
    found: list[tuple[str, int]] = []
    for n in world.nodes:
        path = ref_path(world, n)
        if root in path:
            distance = path.index(root)
            if depth is None or distance <= depth:
                found.append((n, distance))
    found.sort(key=lambda item: (item[1], ref_sibling_path(world, item[0])))
    return found


def ref_visible_ancestors(world: World, principals: frozenset[str], node: str) -> list[str]:
    """§2 `ancestors`: from the root down to the parent, "as far up as the caller may see": the run of
    visible ancestors starting at the parent, ending below the first one the caller cannot see."""
    run: list[str] = []
    for ancestor in ref_path(world, node)[1:]:
        if not ref_visible(world, principals, ancestor):
            break
        run.append(ancestor)
    return list(reversed(run))


def ref_entry_points(world: World, principals: frozenset[str]) -> set[str]:
    """§2: every memory the caller holds a privilege on whose parent it cannot see (or has none)."""
    entries = set()
    for n in world.nodes:
        up = world.parent[n]
        if ref_visible(world, principals, n) and (up is None or not ref_visible(world, principals, up)):
            entries.add(n)
    return entries


def ref_readable_children(world: World, principals: frozenset[str], node: str) -> list[str]:
    return [c for c in ref_children(world, node) if ref_visible(world, principals, c)]


@dataclass(frozen=True)
class RefPlan:
    covered: list[str]
    skipped: list[str]
    capped: list[str]
    degraded: list[str]


def ref_plan(world: World, principals: frozenset[str], node: str, depth: int | None, cap: int) -> RefPlan:
    """§6.1: down never up, each memory judged on its own, within depth, at most `cap` searched
    (nearest first), and a `degraded` entry exactly when the cap left something out."""
    in_scope = [n for n, _ in ref_subtree(world, node, depth)]
    readable = [n for n in in_scope if "read" in ref_effective(world, principals, n)]
    unreadable = [n for n in in_scope if n not in readable]
    covered, capped = readable[:cap], readable[cap:]
    degraded = [f"subtree:capped_at_{cap}_memories"] if capped else []
    return RefPlan(covered, unreadable, capped, degraded)


# --------------------------------------------------------------------------- building small worlds by hand


def world_from(
    edges: Iterable[tuple[str, str | None]],
    *,
    restricted: Iterable[str] = (),
    grants: Iterable[tuple[str, str, Iterable[str]]] = (),
    groups: Mapping[str, Iterable[str]] | None = None,
    creators: Mapping[str, str] | None = None,
) -> World:
    """A world from (memory, parent) pairs listed parents first, (memory, principal, privileges)
    grants, and `creators` mapping a memory to the member whose implicit grant it carries."""
    pairs = list(edges)
    built = [
        Grant(f"g{i}", memory, principal, frozenset(privileges))
        for i, (memory, principal, privileges) in enumerate(grants)
    ]
    for memory, member in (creators or {}).items():
        built.append(Grant(f"c-{memory}", memory, f"member:{member}", ALL_PRIVILEGES, implicit=True))
    return World(
        nodes=tuple(m for m, _ in pairs),
        parent={m: p for m, p in pairs},
        restricted=frozenset(restricted),
        grants=tuple(built),
        groups={m: frozenset(gs) for m, gs in (groups or {}).items()},
    )
