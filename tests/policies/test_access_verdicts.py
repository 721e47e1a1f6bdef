"""What routes ask of `policies.access`: may read (with its reason), readable neighbours, memories granted."""

from __future__ import annotations

from hypothesis import given

from policies.access import decide, decide_read, granted, readable_neighbours
from tests.policies.strategies import callers, worlds
from tests.policies.tree_model import World, ref_effective, world_from

ROOT, OPEN, CLOSED, LEAF = ("hmem_" + c * 32 for c in "abcd")
WORLD = world_from([(ROOT, None), (OPEN, ROOT), (CLOSED, ROOT), (LEAF, OPEN)], restricted=[CLOSED],
                   grants=[(ROOT, "member:r", ["read"]), (LEAF, "member:w", ["write"]),
                           (CLOSED, "member:w", ["read"])])
READER, WRITER = frozenset({"member:r"}), frozenset({"member:w"})


def test_a_read_allowed_names_the_grant_that_gives_it() -> None:
    verdict = decide_read(WORLD.tree(), READER, LEAF)
    assert verdict.allowed and verdict.privilege == "read" and verdict.memory_id == LEAF
    assert verdict.reason.startswith("allowed by ") and f"to member:r on {ROOT} gives read" in verdict.reason


def test_a_read_refused_behind_a_cutoff_says_where_inheritance_stopped() -> None:
    verdict = decide_read(WORLD.tree(), READER, CLOSED)
    assert not verdict.allowed
    assert verdict.reason == f"refused: no grant on {CLOSED} or the ancestors that reach it; inheritance cut off " \
                             f"at restricted memory {CLOSED}"


def test_a_read_refused_where_only_write_is_held_says_so() -> None:
    """Holding write but not read: refused, yet visible (the caller is told 403, not 404)."""
    verdict = decide_read(WORLD.tree(), WRITER, LEAF)
    assert not verdict.allowed and verdict.visible
    assert verdict.reason == f"refused: the grants that reach {LEAF} do not give read"


def test_decide_answers_any_privilege_with_its_reason() -> None:
    verdict = decide(WORLD.tree(), WRITER, LEAF, "write")
    assert verdict.allowed and verdict.privilege == "write"
    assert verdict.reason == f"allowed by grant g1 to member:w on {LEAF} gives write"
    assert not decide(WORLD.tree(), READER, LEAF, "delete").allowed


def test_a_missing_memory_is_refused_with_that_reason() -> None:
    verdict = decide_read(WORLD.tree(), READER, "hmem_gone")
    assert not verdict.allowed and not verdict.visible and verdict.reason == "refused: no such memory"


def test_neighbours_are_the_readable_parent_and_readable_children() -> None:
    """The reader of ROOT goes on to OPEN but not to CLOSED (cut off); from LEAF it goes back to OPEN."""
    tree = WORLD.tree()
    assert readable_neighbours(tree, READER, ROOT).children == (OPEN,)
    assert readable_neighbours(tree, READER, ROOT).parent is None
    assert readable_neighbours(tree, READER, LEAF).parent == OPEN
    assert readable_neighbours(tree, WRITER, LEAF).parent is None  # OPEN is not readable to it
    assert readable_neighbours(tree, WRITER, ROOT).children == (CLOSED,)


def test_granted_lists_each_memory_a_grant_opens_with_the_privileges_there() -> None:
    assert granted(WORLD.tree(), WRITER) == {LEAF: frozenset({"write"}), CLOSED: frozenset({"read"})}
    assert granted(WORLD.tree(), frozenset({"member:nobody"})) == {}


@given(world=worlds())
def test_every_verdict_and_neighbour_matches_the_reference(world: World) -> None:
    """decide_read, readable_neighbours and granted agree with the spec read plainly (tree_model)."""
    tree = world.tree()
    for principals in callers(world):
        held = {n: ref_effective(world, principals, n) for n in world.nodes}
        for node in world.nodes:
            for privilege in ("read", "write", "create", "delete"):
                verdict = decide(tree, principals, node, privilege)
                assert verdict.allowed == (privilege in held[node]) and verdict.visible == bool(held[node])
            assert decide_read(tree, principals, node).allowed == ("read" in held[node])
            around = readable_neighbours(tree, principals, node)
            parent = world.parent[node]
            assert around.parent == (parent if parent is not None and "read" in held[parent] else None)
            expected = [c for c in world.nodes if world.parent[c] == node and "read" in held[c]]
            assert sorted(around.children) == sorted(expected)
        mine = {g.memory_id for g in world.grants if g.principal in principals and g.privileges}
        assert granted(tree, principals) == {n: held[n] for n in world.nodes if n in mine}
