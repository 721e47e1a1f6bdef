"""The tree's big maps are Shards (gateway/state/shards.py): they answer as a dict would, and a load of many
memories grows no single dict past a small share of them (a dict's growth rebuilds its whole table in one
step, which at a million entries holds the event loop for tens of milliseconds)."""

from __future__ import annotations

import random
from typing import Any

from gateway.state.rows import privileges_of_text
from gateway.state.shards import COUNT, Shards
from gateway.state.tree import Tree


def test_shards_answer_as_a_dict_does() -> None:
    rng = random.Random(3)
    shards: Shards[int] = Shards()
    plain: dict[str, int] = {}
    for step in range(20_000):
        key = f"k{rng.randrange(3000)}"
        action = rng.randrange(4)
        if action == 0:
            shards[key] = plain[key] = step
        elif action == 1:
            assert shards.pop(key) == plain.pop(key, None)
        elif action == 2 and key in plain:
            del shards[key]
            del plain[key]
        assert shards.get(key) == plain.get(key) and (key in shards) == (key in plain)
    assert len(shards) == len(plain) and sorted(shards) == sorted(plain)
    assert sorted(shards.values()) == sorted(plain.values())
    assert 3 not in shards  # a key that is no string is in no part


def _dicts_under(tree: Tree) -> list[dict[Any, Any]]:
    """Every dict the tree holds, directly or inside its Shards."""
    found: list[dict[Any, Any]] = []
    for value in vars(tree).values():
        if isinstance(value, dict):
            found.append(value)
        elif isinstance(value, Shards):
            found.extend(value.parts)
    return found


def test_a_load_of_many_memories_grows_no_dict_past_a_share_of_them() -> None:
    count = 40_000
    tree = Tree()
    # The bench's shape: a memory in a hundred has children (the children lists are one dict, by parent).
    rows: list[tuple[Any, ...]] = [("root", "root", "", None, False, "local", "admin", 0, 0)]
    rows += [
        (f"m{i:06d}", "n", "", f"m{i // 100:06d}" if i >= 100 else "root", False, "local", "admin", i + 1, i + 1)
        for i in range(count)
    ]
    tree.load_nodes(rows)
    list(tree.order_children())
    tree.load_grants([(f"g{r[0]}", r[0], "member:admin", "read", True) for r in rows], privileges_of_text)
    largest = max(len(d) for d in _dicts_under(tree))
    assert largest <= 2 * count // COUNT, largest
    assert len(tree) == count + 1 and tree.grant("gm000007") is not None
    assert [g.id for g in tree.grants_on("m000007")] == ["gm000007"]
