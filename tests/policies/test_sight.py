"""access.Sight: the kept answers of `sees`, entry points and depth, asked in any order, are the spec's."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.access import Sight, entry_candidates
from tests.policies.strategies import callers, worlds
from tests.policies.tree_model import World, ref_entry_points, ref_path, ref_visible


@settings(max_examples=500, deadline=None)
@given(world=worlds(), data=st.data())
def test_sight_answers_as_the_reference_whatever_order_it_is_asked_in(world: World, data: st.DataObject) -> None:
    """Each memory's visibility and depth, asked in a drawn order of one Sight per caller (so that kept
    answers from below and above are reused), and the entry points among the candidates."""
    tree = world.tree()
    for principals in callers(world):
        order = data.draw(st.permutations(world.nodes), label="order")
        sight = Sight(tree, principals)
        for node in order:
            assert sight.sees(node) == ref_visible(world, principals, node), node
            assert sight.depth(node) == len(ref_path(world, node)) - 1, node
        fresh = Sight(tree, principals)
        found = {m for m in entry_candidates(tree, principals) if fresh.is_entry_point(m)}
        assert found == ref_entry_points(world, principals)
