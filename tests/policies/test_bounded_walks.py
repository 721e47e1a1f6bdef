"""Every walk of the tree ends: on parent links that loop, the policies stop with BrokenTree instead of
spinning the event loop for good (what a cycle written by a race, or by hand, used to do)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from policies import access
from policies.access import MAX_DEPTH, BrokenTree, Grant
from tests._tree_checks import hang_breaker


class Links:
    """A TreeView over bare parent links, which may loop; one grant of read on every node."""

    def __init__(self, parents: dict[str, str | None]) -> None:
        self.parents = parents
        self.grants = {m: [Grant(f"g-{m}", m, "member:m", frozenset({"read"}))] for m in parents}

    def exists(self, memory_id: str) -> bool:
        return memory_id in self.parents

    def parent_of(self, memory_id: str) -> str | None:
        return self.parents.get(memory_id)

    def children_of(self, memory_id: str) -> Sequence[str]:
        return [m for m, p in self.parents.items() if p == memory_id]

    def is_restricted(self, memory_id: str) -> bool:
        return False

    def grants_on(self, memory_id: str) -> Sequence[Grant]:
        return self.grants.get(memory_id, ())

    def grants_to(self, principal: str) -> Sequence[Grant]:
        return [g for gs in self.grants.values() for g in gs if g.principal == principal]


RING = Links({"a": "c", "b": "a", "c": "b"})
WHO = frozenset({"member:m"})


@pytest.mark.parametrize("walk", [
    lambda: access.effective(RING, WHO, "a"),
    lambda: access.explain(RING, WHO, "a"),
    lambda: access.visible_ancestors(RING, WHO, "a"),
    lambda: list(access.walk_down(RING, WHO, "a")),
    lambda: access.explain_subtree(RING, WHO, "a"),
], ids=["effective", "explain", "visible_ancestors", "walk_down", "explain_subtree"])
def test_a_walk_round_a_cycle_stops(walk: object) -> None:
    """Each walk up or down a ring of parent links raises BrokenTree within MAX_DEPTH steps."""
    with hang_breaker(), pytest.raises(BrokenTree):
        walk()  # type: ignore[operator]


def test_a_chain_of_max_depth_is_walked_whole() -> None:
    """The bound is not hit by a legal tree: a memory MAX_DEPTH levels down still reads its root's grant."""
    parents: dict[str, str | None] = {"n0": None}
    for i in range(1, MAX_DEPTH + 1):
        parents[f"n{i}"] = f"n{i - 1}"
    chain = Links(parents)
    chain.grants = {"n0": [Grant("g", "n0", "member:m", frozenset({"read"}))]}
    deepest = f"n{MAX_DEPTH}"
    assert access.effective(chain, WHO, deepest) == {"read"}
    assert len(access.explain(chain, WHO, deepest).path) == MAX_DEPTH + 1
    assert len(access.visible_ancestors(chain, WHO, deepest)) == MAX_DEPTH
    assert sum(1 for _ in access.walk_down(chain, WHO, "n0")) == MAX_DEPTH + 1
    assert len(access.explain_subtree(chain, WHO, "n0")) == MAX_DEPTH + 1
