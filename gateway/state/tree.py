"""The tree of memories and its grants, held in memory so that access decisions cost no round trip.

The database is the source of truth; this is loaded from it at start and changed by the store in the
same call that commits each change, so the two never disagree for a request served by this process.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

from policies.access import MAX_DEPTH, BrokenTree, Grant


@dataclass(frozen=True)
class MemoryNode:
    id: str
    name: str
    description: str
    parent_id: str | None
    restricted: bool
    provider: str
    created_by: str
    created_at: int
    updated_at: int


class Tree:
    """Nodes by id, children by parent, grants by memory and by principal. Implements TreeView.

    `version` goes up with every change, so what was computed from the tree can be kept until it does."""

    def __init__(self) -> None:
        self.version = 0
        self._nodes: dict[str, MemoryNode] = {}
        self._children: dict[str | None, list[str]] = {None: []}
        self._grants_on: dict[str, list[Grant]] = {}
        self._grants_to: dict[str, list[Grant]] = {}
        self._grants_by_id: dict[str, Grant] = {}

    def __len__(self) -> int:
        return len(self._nodes)

    # -- TreeView

    def exists(self, memory_id: str) -> bool:
        return memory_id in self._nodes

    def parent_of(self, memory_id: str) -> str | None:
        node = self._nodes.get(memory_id)
        return node.parent_id if node else None

    def children_of(self, memory_id: str) -> Sequence[str]:
        return self._children.get(memory_id, ())

    def is_restricted(self, memory_id: str) -> bool:
        node = self._nodes.get(memory_id)
        return bool(node and node.restricted)

    def grants_on(self, memory_id: str) -> Sequence[Grant]:
        return self._grants_on.get(memory_id, ())

    def grants_to(self, principal: str) -> Sequence[Grant]:
        return self._grants_to.get(principal, ())

    # -- reads

    def get(self, memory_id: str) -> MemoryNode | None:
        return self._nodes.get(memory_id)

    def roots(self) -> Sequence[str]:
        return self._children[None]

    def grant(self, grant_id: str) -> Grant | None:
        return self._grants_by_id.get(grant_id)

    def all_ids(self) -> Iterator[str]:
        return iter(self._nodes)

    def subtree(self, memory_id: str) -> list[str]:
        """The memory and every descendant, breadth first."""
        out = [memory_id]
        index = 0
        while index < len(out):
            out.extend(self._children.get(out[index], ()))
            index += 1
            if len(out) > len(self._nodes) + 1:  # more than there are memories: the links loop
                raise BrokenTree(memory_id)
        return out

    def ancestors_of(self, memory_id: str) -> list[str]:
        """The parent, its parent, ... up to the root; at most MAX_DEPTH of them."""
        out: list[str] = []
        node = self.parent_of(memory_id)
        while node is not None:
            if len(out) >= MAX_DEPTH:
                raise BrokenTree(memory_id)
            out.append(node)
            node = self.parent_of(node)
        return out

    def is_descendant(self, memory_id: str, ancestor_id: str) -> bool:
        """True when `ancestor_id` is `memory_id` itself or above it."""
        return memory_id == ancestor_id or ancestor_id in self.ancestors_of(memory_id)

    def depth_of(self, memory_id: str) -> int:
        return len(self.ancestors_of(memory_id))

    def height_of(self, memory_id: str) -> int:
        """How many levels lie below the memory (0 for a leaf)."""
        height = 0
        level = list(self._children.get(memory_id, ()))
        while level:
            height += 1
            if height > MAX_DEPTH:
                raise BrokenTree(memory_id)
            level = [child for node in level for child in self._children.get(node, ())]
        return height

    def broken_chain(self) -> tuple[str, list[str]] | None:
        """What keeps the parent links from being a tree, or None: `("cycle", the memories of a cycle)` or
        `("too_deep", [a memory deeper than MAX_DEPTH])`.

        Each memory is walked up once: a walk stops at a memory already known to reach a root."""
        depth_of: dict[str | None, int] = {None: -1}  # memory -> its depth below its root
        for start in self._nodes:
            walked: list[str] = []
            on_walk: set[str] = set()
            node: str | None = start
            while node is not None and node in self._nodes and node not in depth_of:
                if node in on_walk:
                    return "cycle", walked[walked.index(node):]
                walked.append(node)
                on_walk.add(node)
                node = self._nodes[node].parent_id
            base = depth_of.get(node, -1)  # a parent that is not a memory counts as no parent
            for steps, memory_id in enumerate(reversed(walked), start=1):
                depth_of[memory_id] = base + steps
            if walked and depth_of[walked[0]] > MAX_DEPTH:
                return "too_deep", [walked[0]]
        return None

    # -- changes (called by the store after its commit)

    def replace_with(self, other: Tree) -> None:
        """Hold what `other` holds (a reload), keeping this object: others keep a reference to it."""
        version = self.version
        self.__dict__.update(other.__dict__)
        self.version = version + other.version + 1

    def put(self, node: MemoryNode) -> None:
        self.version += 1
        old = self._nodes.get(node.id)
        if old is not None and old.parent_id != node.parent_id:
            self._children[old.parent_id].remove(node.id)
        if old is None or old.parent_id != node.parent_id:
            self._children.setdefault(node.parent_id, []).append(node.id)
        self._children.setdefault(node.id, [])
        self._nodes[node.id] = node

    def update(self, memory_id: str, **changes: object) -> MemoryNode:
        node = replace(self._nodes[memory_id], **changes)  # type: ignore[arg-type]
        self.put(node)
        return node

    def remove_subtree(self, memory_id: str) -> list[str]:
        self.version += 1
        removed = self.subtree(memory_id)
        parent = self.parent_of(memory_id)
        self._children[parent].remove(memory_id)
        for node_id in removed:
            for grant in list(self._grants_on.get(node_id, ())):
                self.remove_grant(grant.id)
            self._grants_on.pop(node_id, None)
            self._children.pop(node_id, None)
            del self._nodes[node_id]
        return removed

    def add_grant(self, grant: Grant) -> None:
        self.version += 1
        self._grants_by_id[grant.id] = grant
        self._grants_on.setdefault(grant.memory_id, []).append(grant)
        self._grants_to.setdefault(grant.principal, []).append(grant)

    def remove_grant(self, grant_id: str) -> Grant | None:
        self.version += 1
        grant = self._grants_by_id.pop(grant_id, None)
        if grant is None:
            return None
        self._grants_on[grant.memory_id].remove(grant)
        self._grants_to[grant.principal].remove(grant)
        return grant


class StateCorrupt(Exception):
    """The state store's memories are not a tree (a cycle in the parent links): the gateway does not start."""


