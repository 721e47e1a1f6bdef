"""`policies.access` against the brute-force reading of §3 in `tree_model`, and the rules by example."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from policies.access import (
    PRIVILEGES,
    Grant,
    can,
    effective,
    entry_points,
    explain,
    explain_subtree,
    may_read,
    principal_error,
    readable_children,
    visible_ancestors,
    walk_down,
)
from tests.policies.strategies import MAX_DEPTH, callers, worlds
from tests.policies.tree_model import (
    ALL_PRIVILEGES,
    DictTree,
    World,
    ref_cutoff,
    ref_effective,
    ref_entry_points,
    ref_path,
    ref_reaches,
    ref_reaching_grants,
    ref_readable_children,
    ref_subtree,
    ref_visible_ancestors,
    world_from,
)

# --------------------------------------------------------------------------- the main property


@settings(max_examples=1000, deadline=None)
@given(world=worlds(), depth=st.none() | st.integers(min_value=0, max_value=MAX_DEPTH + 1), data=st.data())
def test_every_access_decision_matches_the_reference(
    world: World, depth: int | None, data: st.DataObject
) -> None:
    """Every decision of policies.access, for every caller and memory, agrees with the spec read plainly."""
    tree = world.tree()
    roots = [n for n in world.nodes if world.parent[n] is None]
    asked_from = data.draw(st.sampled_from(world.nodes), label="walk_down from")
    subtrees = {root: ref_subtree(world, root, depth) for root in {*roots, asked_from}}

    for principals in callers(world):
        expected = {n: ref_effective(world, principals, n) for n in world.nodes}

        for node in world.nodes:
            assert effective(tree, principals, node) == expected[node], node
            for privilege in PRIVILEGES:
                assert can(tree, principals, node, privilege) == (privilege in expected[node])
            # A write's answer shows a record only to a caller holding read (issue 9 item 6).
            assert may_read(tree, principals, node) == ("read" in expected[node])

            decision = explain(tree, principals, node)
            assert decision.memory_id == node
            assert decision.privileges == expected[node]
            given_grants = [c.grant for c in decision.contributions]
            for grant in given_grants:
                assert grant.principal in principals, grant
                assert ref_reaches(world, grant, node), grant
            reaching = ref_reaching_grants(world, principals, node)
            assert Counter(g.id for g in given_grants) == Counter(g.id for g in reaching)
            assert decision.cutoff_at == ref_cutoff(world, node)
            path = ref_path(world, node)
            stop = next((i for i, n in enumerate(path) if n in world.restricted), len(path) - 1)
            assert decision.path == tuple(path[: stop + 1])

            assert visible_ancestors(tree, principals, node) == ref_visible_ancestors(world, principals, node)
            assert readable_children(tree, principals, node) == ref_readable_children(world, principals, node)

        entries = entry_points(tree, principals)
        assert len(entries) == len(set(entries)), entries
        assert set(entries) == ref_entry_points(world, principals)

        for root, expected_walk in subtrees.items():
            walked = list(walk_down(tree, principals, root, depth))
            assert walked == [(n, d, expected[n]) for n, d in expected_walk], root


@settings(max_examples=300, deadline=None)
@given(world=worlds(), depth=st.none() | st.integers(min_value=0, max_value=MAX_DEPTH + 1), data=st.data())
def test_explaining_a_whole_subtree_agrees_with_explaining_each_memory(
    world: World, depth: int | None, data: st.DataObject
) -> None:
    """explain_subtree, derived parent to child in one pass, gives each memory the same decision as explain."""
    tree = world.tree()
    root = data.draw(st.sampled_from(world.nodes), label="from")
    expected_nodes = {n for n, _ in ref_subtree(world, root, depth)}
    for principals in callers(world):
        decisions = explain_subtree(tree, principals, root, depth)
        assert set(decisions) == expected_nodes
        for node, decision in decisions.items():
            one = explain(tree, principals, node)
            assert decision.privileges == one.privileges
            assert Counter(c.grant.id for c in decision.contributions) == Counter(
                c.grant.id for c in one.contributions)
            assert (decision.cutoff_at, decision.path) == (one.cutoff_at, one.path)
            assert decision.contributions == one.contributions
            assert decision.reason("read") == one.reason("read")


# --------------------------------------------------------------------------- rules that follow from the spec


@settings(max_examples=300, deadline=None)
@given(world=worlds(), data=st.data())
def test_access_is_additive_a_new_grant_never_takes_anything_away(world: World, data: st.DataObject) -> None:
    """There is no deny: adding a grant anywhere never removes a privilege anywhere."""
    extra = Grant(
        "extra",
        data.draw(st.sampled_from(world.nodes)),
        data.draw(st.sampled_from(["member:m0", "group:g0", "x.team:t0"])),
        data.draw(st.frozensets(st.sampled_from(PRIVILEGES), min_size=1)),
    )
    before, after = world.tree(), world.tree()
    after.grant(extra)
    for principals in callers(world):
        for node in world.nodes:
            assert effective(before, principals, node) <= effective(after, principals, node)


@settings(max_examples=300, deadline=None)
@given(world=worlds(), data=st.data())
def test_restricting_a_memory_never_widens_access(world: World, data: st.DataObject) -> None:
    """The cutoff only stops inheritance: restricting one more memory never adds a privilege."""
    node = data.draw(st.sampled_from(world.nodes))
    tighter = World(world.nodes, world.parent, world.restricted | {node}, world.grants, world.groups)
    loose, tight = world.tree(), tighter.tree()
    for principals in callers(world):
        for n in world.nodes:
            assert effective(tight, principals, n) <= effective(loose, principals, n)


@settings(max_examples=300, deadline=None)
@given(world=worlds())
def test_more_group_memberships_never_remove_privileges(world: World) -> None:
    """A member put in one more group keeps everything it held and gains only what the group holds."""
    tree = world.tree()
    for member, groups in world.groups.items():
        fewer = world.principals_of(member)
        more = fewer | {"group:g0"}
        for node in world.nodes:
            gained = effective(tree, more, node) - effective(tree, fewer, node)
            assert effective(tree, fewer, node) <= effective(tree, more, node)
            assert gained <= effective(tree, frozenset({"group:g0"}), node), (member, groups)


@settings(max_examples=300, deadline=None)
@given(world=worlds(), depth=st.none() | st.integers(min_value=0, max_value=MAX_DEPTH + 1), data=st.data())
def test_walk_down_is_breadth_first_and_stops_at_depth(
    world: World, depth: int | None, data: st.DataObject
) -> None:
    """walk_down yields every memory of the subtree once, nearer first, never past `depth`, never above."""
    tree = world.tree()
    root = data.draw(st.sampled_from(world.nodes))
    principals = data.draw(st.sampled_from(callers(world)))
    walked = list(walk_down(tree, principals, root, depth))
    levels = [level for _, level, _ in walked]
    assert levels == sorted(levels)
    assert levels[0] == 0 and walked[0][0] == root
    if depth is not None:
        assert max(levels) <= depth
    names = [n for n, _, _ in walked]
    assert len(names) == len(set(names))
    for name, level, _ in walked:
        path = ref_path(world, name)
        assert root in path and path.index(root) == level
    below = {n for n in world.nodes if root in ref_path(world, n)[1:]}
    within = {n for n in below if depth is None or ref_path(world, n).index(root) <= depth}
    assert set(names) == within | {root}


# --------------------------------------------------------------------------- the rules, by example

#        company (granted to group:sales, read+write)
#        ├── accounts
#        │   └── acme
#        └── hr (restricted; granted to member:hana, all)
#            └── payroll
#                └── bonus (granted to member:bob, read)
COMPANY = world_from(
    [
        ("company", None),
        ("accounts", "company"),
        ("acme", "accounts"),
        ("hr", "company"),
        ("payroll", "hr"),
        ("bonus", "payroll"),
    ],
    restricted=["hr"],
    grants=[
        ("company", "group:sales", ["read", "write"]),
        ("hr", "member:hana", ALL_PRIVILEGES),
        ("bonus", "member:bob", ["read"]),
    ],
    groups={"bob": ["sales"], "hana": [], "sam": ["sales"]},
)
BOB = COMPANY.principals_of("bob")
HANA = COMPANY.principals_of("hana")
SAM = COMPANY.principals_of("sam")


def test_grants_flow_down_to_every_descendant() -> None:
    """A grant on a memory reaches its children and their children."""
    tree = COMPANY.tree()
    assert effective(tree, SAM, "company") == {"read", "write"}
    assert effective(tree, SAM, "accounts") == {"read", "write"}
    assert effective(tree, SAM, "acme") == {"read", "write"}


def test_a_restricted_memory_stops_grants_from_above() -> None:
    """A restricted memory stops grants from above: neither it nor anything below it inherits them."""
    tree = COMPANY.tree()
    for node in ("hr", "payroll"):
        assert effective(tree, SAM, node) == frozenset()
        decision = explain(tree, SAM, node)
        assert decision.cutoff_at == "hr"
        assert decision.reason("read") == (
            f"refused: no grant on {node} or the ancestors that reach it; "
            "inheritance cut off at restricted memory hr"
        )


def test_a_restricted_memory_keeps_its_own_grants_and_they_flow_down() -> None:
    """The cutoff stops what comes from above, not the restricted memory's own grants."""
    tree = COMPANY.tree()
    assert effective(tree, HANA, "hr") == ALL_PRIVILEGES
    assert effective(tree, HANA, "bonus") == ALL_PRIVILEGES
    assert effective(tree, HANA, "company") == frozenset()


