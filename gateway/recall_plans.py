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
from gateway.state.tree import Tree
from policies import access
from policies.recall import Plan, plan

CAPPED_REASON = "readable, but beyond the recall cap"


@dataclass
class _Kept:
    plan: Plan
    coverage: list[Coverage] | None = None
    by_provider: Mapping[str, tuple[str, ...]] | None = None


@dataclass
class RecallPlans:
    """An LRU of plans: a kept plan for a thousand memories with its coverage sets is ~100 KB."""

    maxsize: int = 128
    _kept: LRUCache[Hashable, _Kept] = field(init=False)

    def __post_init__(self) -> None:
        self._kept = LRUCache(maxsize=self.maxsize)

    def _get(self, tree: Tree, principals: frozenset[str], root_id: str, depth: int | None, cap: int) -> _Kept:
        key = (id(tree), tree.version, principals, root_id, depth, cap)
        kept = self._kept.get(key)
        if kept is None:
            kept = self._kept[key] = _Kept(plan(tree, principals, root_id, depth=depth, cap=cap))
        return kept

    def plan(self, tree: Tree, principals: frozenset[str], root_id: str, depth: int | None, cap: int) -> Plan:
        """policies.recall.plan, computed once per tree version, caller, memory, depth and cap."""
        return self._get(tree, principals, root_id, depth, cap).plan

    def by_provider(self, tree: Tree, principals: frozenset[str], root_id: str, depth: int | None,
                    cap: int) -> Mapping[str, tuple[str, ...]]:  # fmt: skip
        """The plan's memories grouped by the provider each is bound to (a binding change is a tree change)."""
        kept = self._get(tree, principals, root_id, depth, cap)
        if kept.by_provider is None:
            grouped: dict[str, list[str]] = {}
            for memory_id in kept.plan.memory_ids:
                node = tree.get(memory_id)
                if node is not None:
                    grouped.setdefault(node.provider, []).append(memory_id)
            kept.by_provider = MappingProxyType({name: tuple(ids) for name, ids in grouped.items()})
        return kept.by_provider

    def coverage(self, tree: Tree, principals: frozenset[str], root_id: str, depth: int | None,
                 cap: int) -> list[Coverage]:  # fmt: skip
        """The plan's decisions as coverage sets: each covered memory with the grants that let it be read,
        each skipped one with why not, each beyond the cap as such."""
        kept = self._get(tree, principals, root_id, depth, cap)
        if kept.coverage is None:
            found = kept.plan
            why = access.explain_subtree(tree, principals, root_id, depth)
            kept.coverage = Coverage.of([
                *(("recall.cover", m, "read", True, why[m].reason("read")) for m in found.memory_ids),
                *(("recall.skip", m, "read", False, why[m].reason("read")) for m in found.skipped),
                *(("recall.skip", m, "read", True, CAPPED_REASON) for m in found.capped),
            ])
        return kept.coverage
