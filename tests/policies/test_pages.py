"""Paged walks (policies/pages.py) over the gateway's own tree: the pages of a listing hold exactly what the
unpaged decision (`walk_down`, `readable_children`) holds, each memory once, however the tree changes
between pages; a page resumes from its cursor's keys, a deleted memory's included."""

from __future__ import annotations

import random

import pytest

from gateway.state.tree import MemoryNode, Tree
from policies import access, pages
from policies.access import PRIVILEGES, Grant

READER = frozenset({"member:reader"})


def _node(memory_id: str, parent: str | None, stamp: int, restricted: bool = False) -> MemoryNode:
    return MemoryNode(memory_id, memory_id, "", parent, restricted, "local", "admin", stamp, stamp)


def _random_tree(rng: random.Random, count: int) -> Tree:
    tree = Tree()
    ids: list[str] = []
    for i in range(count):
        parent = rng.choice(ids) if ids and rng.random() < 0.95 else (ids[0] if ids else None)
        memory_id = f"m{i:05d}"
        tree.put(_node(memory_id, parent, stamp=rng.randrange(1000), restricted=bool(ids) and rng.random() < 0.1))
        ids.append(memory_id)
        if rng.random() < 0.05:
            tree.add_grant(Grant(f"g{i}", memory_id, "member:reader", frozenset({"read"})))
    tree.add_grant(Grant("groot", ids[0], "member:reader", frozenset(PRIVILEGES)))
    return tree


def _all_pages_below(tree: Tree, root: str, limit: int, between: object = None, budget: int = pages.BUDGET
                     ) -> list[str]:
    seen: list[str] = []
    after: list[pages.SortKey] = []
    while True:
        page = pages.descendants_page(tree, READER, root, after, limit, budget=budget)
        seen.extend(page.ids)
        if page.resume is None:
            return seen
        after = page.resume
        if callable(between):
            between(seen)


def _all_child_pages(tree: Tree, parent: str, limit: int, between: object = None, budget: int = pages.BUDGET
                     ) -> list[str]:
    seen: list[str] = []
    after: pages.SortKey | None = None
    while True:
        page = pages.children_page(tree, READER, parent, after, limit, budget=budget)
        seen.extend(page.ids)
        if page.resume is None:
            return seen
        after = page.resume[-1]
        if callable(between):
            between(seen)


@pytest.mark.parametrize("seed", range(6))
def test_subtree_pages_hold_exactly_the_readable_descendants_each_once(seed: int) -> None:
    """Pages of ?ancestor= at any page size list the set walk_down finds readable below the root, no
    memory twice; a small budget only makes pages shorter, never changes what is listed."""
    rng = random.Random(seed)
    tree = _random_tree(rng, 400)
    root = "m00000"
    expected = {m for m, level, privs in access.walk_down(tree, READER, root) if level and privs}
    for limit, budget in ((1, pages.BUDGET), (7, pages.BUDGET), (50, 13), (200, pages.BUDGET)):
        listed = _all_pages_below(tree, root, limit, budget=budget)
        assert len(listed) == len(set(listed)), (limit, budget)
        assert set(listed) == expected, (limit, budget)


@pytest.mark.parametrize("seed", range(6))
def test_child_pages_hold_exactly_the_readable_children_each_once(seed: int) -> None:
    """Pages of ?parent= list what readable_children gives, in key order, each once."""
    rng = random.Random(seed)
    tree = Tree()
    tree.put(_node("p", None, 0))
    tree.add_grant(Grant("gp", "p", "member:reader", frozenset({"read"})))
    for i in range(300):
        tree.put(_node(f"c{i:04d}", "p", rng.randrange(50), restricted=rng.random() < 0.3))
        if rng.random() < 0.1:
            tree.add_grant(Grant(f"g{i}", f"c{i:04d}", "member:reader", frozenset({"read"})))
    expected = access.readable_children(tree, READER, "p")
    for limit, budget in ((1, pages.BUDGET), (9, pages.BUDGET), (40, 11)):
        listed = _all_child_pages(tree, "p", limit, budget=budget)
        assert listed == sorted(expected, key=lambda m: tree.sort_key(m) or (0, m)), (limit, budget)


