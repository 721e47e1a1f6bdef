"""The tree check going down from the roots (gateway/state/tree_check.py) judges every shape of parent links as
a walk up from each memory does, yields in bounded steps, and holds no map from memory to depth."""

from __future__ import annotations

import random
import tracemalloc
from dataclasses import dataclass

from gateway.state import tree_check
from gateway.state.tree import Tree
from policies.access import MAX_DEPTH


@dataclass(frozen=True)
class _Node:
    parent_id: str | None


def _children(parents: dict[str, str | None]) -> dict[str | None, list[str]]:
    out: dict[str | None, list[str]] = {None: []}
    for memory_id, parent in parents.items():
        out.setdefault(parent, []).append(memory_id)
    return out


def _by_walking_up(parents: dict[str, str | None]) -> set[str]:
    """The reference: follow the parents from every memory; what is wrong ('cycle', 'too_deep'), any order."""
    wrong: set[str] = set()
    for start in parents:
        seen: list[str] = []
        node: str | None = start
        while node is not None and node in parents and node not in seen:
            seen.append(node)
            node = parents[node]
        if node in seen:
            wrong.add("cycle")
        elif len(seen) - 1 > MAX_DEPTH:
            wrong.add("too_deep")
    return wrong


def _depth(parents: dict[str, str | None], memory_id: str) -> int:
    depth, node = 0, parents[memory_id]
    while node is not None and node in parents:
        depth, node = depth + 1, parents[node]
    return depth


def _judged(parents: dict[str, str | None], every: int = 7) -> tuple[str, list[str]] | None:
    nodes = {m: _Node(p) for m, p in parents.items()}
    for found in tree_check.checking(nodes, _children(parents), every):
        if found is not None:
            return found
    return None


def test_random_links_are_judged_as_by_walking_up() -> None:
    """Random forests, some with a cycle spliced in, some with parents that are no memory, some with one
    chain about MAX_DEPTH long: broken exactly when the walk up finds something wrong, with one of the
    things it finds (a cycle named by its members, a memory that is too deep)."""
    rng = random.Random(7)
    for trial in range(300):
        count = rng.randrange(1, 80)
        parents: dict[str, str | None] = {"m0": None}
        for i in range(1, count):
            parents[f"m{i}"] = rng.choice([None, "gone", *(f"m{j}" for j in range(i))])
        if trial % 3 == 0 and count > 2:  # close a loop: an ancestor made the child of its descendant
            low = f"m{rng.randrange(1, count)}"
            chain = [low]
            while (up := parents[chain[-1]]) is not None and up in parents:
                chain.append(up)
            parents[chain[-1]] = low
        if trial % 5 == 1:
            parents.update({f"d{i}": (f"d{i - 1}" if i else "m0") for i in range(MAX_DEPTH + rng.randrange(-1, 2))})
        found = _judged(parents)
        wrong = _by_walking_up(parents)
        assert (found is None) == (not wrong) and (found is None or found[0] in wrong), (trial, found, wrong)
        if found and found[0] == "too_deep":
            assert _depth(parents, found[1][0]) > MAX_DEPTH
        if found and found[0] == "cycle":
            members = found[1]
            assert all(parents[members[i]] == members[(i + 1) % len(members)] for i in range(len(members)))


def test_a_chain_past_max_depth_names_its_deepest_memory() -> None:
    parents: dict[str, str | None] = {f"d{i}": (f"d{i - 1}" if i else None) for i in range(MAX_DEPTH + 2)}
    assert _judged(parents) == ("too_deep", [f"d{MAX_DEPTH + 1}"])
    del parents[f"d{MAX_DEPTH + 1}"]
    assert _judged(parents) is None


def test_the_check_yields_after_each_step_of_memories() -> None:
    """A flat tree of 5,000 memories checked with steps of 100: a yield at least every 100 memories."""
    parents: dict[str, str | None] = {"r": None, **{f"c{i}": "r" for i in range(5000)}}
    nodes = {m: _Node(p) for m, p in parents.items()}
    steps = list(tree_check.checking(nodes, _children(parents), every=100))
    assert steps.count(None) >= 5000 // 100 and all(step is None for step in steps)


def test_the_check_of_a_sound_tree_holds_no_map_of_its_memories() -> None:
    """Checking 50,000 memories under one root allocates far less than a dict holding each of them would
    (about 2.5 MB): only one iterator per level of depth."""
    tree = Tree()
    tree.load_nodes(
        [("root", "root", "", None, False, "local", "admin", 0, 0)]
        + [(f"m{i:06d}", "n", "", "root", False, "local", "admin", i + 1, i + 1) for i in range(50_000)]
    )
    list(tree.order_children())
    tracemalloc.start()
    try:
        assert tree.broken_chain() is None
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak
