"""Reasons cut at a reader's reach (policies/reach.py): what stays, what goes, what replaces it."""

from __future__ import annotations

from hypothesis import given

from policies import access, reach
from policies.access import Grant
from policies.reach import grants_in_reach, held_anywhere, sees
from tests.policies.strategies import callers, worlds
from tests.policies.tree_model import World, ref_effective, world_from

ROOT, MID, LEAF = "hmem_" + "a" * 32, "hmem_" + "b" * 32, "hmem_" + "c" * 32
WORLD = world_from([(ROOT, None), (MID, ROOT), (LEAF, MID)], restricted=[MID],
                   grants=[(ROOT, "member:s", ["read"]), (MID, "member:s", ["read", "write"]),
                           (LEAF, "member:s", ["write"])])
SUBJECT = frozenset({"member:s"})


def test_grants_beyond_reach_become_one_phrase() -> None:
    """Seeing LEAF only, the grant on MID is "inherited from above your reach"; LEAF's own is named."""
    decision = access.explain(WORLD.tree(), SUBJECT, LEAF)
    seen = reach.within_reach(decision, lambda m: m == LEAF)
    assert seen.path == (LEAF,) and seen.from_above == {"read", "write"} and seen.cutoff_at is None
    assert seen.reason("read") == "allowed: inherited from above your reach"
    assert seen.reason("write").endswith("on " + LEAF + " gives write; also inherited from above your reach")
    for privilege in access.PRIVILEGES:
        assert MID not in seen.reason(privilege) and ROOT not in seen.reason(privilege)
        assert reach.cut_reason(decision.reason(privilege), lambda m: m == LEAF) == seen.reason(privilege)


def test_a_reader_who_sees_everything_reads_the_reason_unchanged() -> None:
    decision = access.explain(WORLD.tree(), SUBJECT, LEAF)
    for privilege in access.PRIVILEGES:
        assert reach.cut_reason(decision.reason(privilege), lambda m: True) == decision.reason(privilege)
    assert reach.within_reach(decision, lambda m: True).cutoff_at == MID


def test_a_hidden_cutoff_is_dropped_from_a_refusal() -> None:
    stranger = access.explain(WORLD.tree(), frozenset({"member:x"}), LEAF)
    cut = reach.cut_reason(stranger.reason("read"), lambda m: m == LEAF)
    assert cut == f"refused: no grant on {LEAF} or the ancestors that reach it"


def test_a_reason_of_another_shape_names_no_hidden_memory() -> None:
    """A principal holding the clause separator, or a reason in no known shape, still names no hidden id."""
    odd = Grant("hgrt_1", ROOT, "x.team:a; b on c gives read", frozenset({"read"}))
    text = "allowed by " + access.Contribution(odd).describe()
    assert ROOT not in reach.cut_reason(text, lambda m: m != ROOT)
    assert reach.cut_reason(f"something about {ROOT}", lambda m: False) == "something about a memory out of your reach"


# ----------------------------------------------------------------- what routes ask of reach (sees, grants, held)



@given(world=worlds())
def test_sees_grants_in_reach_and_held_anywhere_match_the_reference(world: World) -> None:
    """A caller sees a memory where it holds anything; the grants listed for a memory are those on the
    memory and its ancestors up to the cutoff, stopping at the first node the caller does not see; what it
    holds anywhere is the union of its own grants."""
    tree = world.tree()
    for principals in callers(world):
        held = {n: ref_effective(world, principals, n) for n in world.nodes}
        for node in world.nodes:
            assert sees(tree, principals, node) == bool(held[node])
            expected: list[str] = []
            walk: str | None = node
            while walk is not None and held[walk]:
                expected.extend(g.id for g in world.grants if g.memory_id == walk)
                if walk in world.restricted:
                    break
                walk = world.parent[walk]
            assert sorted(g.id for g in grants_in_reach(tree, principals, node)) == sorted(expected)
        own = {p for g in world.grants if g.principal in principals for p in g.privileges}
        assert held_anywhere(tree, principals) == frozenset(own)
        assert not sees(tree, principals, "hmem_not_there")
