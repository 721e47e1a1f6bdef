"""The in-memory tree's layout for a million memories: no per-node dict, no list for a leaf's children,
shared strings for the few providers and creators, one frozenset per distinct set of privileges; and the
same answers as before whatever order nodes arrive in."""

from __future__ import annotations

from gateway.state.tree import MemoryNode, Tree
from policies.access import Grant


def _node(memory_id: str, parent: str | None, stamp: int, **extra: object) -> MemoryNode:
    fields: dict[str, object] = {"restricted": False, "provider": "local", "created_by": "admin"} | extra
    return MemoryNode(memory_id, memory_id, "", parent, bool(fields["restricted"]), "".join(str(fields["provider"])),
                      "".join(str(fields["created_by"])), stamp, stamp)


def test_nodes_and_grants_carry_no_instance_dict() -> None:
    """MemoryNode and Grant are slotted: a per-instance dict would cost about a hundred bytes a memory."""
    node = _node("a", None, 1)
    grant = Grant("g", "a", "member:x", frozenset({"read"}))
    for value in (node, grant):
        assert not hasattr(value, "__dict__")


def test_a_leaf_holds_no_children_list_and_a_parent_loses_its_list_with_its_last_child() -> None:
    """Only memories with children have a list of them; children_of still answers () for a leaf."""
    tree = Tree()
    tree.put(_node("p", None, 1))
    tree.put(_node("c", "p", 2))
    assert set(tree._children) == {None, "p"}
    assert list(tree.children_of("c")) == []
    tree.remove_subtree("c")
    assert set(tree._children) == {None}
    assert list(tree.children_of("p")) == []


def test_providers_creators_and_privilege_sets_are_shared_objects() -> None:
    """Two memories with equal provider and creator strings (made apart) hold the same string objects, and
    grants with equal privileges the same frozenset."""
    tree = Tree()
    tree.put(_node("a", None, 1, provider="lo" + "cal", created_by="ad" + "min"))
    tree.put(_node("b", None, 2, provider="loc" + "al", created_by="adm" + "in"))
    a, b = tree.get("a"), tree.get("b")
    assert a is not None and b is not None
    assert a.provider is b.provider and a.created_by is b.created_by
    tree.add_grant(Grant("g1", "a", "member:x", frozenset({"read", "write"})))
    tree.add_grant(Grant("g2", "b", "member:x", frozenset({"write", "read"})))
    first, second = tree.grant("g1"), tree.grant("g2")
    assert first is not None and second is not None
    assert first.privileges is second.privileges
    assert first.memory_id is a.id


def test_siblings_come_in_key_order_whatever_order_they_arrive_or_move_in() -> None:
    """Children are listed by (created_at, id): a late-arriving older sibling, a load in any order and a
    memory moved in all take their place by key."""
    tree = Tree()
    tree.put(_node("p", None, 0))
    tree.put(_node("q", None, 0))
    for name, stamp in (("c", 30), ("a", 10), ("b", 20)):
        tree.put(_node(name, "p", stamp))
    tree.put(_node("m", "q", 15))
    assert list(tree.children_of("p")) == ["a", "b", "c"]
    tree.update("m", parent_id="p")
    assert list(tree.children_of("p")) == ["a", "m", "b", "c"]
    assert list(tree.children_of("q")) == []

    loaded = Tree()
    loaded.load_nodes([(name, name, "", parent, False, "local", "admin", stamp, stamp)
                       for name, parent, stamp in (("c", "p", 30), ("p", None, 0), ("a", "p", 10), ("b", "p", 20))])
    list(loaded.order_children())
    assert list(loaded.children_of("p")) == ["a", "b", "c"]


def test_restricted_children_are_indexed_as_they_change() -> None:
    """restricted_children_of follows restricting, unrestricting, moving and deleting."""
    tree = Tree()
    tree.put(_node("p", None, 0))
    tree.put(_node("q", None, 0))
    tree.put(_node("a", "p", 1, restricted=True))
    tree.put(_node("b", "p", 2))
    assert set(tree.restricted_children_of("p")) == {"a"}
    tree.update("b", restricted=True)
    assert set(tree.restricted_children_of("p")) == {"a", "b"}
    tree.update("a", restricted=False)
    tree.update("b", parent_id="q")
    assert set(tree.restricted_children_of("p")) == set()
    assert set(tree.restricted_children_of("q")) == {"b"}
    tree.remove_subtree("b")
    assert set(tree.restricted_children_of("q")) == set()
