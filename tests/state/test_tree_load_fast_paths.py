"""The load's shortcuts give the same tree as the long way: sibling lists skip their order check only when
every row, across every chunk, came in key order, and the one-step depth of a memory whose parent is known
finds the same cycles and too-deep chains as the walk."""

from __future__ import annotations

import random

from gateway.state.tree import Tree
from policies.access import MAX_DEPTH

Row = tuple[str, str, str, str | None, bool, str, str, int, int]


def _row(memory_id: str, parent: str | None, stamp: int) -> Row:
    return (memory_id, memory_id, "", parent, False, "local", "admin", stamp, stamp)


def _loaded(chunks: list[list[Row]]) -> Tree:
    tree = Tree()
    for chunk in chunks:
        tree.load_nodes(chunk)
    list(tree.order_children())
    return tree


def test_a_row_out_of_order_in_a_later_chunk_still_gets_its_siblings_sorted() -> None:
    """Rows in key order in the first chunk and one older sibling arriving in the second: the siblings are
    listed by key; the same holds for a tie on created_at broken by id."""
    tree = _loaded([[_row("p", None, 0), _row("b", "p", 20), _row("c", "p", 30)], [_row("a", "p", 10)]])
    assert list(tree.children_of("p")) == ["a", "b", "c"]
    tie = _loaded([[_row("p", None, 0), _row("y", "p", 5)], [_row("x", "p", 5)]])
    assert list(tie.children_of("p")) == ["x", "y"]


def test_random_loads_in_any_order_list_siblings_by_key() -> None:
    """Random trees loaded in key order or shuffled, in random chunks: each parent's children by key."""
    rng = random.Random(12)
    for _ in range(50):
        rows = [_row("m0", None, 0)]
        for i in range(1, 60):
            rows.append(_row(f"m{i}", f"m{rng.randrange(i)}", rng.randrange(1, 20)))
        ordered = sorted(rows, key=lambda r: (r[7], r[0]))
        if rng.random() < 0.5:
            rng.shuffle(ordered)
        cut = rng.randrange(len(ordered))
        tree = _loaded([ordered[:cut], ordered[cut:]])
        for memory_id, *_ in rows:
            expected = sorted((r for r in rows if r[3] == memory_id), key=lambda r: (r[7], r[0]))
            assert list(tree.children_of(memory_id)) == [r[0] for r in expected]


def test_a_chain_too_deep_in_creation_order_is_found() -> None:
    """A chain one memory deeper than MAX_DEPTH, each memory after its parent (the one-step path): too deep,
    naming the deepest memory; one level less is a tree."""
    rows = [_row("d0", None, 0)] + [_row(f"d{i}", f"d{i - 1}", i) for i in range(1, MAX_DEPTH + 2)]
    assert _loaded([rows]).broken_chain() == ("too_deep", [f"d{MAX_DEPTH + 1}"])
    assert _loaded([rows[:-1]]).broken_chain() is None


def test_cycles_and_missing_parents_are_judged_as_by_the_walk() -> None:
    """A cycle among memories read after a tree part is found; a parent that is no memory makes a root."""
    rows = [_row("r", None, 0), _row("a", "r", 1), _row("x", "z", 2), _row("y", "x", 3), _row("z", "y", 4)]
    found = _loaded([rows]).broken_chain()
    assert found is not None and found[0] == "cycle" and set(found[1]) == {"x", "y", "z"}
    orphan = _loaded([[_row("o", "gone", 0), _row("k", "o", 1)]])
    assert orphan.broken_chain() is None