def test_a_grant_inside_a_cut_off_branch_still_opens_that_memory() -> None:
    """A grant inside a cut-off branch still opens that memory, and the caller enters the tree there."""
    tree = COMPANY.tree()
    assert effective(tree, BOB, "payroll") == frozenset()
    assert effective(tree, BOB, "bonus") == {"read"}
    assert readable_children(tree, BOB, "company") == ["accounts"]
    assert readable_children(tree, BOB, "payroll") == ["bonus"]
    assert sorted(entry_points(tree, BOB)) == ["bonus", "company"]
    assert visible_ancestors(tree, BOB, "bonus") == []
    decision = explain(tree, BOB, "bonus")
    assert decision.cutoff_at == "hr"
    assert decision.reason("read") == "allowed by grant g2 to member:bob on bonus gives read"
    assert decision.reason("write") == (
        "refused: the grants that reach bonus do not give write; inheritance cut off at restricted memory hr"
    )


def test_the_creators_implicit_grant_flows_down() -> None:
    """The creator's implicit grant (all four privileges) flows down like any other grant."""
    world = world_from(
        [("team", None), ("project", "team"), ("notes", "project")],
        creators={"project": "ada"},
    )
    tree = world.tree()
    ada = world.principals_of("ada")
    assert effective(tree, ada, "team") == frozenset()
    assert effective(tree, ada, "project") == ALL_PRIVILEGES
    assert effective(tree, ada, "notes") == ALL_PRIVILEGES
    decision = explain(tree, ada, "notes")
    assert [c.grant.implicit for c in decision.contributions] == [True]
    assert decision.reason("delete") == (
        "allowed by creator's implicit grant to member:ada on project gives read,write,create,delete"
    )
    assert decision.as_dict()["grants"] == [
        {
            "grant_id": "c-project",
            "memory_id": "project",
            "principal": "member:ada",
            "privileges": ["read", "write", "create", "delete"],
            "implicit": True,
            "via_group": False,
        }
    ]


