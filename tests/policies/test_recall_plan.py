"""`policies.recall`: which memories one question covers (§6.1), and one ranking out of many (RRF)."""

from __future__ import annotations

import math
import random

from hypothesis import given, settings
from hypothesis import strategies as st

from policies.recall import DEFAULT_CAP, RRF_K, fuse, plan
from tests.policies.strategies import Question, questions
from tests.policies.tree_model import World, ref_path, ref_plan, ref_subtree, world_from

# --------------------------------------------------------------------------- plan


@settings(max_examples=1000, deadline=None)
@given(question=questions(), cap=st.integers(min_value=0, max_value=45))
def test_plan_matches_the_reference(question: Question, cap: int) -> None:
    """plan covers the readable memories at and below the one asked, nearest first, within depth, at most
    `cap` of them, skips the unreadable ones, and says `subtree:capped_at_N_memories` exactly when it cut."""
    world, principals, asked, depth = question.world, question.principals, question.memory_id, question.depth
    got = plan(world.tree(), principals, asked, depth=depth, cap=cap)
    expected = ref_plan(world, principals, asked, depth, cap)

    assert list(got.memory_ids) == expected.covered
    assert list(got.skipped) == expected.skipped
    assert list(got.capped) == expected.capped
    assert list(got.degraded) == expected.degraded
    assert len(got.memory_ids) <= cap
    assert bool(got.degraded) == bool(got.capped)

    above = set(ref_path(world, asked)[1:])
    everything = [*got.memory_ids, *got.skipped, *got.capped]
    assert not above & set(everything), "recall never searches an ancestor"
    assert len(everything) == len(set(everything))
    assert set(everything) == {n for n, _ in ref_subtree(world, asked, depth)}


def _star(children: int) -> World:
    return world_from(
        [("hub", None), *((f"leaf{i:03}", "hub") for i in range(children))],
        grants=[("hub", "member:reader", ["read"])],
    )


def test_the_default_cap_is_200_memories_and_is_declared() -> None:
    """Without a cap the plan covers 200 memories, the nearest first, and says it capped at 200."""
    world = _star(250)
    got = plan(world.tree(), world.principals_of("reader"), "hub")
    assert DEFAULT_CAP == 200
    assert got.memory_ids == ("hub", *(f"leaf{i:03}" for i in range(199)))
    assert got.capped == tuple(f"leaf{i:03}" for i in range(199, 250))
    assert got.degraded == ("subtree:capped_at_200_memories",)


def test_a_plan_that_fits_under_the_cap_declares_nothing() -> None:
    """Exactly `cap` readable memories are all covered and nothing is declared degraded."""
    world = _star(199)
    got = plan(world.tree(), world.principals_of("reader"), "hub")
    assert len(got.memory_ids) == 200
    assert got.capped == () and got.degraded == ()


def test_depth_zero_searches_the_memory_alone() -> None:
    """`depth: 0` searches the memory alone, `1` adds its children."""
    world = world_from(
        [("a", None), ("b", "a"), ("c", "b")],
        grants=[("a", "member:r", ["read"])],
    )
    tree, r = world.tree(), world.principals_of("r")
    assert plan(tree, r, "a", depth=0).memory_ids == ("a",)
    assert plan(tree, r, "a", depth=1).memory_ids == ("a", "b")
    assert plan(tree, r, "a").memory_ids == ("a", "b", "c")


def test_a_readable_memory_inside_a_cut_off_branch_is_searched() -> None:
    """A branch behind a cutoff is not searched, but a memory inside it the caller holds a grant on is."""
    world = world_from(
        [("top", None), ("open", "top"), ("locked", "top"), ("inner", "locked"), ("granted", "inner")],
        restricted=["locked"],
        grants=[("top", "group:team", ["read"]), ("granted", "member:r", ["read"])],
        groups={"r": ["team"]},
    )
    got = plan(world.tree(), world.principals_of("r"), "top")
    assert got.memory_ids == ("top", "open", "granted")
    assert got.skipped == ("locked", "inner")
    assert got.degraded == ()


def test_write_without_read_does_not_make_a_memory_searchable() -> None:
    """Recall needs `read`: a memory the caller may only write to is skipped."""
    world = world_from([("a", None)], grants=[("a", "member:w", ["write", "create"])])
    got = plan(world.tree(), world.principals_of("w"), "a")
    assert got.memory_ids == () and got.skipped == ("a",)


def test_asking_below_never_reaches_up() -> None:
    """Down, never up: asking a child never covers its parent or a sibling, even when readable."""
    world = world_from([("p", None), ("c", "p"), ("s", "p")], grants=[("p", "member:r", ["read"])])
    assert plan(world.tree(), world.principals_of("r"), "c").memory_ids == ("c",)


# --------------------------------------------------------------------------- fuse

keys = st.sampled_from([f"k{i}" for i in range(12)])
rankings = st.lists(st.lists(keys, unique=True, max_size=10), max_size=16)


@settings(max_examples=500, deadline=None)
@given(lists=rankings)
def test_fused_scores_lie_between_zero_and_one_and_cover_every_key_once(lists: list[list[str]]) -> None:
    """Each key of any list comes out once with a score in (0, 1], best first, ties broken by the key."""
    fused = fuse(lists)
    out_keys = [k for k, _ in fused]
    assert len(out_keys) == len(set(out_keys))
    assert set(out_keys) == {k for ranking in lists for k in ranking}
    for _, score in fused:
        assert 0.0 < score <= 1.0
    assert fused == sorted(fused, key=lambda item: (-item[1], item[0]))


