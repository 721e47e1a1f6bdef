"""The tree of memories and its grants, held in memory so that access decisions cost no round trip.

The database is the source of truth; this is loaded from it at start and changed by the store in the
same call that commits each change, so the two never disagree for a request served by this process.
"""

from __future__ import annotations

import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gateway.state import tree_check
from gateway.state.shards import MASK, Shards
from gateway.state.tops import GrantTops
from gateway.state.twins import thawed_twin
from policies.access import MAX_DEPTH, BrokenTree, Grant

SortKey = tuple[int, str]  # (created_at, id): the order of siblings, and where a page resumes among them


@dataclass(frozen=True, slots=True)
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

    @property
    def key(self) -> SortKey:
        return self.created_at, self.id


# Built by the load's hot loops in a tenth of the time of the frozen classes' own __init__.
NodeTwin = thawed_twin(MemoryNode)
GrantTwin = thawed_twin(Grant)


def compact(node: MemoryNode) -> MemoryNode:
    """The node as the tree keeps it: at a million memories each byte counts a megabyte. The few providers
    and creators are shared strings, and an `updated_at` equal to `created_at` is the same int."""
    updated = node.created_at if node.updated_at == node.created_at else node.updated_at
    return MemoryNode(node.id, node.name, node.description, node.parent_id, node.restricted,
                      sys.intern(node.provider), sys.intern(node.created_by), node.created_at, updated)