def test_a_group_grant_reaches_exactly_the_groups_members() -> None:
    """A grant to a group is held by each of its members, person or agent alike, and by nobody else."""
    tree = COMPANY.tree()
    assert effective(tree, BOB, "acme") == {"read", "write"}
    assert effective(tree, HANA, "acme") == frozenset()
    grants = explain(tree, SAM, "acme").as_dict()["grants"]
    assert isinstance(grants, list) and [g["via_group"] for g in grants] == [True]


def test_no_grant_means_no_access_and_nothing_is_listed() -> None:
    """Access is additive from nothing: a caller with no grant sees no memory at all."""
    tree = COMPANY.tree()
    nobody = COMPANY.principals_of("nobody")
    assert all(effective(tree, nobody, n) == frozenset() for n in COMPANY.nodes)
    assert entry_points(tree, nobody) == []
    assert readable_children(tree, nobody, "company") == []


def test_a_grant_of_no_privileges_opens_nothing() -> None:
    """A grant whose privilege set is empty gives no access and does not reveal the memory in a listing."""
    world = world_from([("top", None), ("leaf", "top")], grants=[("leaf", "member:eve", [])])
    tree = world.tree()
    eve = world.principals_of("eve")
    assert effective(tree, eve, "leaf") == frozenset()
    assert entry_points(tree, eve) == []
    assert readable_children(tree, eve, "top") == []


def test_a_restricted_root_cuts_nothing_off() -> None:
    """A restricted root has nothing above it to stop, so a decision names no cutoff."""
    world = world_from(
        [("root", None), ("child", "root")], restricted=["root"], grants=[("root", "member:a", ["read"])]
    )
    decision = explain(world.tree(), world.principals_of("a"), "child")
    assert decision.privileges == {"read"}
    assert decision.cutoff_at is None
    assert decision.path == ("child", "root")


