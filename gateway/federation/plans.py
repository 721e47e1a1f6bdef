"""Recall plans, kept while nothing that decides them changes.

Agents ask the same question of the same place over and over. Which memories a recall covers, and the
reason logged for each, depend only on the tree (its nodes, cutoffs and grants), the caller's principals,
the memory asked, `depth` and the cap; the tree's `version` changes with any of them. So the plan, and the
coverage sets its decisions are logged as, are computed once per such key and reused: a recall over a
thousand memories neither walks the subtree again nor builds a thousand reasons again.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from cachetools import LRUCache

from gateway.audit import Coverage
from gateway.state.tree import MemoryNode, Tree
from policies import access
from policies.recall import Plan, plan

CAPPED_REASON = "readable, but beyond the recall cap"


@dataclass
class Places:
    """The places a recall names to go next: the readable parent and children of the memory asked. They
    depend on what its plan depends on, so they are kept with it: a flat tree's thousand children are
    neither looked up nor, while their counts stay the same, rendered again on every recall."""

    parent: MemoryNode | None
    children: tuple[MemoryNode, ...]
    # The parent (when readable) and the children: the memories whose record counts the answer shows.
    nodes: tuple[MemoryNode, ...]
    child_ids: tuple[str, ...]
    # The API's last rendering of the children (gateway/api/render.py), with the counts it shows.
    rendered: tuple[tuple[int | None, ...], bytes] | None = None


@dataclass
class KeptPlan:
    """One recall's plan, with what is derived from it computed on first use and kept with it."""

    tree: Tree
    principals: frozenset[str]
    root_id: str
    depth: int | None
    plan: Plan
    _by_provider: Mapping[str, tuple[str, ...]] | None = None
    _coverage: list[Coverage] | None = None
    _places: Places | None = None

    def places(self) -> Places:
        """The readable parent and children of the memory asked (policies.access.readable_neighbours)."""
        if self._places is None:
            around = access.readable_neighbours(self.tree, self.principals, self.root_id)
            parent = self.tree.get(around.parent) if around.parent is not None else None
            children = tuple(c for c in map(self.tree.get, around.children) if c is not None)
            self._places = Places(parent, children, (*((parent,) if parent else ()), *children),
                                  tuple(c.id for c in children))
        return self._places

    def by_provider(self) -> Mapping[str, tuple[str, ...]]:
        """The plan's memories grouped by the provider each is bound to (a binding change is a tree change)."""
        if self._by_provider is None:
            grouped: dict[str, list[str]] = {}
            for memory_id in self.plan.memory_ids:
                node = self.tree.get(memory_id)
                if node is not None:
                    grouped.setdefault(node.provider, []).append(memory_id)
            self._by_provider = MappingProxyType({name: tuple(ids) for name, ids in grouped.items()})
        return self._by_provider

    def coverage(self) -> list[Coverage]:
        """The plan's decisions as coverage sets: each covered memory with the grants that let it be read,
        each skipped one with why not, each beyond the cap as such."""
        if self._coverage is None:
            found = self.plan
            why = access.explain_subtree(self.tree, self.principals, self.root_id, self.depth)
            self._coverage = Coverage.of([
                *(("recall.cover", m, "read", True, why[m].reason("read")) for m in found.memory_ids),
                *(("recall.skip", m, "read", False, why[m].reason("read")) for m in found.skipped),
                *(("recall.skip", m, "read", True, CAPPED_REASON) for m in found.capped),
            ])
        return self._coverage


@dataclass
class RecallPlans:
    """An LRU of plans: a kept plan for a thousand memories with its coverage sets is ~100 KB."""

    maxsize: int = 128
    _kept: LRUCache[Hashable, KeptPlan] = field(init=False)

    def __post_init__(self) -> None:
        self._kept = LRUCache(maxsize=self.maxsize)

    def get(self, tree: Tree, principals: frozenset[str], root_id: str, depth: int | None, cap: int) -> KeptPlan:
        """policies.recall.plan, computed once per tree version, caller, memory, depth and cap."""
        key = (id(tree), tree.version, principals, root_id, depth, cap)
        kept = self._kept.get(key)
        if kept is None:
            found = plan(tree, principals, root_id, depth=depth, cap=cap)
            kept = self._kept[key] = KeptPlan(tree, principals, root_id, depth, found)
        return kept