class Tree:
    """Nodes by id, children by parent, grants by memory and by principal. Implements TreeView.

    Siblings are kept in `SortKey` order, so a listing resumes among them by bisection. Only a memory with
    children has a list, and grants on a memory are a tuple: most memories hold one grant and no child.

    `version` goes up with every change, so what was computed from the tree can be kept until it does."""

    def __init__(self) -> None:
        self.version = 0
        # The three maps of a million entries are Shards (gateway/state/shards.py): no insert of the load
        # rebuilds a million-entry table in one step.
        self._nodes: Shards[MemoryNode] = Shards()
        self._children: dict[str | None, list[str]] = {None: []}
        self._grants_on: Shards[tuple[Grant, ...]] = Shards()
        self._grants_to: dict[str, list[Grant]] = {}
        self._grants_by_id: Shards[Grant] = Shards()
        self._privileges: dict[frozenset[str], frozenset[str]] = {}  # one frozenset per distinct set
        self._restricted_under: dict[str | None, set[str]] = {}  # only parents with a restricted child
        self.tops = GrantTops()  # where each principal's grants begin (gateway/state/tops.py)
        # While loading (load_nodes, then order_children): the last row's key, and whether every row so
        # far came after the one before it.
        self._load_last: SortKey = (-(2**63), "")
        self._load_in_order = True

    def __len__(self) -> int:
        return len(self._nodes)

    # -- TreeView

    def exists(self, memory_id: str) -> bool:
        return memory_id in self._nodes.parts[hash(memory_id) & MASK]

    def parent_of(self, memory_id: str) -> str | None:
        node = self._nodes.parts[hash(memory_id) & MASK].get(memory_id)
        return node.parent_id if node else None

    def children_of(self, memory_id: str) -> Sequence[str]:
        return self._children.get(memory_id, ())

    def is_restricted(self, memory_id: str) -> bool:
        node = self._nodes.parts[hash(memory_id) & MASK].get(memory_id)
        return bool(node and node.restricted)

    def grants_on(self, memory_id: str) -> Sequence[Grant]:
        return self._grants_on.parts[hash(memory_id) & MASK].get(memory_id, ())

    def grants_to(self, principal: str) -> Sequence[Grant]:
        return self._grants_to.get(principal, ())

    def restricted_children_of(self, memory_id: str) -> Iterator[str]:
        return iter(self._restricted_under.get(memory_id, ()))

    def grant_tops(self, principal: str) -> Collection[str] | None:
        return self.tops.of(principal)

    def rebuild_tops(self, step: int | None = None) -> Iterator[None]:
        return self.tops.rebuild(self, self._grants_to, step)

    def sort_key(self, memory_id: str) -> SortKey | None:
        node = self._nodes.parts[hash(memory_id) & MASK].get(memory_id)
        return (node.created_at, node.id) if node is not None else None

    def index_after(self, parent_id: str | None, key: SortKey) -> int:
        """Where the siblings under `parent_id` that sort after `key` begin (`key` need not be one of them)."""
        nodes = self._nodes
        return bisect_right(self._children.get(parent_id, ()), key, key=lambda m: (nodes[m].created_at, m))

    # -- reads

    def get(self, memory_id: str) -> MemoryNode | None:
        return self._nodes.parts[hash(memory_id) & MASK].get(memory_id)

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
        most = len(self._nodes) + 1
        while index < len(out):
            out.extend(self._children.get(out[index], ()))
            index += 1
            if len(out) > most:  # more than there are memories: the links loop
                raise BrokenTree(memory_id)
        return out

    def ancestors_of(self, memory_id: str) -> list[str]:
        """The parent, its parent, ... up to the root; at most MAX_DEPTH of them."""
        out: list[str] = []
        parts = self._nodes.parts  # the lookups inline: a walk up is the hot path of access decisions
        found = parts[hash(memory_id) & MASK].get(memory_id)
        node = found.parent_id if found is not None else None
        while node is not None:
            if len(out) >= MAX_DEPTH:
                raise BrokenTree(memory_id)
            out.append(node)
            found = parts[hash(node) & MASK].get(node)
            node = found.parent_id if found is not None else None
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
        `("too_deep", [a memory deeper than MAX_DEPTH])`."""
        for found in self.checking_chain():
            if found is not None:
                return found
        return None

    def checking_chain(self, every: int = 5000) -> Iterator[tuple[str, list[str]] | None]:
        """`broken_chain` in steps: yields None after about each `every` memories looked at, and what is
        broken as soon as it is found (gateway/state/tree_check.py)."""
        return tree_check.checking(self._nodes, self._children, every)

    # -- changes (called by the store after its commit)

    def replace_with(self, other: Tree) -> None:
        """Hold what `other` holds (a reload), keeping this object: others keep a reference to it."""
        version = self.version
        self.__dict__.update(other.__dict__)
        self.version = version + other.version + 1

    def put(self, node: MemoryNode) -> None:
        self.version += 1
        node = compact(node)
        old = self._nodes.get(node.id)
        if old is not None and old.parent_id != node.parent_id:
            self._unlink(old)
        self._nodes[node.id] = node
        if old is None or old.parent_id != node.parent_id:
            self._link(node)
        elif old.restricted != node.restricted:
            self._mark_restricted(node)
        if old is not None and (old.parent_id != node.parent_id or node.restricted > old.restricted):
            self.tops.reconsidered(self, node.id)

    def load_nodes(self, rows: Iterable[Sequence[Any]]) -> None:
        """New nodes from `memories` rows (columns in table order), appended to their siblings whatever
        their keys: `order_children` must follow before the tree is read. The load's hot loop.

        Rows read in key order (the load asks for them so) leave every list of siblings in order; whether
        they came so is noted here, row by row, so `order_children` need not look at each list again."""
        nodes, children, intern = self._nodes.parts, self._children, sys.intern
        restricted_under = self._restricted_under
        last_created, last_id = self._load_last
        in_order = self._load_in_order
        for memory_id, name, description, parent_id, restricted, provider, created_by, created, updated in rows:
            if in_order and (created < last_created or (created == last_created and memory_id <= last_id)):
                in_order = False
            last_created, last_id = created, memory_id
            node = NodeTwin(memory_id, name, description, parent_id, bool(restricted), intern(provider),
                            intern(created_by), created, created if updated == created else updated)
            node.__class__ = MemoryNode  # a frozen node from here on (gateway/state/twins.py)
            nodes[hash(memory_id) & MASK][memory_id] = node
            siblings = children.get(parent_id)
            if siblings is None:
                children[parent_id] = [memory_id]
            else:
                siblings.append(memory_id)
            if restricted:
                restricted_under.setdefault(parent_id, set()).add(memory_id)
        self._load_last, self._load_in_order = (last_created, last_id), in_order

    def load_grants(self, rows: Iterable[Sequence[Any]], privileges_of: Callable[[str], frozenset[str]]) -> None:
        """Grants from rows of (id, memory_id, principal, privileges, implicit): the load's other hot loop,
        `add_grant` without its per-call checks."""
        nodes, on, to, by_id = self._nodes.parts, self._grants_on.parts, self._grants_to, self._grants_by_id.parts
        shared = self._privileges
        intern = sys.intern
        by_text: dict[str, frozenset[str]] = {}  # rows repeat a few texts a million times
        for grant_id, memory_id, principal, text, implicit in rows:
            part = hash(memory_id) & MASK  # the memory's part of both maps: they share the mask
            node = nodes[part].get(memory_id)
            if node is not None:
                memory_id = node.id  # the node's string, not a second copy of it
            privileges = by_text.get(text)
            if privileges is None:
                parsed = privileges_of(text)
                privileges = by_text[text] = shared.setdefault(parsed, parsed)
            principal = intern(principal)
            grant = GrantTwin(grant_id, memory_id, principal, privileges, bool(implicit))
            grant.__class__ = Grant  # a frozen grant from here on (gateway/state/twins.py)
            by_id[hash(grant_id) & MASK][grant_id] = grant
            mine_on = on[part]
            held = mine_on.get(memory_id)
            mine_on[memory_id] = (grant,) if held is None else (*held, grant)
            mine = to.get(principal)
            if mine is None:
                to[principal] = [grant]
            else:
                mine.append(grant)
        self.tops.invalidate()  # no hook per row: found again from every grant (`rebuild_tops`)
        self.version += 1

    def order_children(self, every: int = 20_000) -> Iterator[int]:
        """Sort every list of siblings into key order; yields after each `every` siblings looked at, so a
        caller may let others run in between. A list already in order (rows read in key order) is only
        checked; a list longer than `every` is still sorted in one step. When every row came to `load_nodes`
        in key order, no list needs looking at."""
        nodes = self._nodes
        since = 0
        in_order, self._load_in_order, self._load_last = self._load_in_order, True, (-(2**63), "")
        for siblings in [] if in_order else list(self._children.values()):
            keys = [(nodes[m].created_at, m) for m in siblings]
            if any(keys[i] > keys[i + 1] for i in range(len(keys) - 1)):
                siblings.sort(key=lambda m: (nodes[m].created_at, m))
            since += len(siblings)
            if since >= every:
                since = 0
                yield 0
        self.version += 1

    def _mark_restricted(self, node: MemoryNode) -> None:
        if node.restricted:
            self._restricted_under.setdefault(node.parent_id, set()).add(node.id)
            return
        held = self._restricted_under.get(node.parent_id)
        if held is not None:
            held.discard(node.id)
            if not held:
                del self._restricted_under[node.parent_id]

    def _link(self, node: MemoryNode) -> None:
        if node.restricted:
            self._mark_restricted(node)
        siblings = self._children.get(node.parent_id)
        if siblings is None:
            self._children[node.parent_id] = [node.id]
            return
        last = self._nodes[siblings[-1]] if siblings else None
        if last is None or (last.created_at, last.id) < (node.created_at, node.id):
            siblings.append(node.id)  # the usual case: a new memory is the newest of its siblings
        else:
            nodes = self._nodes
            siblings.insert(bisect_left(siblings, (node.created_at, node.id),
                                        key=lambda m: (nodes[m].created_at, m)), node.id)

    def _unlink(self, node: MemoryNode) -> None:
        if node.restricted:
            self._mark_restricted(replace(node, restricted=False))
        siblings = self._children[node.parent_id]
        nodes = self._nodes
        at = bisect_left(siblings, (node.created_at, node.id), key=lambda m: (nodes[m].created_at, m))
        if at < len(siblings) and siblings[at] == node.id:
            del siblings[at]
        else:  # keys out of order (never expected): find it the slow way
            siblings.remove(node.id)
        if not siblings and node.parent_id is not None:
            del self._children[node.parent_id]

    def update(self, memory_id: str, **changes: object) -> MemoryNode:
        node = replace(self._nodes[memory_id], **changes)  # type: ignore[arg-type]
        self.put(node)
        return node

    def remove_subtree(self, memory_id: str) -> list[str]:
        self.version += 1
        removed = self.subtree(memory_id)
        self._unlink(self._nodes[memory_id])
        for node_id in removed:
            for grant in list(self._grants_on.get(node_id) or ()):
                self.remove_grant(grant.id)
            self._grants_on.pop(node_id)
            self._children.pop(node_id, None)
            self._restricted_under.pop(node_id, None)
            del self._nodes[node_id]
        return removed

    def add_grant(self, grant: Grant) -> None:
        self.version += 1
        node = self._nodes.get(grant.memory_id)
        privileges = self._privileges.setdefault(grant.privileges, grant.privileges)
        grant = Grant(grant.id, node.id if node is not None else grant.memory_id, sys.intern(grant.principal),
                      privileges, grant.implicit)
        self._grants_by_id[grant.id] = grant
        self._grants_on[grant.memory_id] = (*(self._grants_on.get(grant.memory_id) or ()), grant)
        self._grants_to.setdefault(grant.principal, []).append(grant)
        self.tops.granted(self, grant)

    def remove_grant(self, grant_id: str) -> Grant | None:
        self.version += 1
        grant = self._grants_by_id.pop(grant_id)
        if grant is None:
            return None
        kept = tuple(g for g in self._grants_on[grant.memory_id] if g.id != grant_id)
        if kept:
            self._grants_on[grant.memory_id] = kept
        else:
            del self._grants_on[grant.memory_id]
        held = self._grants_to[grant.principal]
        held.remove(grant)
        if not held:
            del self._grants_to[grant.principal]
        self.tops.revoked(self, grant)
        return grant


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