def test_ancestors_are_shown_only_as_far_up_as_the_caller_sees() -> None:
    """`ancestors` runs from the parent upwards while the caller can see each one, root-most first."""
    world = world_from(
        [("a", None), ("b", "a"), ("c", "b"), ("d", "c"), ("e", "d")],
        restricted=["c"],
        grants=[("a", "member:x", ["read"]), ("c", "member:x", ["read"])],
    )
    tree = world.tree()
    x = world.principals_of("x")
    assert visible_ancestors(tree, x, "e") == ["a", "b", "c", "d"]
    assert visible_ancestors(tree, x, "b") == ["a"]
    assert visible_ancestors(tree, x, "a") == []
    # b restricted without a grant of x's own: the run from e's parent upwards stops below b, though
    # x can see a on its own.
    gap = world_from(
        [(n, world.parent[n]) for n in world.nodes],
        restricted=["b"],
        grants=[("a", "member:x", ["read"]), ("c", "member:x", ["read"])],
    )
    assert visible_ancestors(gap.tree(), x, "e") == ["c", "d"]
    # A hidden parent hides everything above it, even memories the caller could see on their own.
    hidden = world_from(
        [(n, world.parent[n]) for n in world.nodes],
        restricted=["d"],
        grants=[("a", "member:x", ["read"]), ("e", "member:x", ["read"])],
    )
    assert visible_ancestors(hidden.tree(), x, "e") == []
    assert visible_ancestors(hidden.tree(), x, "c") == ["a", "b"]


def test_entry_points_are_where_a_caller_granted_one_branch_enters() -> None:
    """Without `parent`, a listing starts at each memory the caller holds whose parent it cannot see."""
    world = world_from(
        [("org", None), ("eng", "org"), ("api", "eng"), ("web", "eng"), ("other", None)],
        grants=[
            ("eng", "group:devs", ["read"]),
            ("api", "member:dan", ["write"]),
            ("other", "member:dan", ["read"]),
        ],
        groups={"dan": ["devs"]},
    )
    tree = world.tree()
    assert sorted(entry_points(tree, world.principals_of("dan"))) == ["eng", "other"]
    # Acting without the group, dan enters at the one branch granted to him alone.
    assert sorted(entry_points(tree, frozenset({"member:dan"}))) == ["api", "other"]


def test_walk_down_gives_each_memory_its_own_privileges() -> None:
    """walk_down judges each descendant on its own: the cut-off branch is walked, not skipped."""
    walked = list(walk_down(COMPANY.tree(), BOB, "company"))
    assert walked == [
        ("company", 0, frozenset({"read", "write"})),
        ("accounts", 1, frozenset({"read", "write"})),
        ("hr", 1, frozenset()),
        ("acme", 2, frozenset({"read", "write"})),
        ("payroll", 2, frozenset()),
        ("bonus", 3, frozenset({"read"})),
    ]
    assert [n for n, _, _ in walk_down(COMPANY.tree(), BOB, "company", depth=1)] == [
        "company",
        "accounts",
        "hr",
    ]
    assert [n for n, _, _ in walk_down(COMPANY.tree(), BOB, "company", depth=0)] == ["company"]


def test_dict_tree_refuses_an_orphan_or_a_duplicate() -> None:
    """The test tree itself keeps a parent before its children and each id once."""
    tree = DictTree()
    tree.add("a")
    with pytest.raises(ValueError, match="already exists"):
        tree.add("a")
    with pytest.raises(ValueError, match="does not exist"):
        tree.add("b", "missing")


@pytest.mark.parametrize(
    "principal",
    ["member:u_1", "group:sales", "x.team:blue", "x.bot:agent-7", "member:a:b"],
)
def test_principal_kinds_member_group_and_x_prefixed_are_accepted(principal: str) -> None:
    """Principal kinds: member, group and a server's own x.-prefixed kind can hold grants."""
    assert principal_error(principal) is None


@pytest.mark.parametrize(
    "principal",
    ["provider:mem0", "provider:local", "team:blue", "user:u1", "agent:a1", "x.:id", "x:id"],
)
def test_principal_kinds_provider_and_other_unprefixed_kinds_are_refused(principal: str) -> None:
    """Principal kinds: provider writes records but holds no grants; another unprefixed kind is refused."""
    error = principal_error(principal)
    assert error is not None and "cannot hold grants" in error


@pytest.mark.parametrize("principal", ["", "member", "bare", "member:", ":id", ":"])
def test_principal_kinds_bare_or_empty_strings_are_refused(principal: str) -> None:
    """Principal kinds: a bare word, an empty string or a missing kind or id is not `<kind>:<id>`."""
    assert principal_error(principal) == "a principal is written <kind>:<id>"
