"""Nodes and grants the load builds through their thawed twins (gateway/state/twins.py) are the frozen values
themselves: the same class, equality and hash as ones built the usual way, and they refuse to change."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import pytest

from gateway.state.rows import privileges_of_text
from gateway.state.tree import MemoryNode, Tree
from gateway.state.twins import thawed_twin
from policies.access import Grant


def test_loaded_nodes_and_grants_are_frozen_values_equal_to_built_ones() -> None:
    tree = Tree()
    tree.load_nodes([("m1", "one", "d", None, True, "local", "admin", 5, 7)])
    tree.load_grants([("g1", "m1", "member:a", "read,write", 1)], privileges_of_text)
    node, grant = tree.get("m1"), tree.grant("g1")
    assert type(node) is MemoryNode and type(grant) is Grant
    built = MemoryNode("m1", "one", "d", None, True, "local", "admin", 5, 7)
    assert node == built and hash(node) == hash(built)
    assert grant == Grant("g1", "m1", "member:a", frozenset({"read", "write"}), True)
    assert hash(grant) == hash(Grant("g1", "m1", "member:a", frozenset({"read", "write"}), True))
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.name = "changed"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        grant.principal = "member:b"  # type: ignore[misc]
    assert dataclasses.replace(node, name="two").name == "two"


def test_a_twin_of_a_class_it_cannot_build_fails_when_made() -> None:
    """A frozen dataclass without slots has another layout: making its twin fails at once."""

    @dataclass(frozen=True)
    class NoSlots:
        a: str

    with pytest.raises(TypeError):
        thawed_twin(NoSlots)