def refuse_broken(tree: Tree) -> None:
    """StateCorrupt naming the memories when the tree is not one. A cycle would send every walk up the tree
    round it for good: refusing to serve beats hanging on the first listing."""
    broken = tree.broken_chain()
    if broken is None:
        return
    kind, ids = broken
    if kind == "cycle":
        shown = " -> ".join([*ids[:8], *(["..."] if len(ids) > 8 else []), ids[0]])
        raise StateCorrupt(f"the state store's memories form a cycle of parents ({shown}): set parent_id "
                           "of one of them (table memories) to break it before starting")
    raise StateCorrupt(f"the state store's memory {ids[0]} sits deeper than the tree allows: "
                       "shorten its chain of parents (table memories) before starting")


def refresh(tree: Tree, nodes: dict[str, MemoryNode], gone: set[str], grants: dict[str, list[Grant]]) -> None:
    """Bring `tree` up to rows another instance changed: `nodes` as they are now, `gone` deleted, and the
    complete grants of each memory in `grants`."""
    for node in sorted(nodes.values(), key=lambda n: (n.created_at, n.id)):
        tree.put(node)
    for memory_id in sorted(gone, key=lambda m: -tree.depth_of(m) if tree.exists(m) else 0):
        if tree.exists(memory_id):
            tree.remove_subtree(memory_id)
    for memory_id, held in grants.items():
        for grant in list(tree.grants_on(memory_id)):
            tree.remove_grant(grant.id)
        if tree.exists(memory_id):
            for grant in held:
                tree.add_grant(grant)