@pytest.mark.parametrize("seed", range(8))
def test_subtree_pages_list_every_memory_present_throughout_once_under_inserts_and_deletes(seed: int) -> None:
    """Between pages, memories are created anywhere and subtrees (listed ones, the cursor's own included)
    deleted: every memory that stays throughout is listed exactly once, and none twice."""
    rng = random.Random(seed)
    tree = _random_tree(rng, 300)
    root = "m00000"
    stamp = [2000]
    doomed: set[str] = set()
    made = [0]

    def change(seen: list[str]) -> None:
        alive = [m for m in tree.subtree(root) if m != root]
        for _ in range(3):
            stamp[0] += 1
            made[0] += 1
            parent = rng.choice([*alive, root])
            tree.put(_node(f"n{made[0]:05d}", parent, stamp[0]))
        victim = seen[-1] if rng.random() < 0.5 and seen and tree.exists(seen[-1]) else rng.choice(alive)
        if tree.exists(victim):
            doomed.update(tree.subtree(victim))
            tree.remove_subtree(victim)

    before = {m for m, level, privs in access.walk_down(tree, READER, root) if level and privs}
    listed = _all_pages_below(tree, root, 5, between=change)
    assert len(listed) == len(set(listed))
    assert before - doomed <= set(listed)


def test_child_pages_list_every_child_present_throughout_once_under_inserts_and_deletes() -> None:
    """Between pages of ?parent=, children are added and deleted (the cursor's own child among them): each
    child that stays is listed once, none twice."""
    rng = random.Random(7)
    tree = Tree()
    tree.put(_node("p", None, 0))
    tree.add_grant(Grant("gp", "p", "member:reader", frozenset({"read"})))
    for i in range(100):
        tree.put(_node(f"c{i:04d}", "p", i))
    before = set(tree.children_of("p"))
    gone: set[str] = set()
    made = [0]

    def change(seen: list[str]) -> None:
        made[0] += 1
        tree.put(_node(f"n{made[0]:04d}", "p", 1000 + made[0]))
        victim = seen[-1] if made[0] % 2 else rng.choice(list(tree.children_of("p")))
        if tree.exists(victim):
            gone.add(victim)
            tree.remove_subtree(victim)

    listed = _all_child_pages(tree, "p", 3, between=change)
    assert len(listed) == len(set(listed))
    assert before - gone <= set(listed)


def test_a_subtree_cursor_whose_memory_was_deleted_resumes_after_it() -> None:
    """The cursor names a memory deleted since (with its subtree): the next page starts at the memory that
    came after it in the walk, not at the start and not further on."""
    tree = Tree()
    tree.put(_node("r", None, 0))
    tree.add_grant(Grant("g", "r", "member:reader", frozenset({"read"})))
    for i, name in enumerate(("a", "b", "c")):
        tree.put(_node(name, "r", 10 + i))
        tree.put(_node(f"{name}1", name, 20 + i))
    first = pages.descendants_page(tree, READER, "r", [], 3)
    assert first.ids == ["a", "a1", "b"]
    assert first.resume is not None
    tree.remove_subtree("b")
    second = pages.descendants_page(tree, READER, "r", first.resume, 3)
    assert second.ids == ["c", "c1"] and second.resume is None


def test_a_cursor_whose_whole_recorded_path_is_gone_without_the_top_is_refused() -> None:
    """A cursor that kept only the deepest part of its path, every memory of which went: CursorGone, not a
    silent restart that would list memories twice."""
    tree = Tree()
    tree.put(_node("r", None, 0))
    tree.put(_node("a", "r", 1))
    tree.put(_node("a1", "a", 2))
    tree.add_grant(Grant("g", "r", "member:reader", frozenset({"read"})))
    cursor = [(2, "a1")]
    tree.remove_subtree("a")
    with pytest.raises(pages.CursorGone):
        pages.descendants_page(tree, READER, "r", cursor, 5, complete=False)
