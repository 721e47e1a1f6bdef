"""Entry points kept per principal set and version of the tree (gateway/state/entries.py): the same set
`access.entry_points` decides, in (depth, created_at, id) order, computed in slices that let the loop run,
once for callers asking together, and again after any change to the tree."""

from __future__ import annotations

import asyncio
import random

import pytest

from gateway.state import entries
from gateway.state.tree import MemoryNode, Tree
from policies import access
from policies.access import Grant

CALLER = frozenset({"member:x", "group:g"})


def _tree(count: int) -> Tree:
    rng = random.Random(3)
    tree = Tree()
    ids: list[str] = []
    for i in range(count):
        parent = rng.choice(ids) if ids and rng.random() < 0.9 else None
        memory_id = f"m{i:05d}"
        tree.put(MemoryNode(memory_id, memory_id, "", parent, rng.random() < 0.2, "local", "admin", rng.randrange(99),
                            0))
        ids.append(memory_id)
        if rng.random() < 0.5:
            principal = rng.choice(["member:x", "group:g", "member:other"])
            tree.add_grant(Grant(f"g{i}", memory_id, principal, frozenset({"read"}) if i % 9 else frozenset()))
    return tree


async def test_entry_points_are_the_decided_ones_in_key_order_computed_in_slices(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """With slices of 50 candidates, a task counting loop turns runs between them; the list holds what
    access.entry_points gives, ordered by (depth, created_at, id)."""
    monkeypatch.setattr(entries, "SLICE", 50)
    tree = _tree(3000)
    turns = 0
    stop = asyncio.Event()

    async def count() -> None:
        nonlocal turns
        while not stop.is_set():
            turns += 1
            await asyncio.sleep(0)

    counter = asyncio.create_task(count())
    computed = await entries.EntryPoints(tree).sorted_for(CALLER)
    stop.set()
    await counter
    candidates = sum(1 for _ in access.entry_candidates(tree, CALLER))
    assert turns >= candidates // 50 - 1
    expected = access.entry_points(tree, CALLER)
    assert [k[2] for k in computed.keys] == sorted(
        expected, key=lambda m: (tree.depth_of(m), tree.get(m).created_at, m))  # type: ignore[union-attr]


async def test_callers_asking_together_share_one_computation_and_a_change_makes_a_new_one() -> None:
    """Two requests at once get the same computed list; after a grant the next ask computes again and
    holds the memory that grant opened."""
    tree = _tree(500)
    points = entries.EntryPoints(tree)
    first, second = await asyncio.gather(points.sorted_for(CALLER), points.sorted_for(CALLER))
    assert first is second
    assert await points.sorted_for(CALLER) is first  # nothing changed: kept
    tree.put(MemoryNode("fresh", "fresh", "", None, False, "local", "admin", 1, 1))
    tree.add_grant(Grant("gfresh", "fresh", "member:x", frozenset({"read"})))
    again = await points.sorted_for(CALLER)
    assert again is not first and "fresh" in {k[2] for k in again.keys}


def test_a_kept_entry_point_that_no_longer_is_one_is_told_apart() -> None:
    """still_entry: false once its grant goes, or once its parent becomes visible to the caller."""
    tree = Tree()
    tree.put(MemoryNode("p", "p", "", None, False, "local", "admin", 1, 1))
    tree.put(MemoryNode("c", "c", "", "p", False, "local", "admin", 2, 2))
    tree.add_grant(Grant("gc", "c", "member:x", frozenset({"read"})))
    assert entries.still_entry(tree, CALLER, "c")
    tree.add_grant(Grant("gp", "p", "member:x", frozenset({"read"})))
    assert not entries.still_entry(tree, CALLER, "c")
    tree.remove_grant("gp")
    tree.remove_grant("gc")
    assert not entries.still_entry(tree, CALLER, "c")


async def test_entry_points_stay_the_decided_ones_under_random_grants_revokes_moves_and_restricts() -> None:
    """After each of many random changes (a grant, a revoke, a move under another memory or to the top, a
    restrict or unrestrict), the kept list holds exactly what access.entry_points decides, in key order;
    siblings sharing a parent share its visibility within one computation, never across changes."""
    rng = random.Random(7)
    tree = _tree(300)
    kept = entries.EntryPoints(tree)
    for step in range(200):
        ids = list(tree.all_ids())
        memory_id = rng.choice(ids)
        kind = rng.randrange(4)
        if kind == 0:
            principal = rng.choice(["member:x", "group:g", "member:other"])
            tree.add_grant(Grant(f"r{step}", memory_id, principal, frozenset({"read"})))
        elif kind == 1 and (held := list(tree.grants_on(memory_id))):
            tree.remove_grant(rng.choice(held).id)
        elif kind == 2:
            target = rng.choice([*ids, None])
            if target is None or not tree.is_descendant(target, memory_id):
                tree.update(memory_id, parent_id=target)
        else:
            tree.update(memory_id, restricted=not tree.is_restricted(memory_id))
        computed = await kept.sorted_for(CALLER)
        expected = sorted((tree.depth_of(m), tree.sort_key(m) or (0, m), m)
                          for m in access.entry_points(tree, CALLER))
        assert computed.keys == [(depth, key[0], m) for depth, key, m in expected], step
