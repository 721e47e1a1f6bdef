"""Each principal's tops (gateway/state/tops.py): every memory where one of its grants begins is held,
through grants, revokes, moves, restricts, deletes and a load found again in steps; entry points looked
for among them are the ones looked for among every grant, and an admin holding a grant on every memory
has only its roots and restricted memories looked at."""

from __future__ import annotations

import random
from collections.abc import Sequence
from pathlib import Path

import pytest

from gateway.base.config import from_mapping
from gateway.server.app import begin_serving, create_app, open_services
from gateway.state import entries
from gateway.state.tree import MemoryNode, Tree
from policies import access
from policies.access import Grant

PRINCIPALS = ["member:x", "group:g", "member:other"]
CALLER = frozenset({"member:x", "group:g"})


class Plain:
    """The tree as a TreeView that keeps no tops: entry points from every grant, the reference."""

    def __init__(self, tree: Tree) -> None:
        self.tree = tree

    def exists(self, memory_id: str) -> bool:
        return self.tree.exists(memory_id)

    def parent_of(self, memory_id: str) -> str | None:
        return self.tree.parent_of(memory_id)

    def children_of(self, memory_id: str) -> Sequence[str]:
        return self.tree.children_of(memory_id)

    def is_restricted(self, memory_id: str) -> bool:
        return self.tree.is_restricted(memory_id)

    def grants_on(self, memory_id: str) -> Sequence[Grant]:
        return self.tree.grants_on(memory_id)

    def grants_to(self, principal: str) -> Sequence[Grant]:
        return self.tree.grants_to(principal)


def _node(memory_id: str, parent: str | None, restricted: bool = False, at: int = 0) -> MemoryNode:
    return MemoryNode(memory_id, memory_id, "", parent, restricted, "local", "admin", at, at)


def _true_tops(tree: Tree, principal: str) -> set[str]:
    def holds(m: str) -> bool:
        return any(g.principal == principal and g.privileges for g in tree.grants_on(m))

    return {
        m
        for m in tree.all_ids()
        if holds(m) and (tree.parent_of(m) is None or tree.is_restricted(m) or not holds(tree.parent_of(m) or ""))
    }


def _check(tree: Tree, step: object) -> None:
    for principal in PRINCIPALS:
        kept = tree.grant_tops(principal)
        assert kept is not None, step
        assert _true_tops(tree, principal) <= set(kept), (step, principal)
    assert sorted(access.entry_points(tree, CALLER)) == sorted(access.entry_points(Plain(tree), CALLER)), step


def _admin_tree() -> Tree:
    """An admin's grant on each of 1 root, 20 branches, 400 subs (every 50th restricted) and 1,600 leaves."""
    tree = Tree()
    stamp = 0

    def make(memory_id: str, parent: str | None, restricted: bool = False) -> None:
        nonlocal stamp
        stamp += 1
        tree.put(_node(memory_id, parent, restricted, stamp))
        tree.add_grant(Grant(f"g-{memory_id}", memory_id, "member:admin", frozenset(access.PRIVILEGES), True))

    make("root", None)
    for b in range(20):
        make(f"b{b}", "root")
        for s in range(20):
            make(f"b{b}s{s}", f"b{b}", restricted=(b * 20 + s) % 50 == 0)
            for leaf in range(4):
                make(f"b{b}s{s}l{leaf}", f"b{b}s{s}")
    return tree


def test_an_admin_holding_every_memory_has_only_its_root_and_restricted_memories_looked_at() -> None:
    """2,021 grants, 9 candidates: the root and the 8 restricted subs (which are no entry points, their
    parents being seen); the entry points are the root alone, as from every grant."""
    tree = _admin_tree()
    admin = frozenset({"member:admin"})
    candidates = list(access.entry_candidates(tree, admin))
    assert sorted(candidates) == sorted(["root", *(f"b{i // 20}s{i % 20}" for i in range(0, 400, 50))])
    assert access.entry_points(tree, admin) == ["root"] == access.entry_points(Plain(tree), admin)
    assert sum(1 for _ in access.entry_candidates(Plain(tree), admin)) == len(tree)