@settings(max_examples=500, deadline=None)
@given(lists=rankings)
def test_fused_scores_are_reciprocal_ranks_over_the_best_possible(lists: list[list[str]]) -> None:
    """score(d) = sum of 1/(60 + rank) over the lists that hold d, divided by the sum for first in as
    many lists as the most widely found key is in (disjoint lists: first in one list scores 1.0)."""
    widest = max((sum(1 for r in lists if key in r) for ranking in lists for key in ranking), default=0)
    for key, score in fuse(lists):
        total = sum(1 / (RRF_K + r.index(key) + 1) for r in lists if key in r)
        assert math.isclose(score, total / (widest / (RRF_K + 1)), rel_tol=1e-12)


@settings(max_examples=500, deadline=None)
@given(
    head=keys,
    count=st.integers(min_value=1, max_value=40),
    tails=st.lists(st.lists(keys, unique=True, max_size=6), max_size=40),
)
def test_first_in_every_list_scores_exactly_one(head: str, count: int, tails: list[list[str]]) -> None:
    """A key ranked first by every provider scores 1.0, however many providers answered."""
    lists = [[head, *(k for k in tail if k != head)] for tail in (tails + [[]] * count)[:count]]
    fused = fuse(lists)
    assert fused[0] == (head, 1.0)


@settings(max_examples=500, deadline=None)
@given(lists=rankings, seed=st.integers(min_value=0, max_value=2**32 - 1))
def test_fusion_does_not_depend_on_the_order_of_the_lists(lists: list[list[str]], seed: int) -> None:
    """The same rankings received in another order fuse to the same keys, order and scores."""
    shuffled = list(lists)
    random.Random(seed).shuffle(shuffled)
    assert fuse(shuffled) == fuse(lists)


def test_keys_tied_by_rank_are_ordered_by_key_whatever_the_list_order() -> None:
    """Keys holding the same ranks in another order tie exactly, and the tie goes to the key."""
    # a is ranked 1, 1, 2, 3 and b 3, 2, 1, 1: the same four reciprocal ranks, summed in another order.
    lists = [["a", "p1", "b"], ["a", "b"], ["b", "a"], ["b", "p1", "a"]]
    for order in (lists, lists[::-1], lists[1:] + lists[:1]):
        fused = fuse(order)
        assert [k for k, _ in fused] == ["a", "b", "p1"]
        assert fused[0][1] == fused[1][1]
        assert fused == fuse(lists)


@settings(max_examples=300, deadline=None)
@given(
    rank=st.integers(min_value=1, max_value=8),
    others=st.lists(st.lists(keys, unique=True, max_size=10), max_size=4),
)
def test_a_key_in_two_lists_outranks_one_at_the_same_rank_in_one(rank: int, others: list[list[str]]) -> None:
    """Agreement counts: found at rank r by two providers beats found at rank r by one."""
    pad = [f"pad{i}" for i in range(rank - 1)]
    lists = [[*pad, "both"], [*pad, "both"], [*pad, "once"], *others]
    fused = fuse(lists)
    scores = dict(fused)
    assert scores["both"] > scores["once"]
    assert [k for k, _ in fused].index("both") < [k for k, _ in fused].index("once")


def test_fusion_with_k_60_by_hand() -> None:
    """k = 60: two lists [a, b, c] and [b, a]; worked out with pencil and paper."""
    fused = fuse([["a", "b", "c"], ["b", "a"]])
    # a and b: 1/61 + 1/62 each, over the best 2/61 -> (1 + 61/62) / 2 = 123/124.
    # c: 1/63 over 2/61 -> 61/126.
    assert [k for k, _ in fused] == ["a", "b", "c"]
    assert math.isclose(fused[0][1], 123 / 124, rel_tol=1e-15)
    assert math.isclose(fused[1][1], 123 / 124, rel_tol=1e-15)
    assert math.isclose(fused[2][1], 61 / 126, rel_tol=1e-15)
    assert round(fused[0][1], 6) == 0.991935
    assert round(fused[2][1], 6) == 0.484127


def test_fusion_of_one_list_keeps_its_order() -> None:
    """One provider's ranking passes through unchanged; its head scores 1, the next 61/62."""
    fused = fuse([["x", "y", "z"]])
    assert [k for k, _ in fused] == ["x", "y", "z"]
    assert fused[0][1] == 1.0
    assert math.isclose(fused[1][1], 61 / 62, rel_tol=1e-15)


def test_disjoint_rankings_from_different_providers_each_lead_with_one() -> None:
    """Providers never share a record: each one's first hit scores 1.0, its second 61/62 (k = 60)."""
    fused = fuse([["a", "b"], ["x", "y", "z"]])
    assert [k for k, _ in fused] == ["a", "x", "b", "y", "z"]
    assert fused[0][1] == 1.0 and fused[1][1] == 1.0
    assert math.isclose(fused[2][1], 61 / 62, rel_tol=1e-15)
    assert math.isclose(fused[4][1], 61 / 63, rel_tol=1e-15)


def test_fusion_of_nothing_is_empty() -> None:
    """No lists, or only empty ones, fuse to no results."""
    assert fuse([]) == []
    assert fuse([[], []]) == []
