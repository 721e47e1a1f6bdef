"""The gateway's in-memory tree and random worlds to fill it, for the benches."""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from gateway.state.tree import MemoryNode, Tree
from policies.access import PRIVILEGES, Grant


@dataclass(frozen=True, slots=True)
class Node:
    id: str
    parent_id: str | None
    restricted: bool


class BenchTree(Tree):
    """The gateway's own in-memory tree (gateway/state/tree.py), filled from bench `Node`s, so a bench
    times the policies on exactly what a request walks."""

    def put(self, node: Node) -> None:  # type: ignore[override]
        super().put(MemoryNode(node.id, node.id, "", node.parent_id, node.restricted, "local", "bench", 0, 0))

    def __len__(self) -> int:
        return sum(1 for _ in self.all_ids())


def grow(
    tree: BenchTree,
    rng: random.Random,
    count: int,
    *,
    under: str | None,
    base_depth: int,
    max_depth: int,
    restricted_share: float,
    prefix: str,
) -> tuple[list[str], dict[str, int]]:
    """Add `count` memories below `under` (or as new roots when None): each new memory hangs under a
    uniformly chosen memory already added that still has room above `max_depth`. The first one added
    is never restricted, so a subtree grown below `under` inherits what is granted above it."""
    ids: list[str] = []
    depth: dict[str, int] = {}
    open_nodes: list[str] = []
    for i in range(count):
        memory_id = f"{prefix}{i:06d}"
        if not open_nodes or (under is None and rng.random() < 0.0005):
            parent, level = under, base_depth
        else:
            parent = rng.choice(open_nodes)
            level = depth[parent] + 1
        restricted = i > 0 and level > 0 and rng.random() < restricted_share
        tree.put(Node(memory_id, parent, restricted))
        ids.append(memory_id)
        depth[memory_id] = level
        if level < max_depth:
            open_nodes.append(memory_id)
    return ids, depth


def people(
    rng: random.Random, members: int, groups: int, per_member: tuple[int, int]
) -> dict[str, frozenset[str]]:
    """Each member as the gateway resolves it: `member:ID` plus several `group:GID`."""
    low, high = per_member
    resolved = {}
    for m in range(members):
        joined = rng.sample(range(groups), rng.randint(low, high))
        resolved[f"m{m:05d}"] = frozenset({f"member:m{m:05d}", *(f"group:g{g:04d}" for g in joined)})
    return resolved


def scatter_grants(
    tree: BenchTree,
    rng: random.Random,
    ids: Sequence[str],
    count: int,
    *,
    members: int,
    groups: int,
    group_share: float = 0.4,
) -> None:
    """`count` grants on random memories, to random members or groups, read in most of them."""
    for i in range(count):
        if rng.random() < group_share:
            principal = f"group:g{rng.randrange(groups):04d}"
        else:
            principal = f"member:m{rng.randrange(members):05d}"
        privileges = {"read"} if rng.random() < 0.8 else set()
        privileges |= {p for p in PRIVILEGES if rng.random() < 0.3}
        tree.add_grant(Grant(f"gr{i:06d}", rng.choice(ids), principal, frozenset(privileges or {"read"})))


def creator_grants(tree: BenchTree, rng: random.Random, ids: Sequence[str], members: int) -> None:
    """The creator's implicit grant on every memory, as a gateway keeps one per memory it created."""
    everything = frozenset(PRIVILEGES)
    for memory_id in ids:
        principal = f"member:m{rng.randrange(members):05d}"
        tree.add_grant(Grant(f"c-{memory_id}", memory_id, principal, everything, implicit=True))


def percentile(sorted_values: Sequence[float], share: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return float("nan")
    rank = max(1, min(len(sorted_values), math.ceil(share * len(sorted_values))))
    return sorted_values[rank - 1]