def test_tops_hold_every_top_through_random_changes() -> None:
    """After each random grant, grant without privileges, revoke, move, restrict or unrestrict, delete
    and create, every true top of each principal is held and the entry points match the reference."""
    rng = random.Random(11)
    tree = Tree()
    for i in range(200):
        ids = list(tree.all_ids())
        tree.put(_node(f"m{i}", rng.choice(ids) if ids and rng.random() < 0.85 else None, rng.random() < 0.15, i))
        if rng.random() < 0.7:
            tree.add_grant(Grant(f"g{i}", f"m{i}", rng.choice(PRINCIPALS), frozenset({"read"})))
    _check(tree, "built")
    for step in range(400):
        ids = list(tree.all_ids())
        memory_id = rng.choice(ids)
        kind = rng.randrange(7)
        if kind == 0:
            tree.add_grant(
                Grant(
                    f"r{step}",
                    memory_id,
                    rng.choice(PRINCIPALS),
                    frozenset({"read"}) if rng.random() < 0.9 else frozenset(),
                )
            )
        elif kind == 1 and (held := list(tree.grants_on(memory_id))):
            tree.remove_grant(rng.choice(held).id)
        elif kind == 2:
            target = rng.choice([*ids, None])
            if target is None or not tree.is_descendant(target, memory_id):
                tree.update(memory_id, parent_id=target)
        elif kind == 3:
            tree.update(memory_id, restricted=not tree.is_restricted(memory_id))
        elif kind == 4 and rng.random() < 0.2:
            tree.remove_subtree(memory_id)
        else:
            tree.put(_node(f"n{step}", memory_id, rng.random() < 0.1, 1000 + step))
            tree.add_grant(Grant(f"c{step}", f"n{step}", rng.choice(PRINCIPALS), frozenset({"write"})))
        _check(tree, step)


def _loaded(count: int) -> Tree:
    """A tree whose grants came by `load_grants`, as at start: its tops are stale."""
    rng = random.Random(5)
    tree = Tree()
    rows = []
    for i in range(count):
        parent = f"m{rng.randrange(i)}" if i and rng.random() < 0.9 else None
        rows.append((f"m{i}", "n", "", parent, rng.random() < 0.1, "local", "admin", i, i))
    tree.load_nodes(rows)
    list(tree.order_children())
    grants = [(f"g{i}", f"m{i}", rng.choice(PRINCIPALS), "read", False) for i in range(count) if rng.random() < 0.8]
    tree.load_grants(grants, lambda text: frozenset(text.split(",")))
    return tree


def test_a_load_leaves_the_tops_stale_and_a_rebuild_with_changes_between_its_steps_finds_them() -> None:
    """Stale after load_grants: no tops are offered and entry points come from every grant; a rebuild in
    steps of 7, with a random change between steps, ends ready and holding every top."""
    rng = random.Random(2)
    tree = _loaded(600)
    assert tree.grant_tops("member:x") is None
    assert sorted(access.entry_points(tree, CALLER)) == sorted(access.entry_points(Plain(tree), CALLER))
    for step, _ in enumerate(tree.rebuild_tops(step=7)):
        memory_id = rng.choice(list(tree.all_ids()))
        if step % 3 == 0 and (held := list(tree.grants_on(memory_id))):
            tree.remove_grant(rng.choice(held).id)
        elif step % 3 == 1:
            tree.add_grant(Grant(f"x{step}", memory_id, rng.choice(PRINCIPALS), frozenset({"read"})))
        else:
            tree.update(memory_id, restricted=not tree.is_restricted(memory_id))
    assert tree.tops.ready
    _check(tree, "rebuilt")


async def test_entry_points_of_a_loaded_tree_wait_for_the_rebuild_and_prepare_starts_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """sorted_for on stale tops rebuilds them first (the list is the reference's, in key order); prepare
    on a later load starts the rebuild without an ask, and close stops one under way."""
    monkeypatch.setattr("gateway.state.tops.STEP", 50)
    tree = _loaded(800)
    points = entries.EntryPoints(tree)
    computed = await points.sorted_for(CALLER)
    assert tree.tops.ready
    assert [k[2] for k in computed.keys] == sorted(
        access.entry_points(Plain(tree), CALLER), key=lambda m: (tree.depth_of(m), tree.sort_key(m), m)
    )
    tree.replace_with(_loaded(800))
    assert not tree.tops.ready
    points.prepare()
    await points.close()  # cancelled midway: still stale, and the next ask rebuilds
    assert not tree.tops.ready
    points.prepare()
    assert points._rebuilding is not None
    await points._rebuilding
    assert tree.tops.ready


async def test_serving_starts_finding_the_tops_of_the_loaded_grants_without_an_ask(tmp_path: Path) -> None:
    """A store opened on rows written before has stale tops (its grants came by the load); once the app
    begins serving, their rebuild is under way, and it ends with the tops ready and holding the root."""
    data = tmp_path / "data"
    data.mkdir(mode=0o700)
    config = from_mapping({}).with_overrides(data_dir=data)
    first = await open_services(config)
    try:
        root = await first.store.create_memory(
            name="Root", description="", parent_id=None, restricted=False, provider="local", created_by="mbr_x"
        )
        await first.store.create_memory(
            name="Child", description="", parent_id=root.id, restricted=False, provider="local", created_by="mbr_x"
        )
    finally:
        await first.close()
    services = await open_services(config)
    try:
        assert not services.store.tree.tops.ready
        await begin_serving(create_app(config, services=services), services)
        rebuilding = services.store.entries._rebuilding
        assert rebuilding is not None
        await rebuilding
        assert services.store.tree.tops.ready
        assert set(services.store.tree.grant_tops("member:mbr_x") or ()) == {root.id}
    finally:
        await services.close()
