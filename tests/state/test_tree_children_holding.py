"""Readable children on the gateway's own tree, which lists restricted children apart: the same answer as
the spec read plainly (tests/policies/tree_model.py), whatever the grants and cutoffs."""

from __future__ import annotations

from hypothesis import given

from gateway.state.tree import MemoryNode, Tree
from policies.access import children_holding, readable_neighbours
from tests.policies.strategies import callers, worlds
from tests.policies.tree_model import World, ref_effective


def gateway_tree(world: World) -> Tree:
    tree = Tree()
    for at, node in enumerate(world.nodes):
        tree.put(MemoryNode(node, node, "", world.parent[node], node in world.restricted, "local", "hmbr_x",
                            at, at))
    for grant in world.grants:
        tree.add_grant(grant)
    return tree


@given(world=worlds())
def test_children_holding_on_the_gateway_tree_matches_the_reference(world: World) -> None:
    """Where the caller holds the privilege on the parent, only the restricted children are looked at one
    by one; the answer is still every child holding it, in the tree's order."""
    tree = gateway_tree(world)
    for principals in callers(world):
        held = {n: ref_effective(world, principals, n) for n in world.nodes}
        for node in world.nodes:
            for privilege in ("read", "write", "create", "delete"):
                expected = {c for c in world.nodes if world.parent[c] == node and privilege in held[c]}
                found = children_holding(tree, principals, node, privilege)
                assert set(found) == expected and len(found) == len(expected)
                assert found == [c for c in tree.children_of(node) if c in expected]
            assert set(readable_neighbours(tree, principals, node).children) == \
                {c for c in world.nodes if world.parent[c] == node and "read" in held[c]}
