"""The uniform scorer: one rule over every provider's candidates, deterministic, in [0, 1], blind to raw scores."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.federation import scoring

TEXTS = {
    ("m1", "a"): "Caroline went to the LGBTQ support group on Sunday",
    ("m1", "b"): "Melanie painted a sunrise",
    ("m2", "c"): "The support group met again; Caroline spoke about the group",
    ("m2", "d"): "Nothing about that at all",
    ("m3", "e"): "Caroline likes pottery",
}


def order(merged: list[tuple[tuple[str, str], scoring.Components]]) -> list[tuple[str, str]]:
    return [key for key, _ in merged]


def test_a_strong_match_second_on_one_provider_outranks_a_weak_first_on_another() -> None:
    """What rank fusion gets wrong: the other provider's first place is a weak match and must not lead."""
    rankings = {"p1": [("m1", "b"), ("m1", "a")], "p3": [("m3", "e")]}
    merged = scoring.merge("When did Caroline go to the support group?", rankings, TEXTS)
    assert order(merged)[0] == ("m1", "a")
    assert merged[0][1].provider == "p1" and merged[0][1].provider_rank == 2


def test_the_same_candidates_give_the_same_order_every_time() -> None:
    """Deterministic: no set iteration, no clock, no randomness reaches the order."""
    rankings = {"p1": [("m1", "a"), ("m1", "b")], "p2": [("m2", "c"), ("m2", "d")], "p3": [("m3", "e")]}
    first = scoring.merge("Caroline support group", rankings, TEXTS)
    for _ in range(5):
        assert scoring.merge("Caroline support group", dict(reversed(list(rankings.items()))), TEXTS) == first


def test_exact_ties_go_to_the_provider_rank_then_the_provider_then_the_key() -> None:
    """Two candidates alike in every way but their place: the better place first, then the name decides."""
    texts = {("m1", "x"): "same words here", ("m2", "y"): "same words here", ("m2", "z"): "same words here"}
    merged = scoring.merge("same words", {"p2": [("m2", "y"), ("m2", "z")], "p1": [("m1", "x")]}, texts)
    assert order(merged) == [("m1", "x"), ("m2", "y"), ("m2", "z")]
    assert merged[0][1].fused == merged[1][1].fused > merged[2][1].fused


def test_a_provider_that_returns_nothing_changes_nothing() -> None:
    """An empty list adds no candidate and no statistics."""
    rankings = {"p1": [("m1", "a"), ("m1", "b")], "p2": [("m2", "c")]}
    assert scoring.merge("Caroline group", {**rankings, "p9": []}, TEXTS) == scoring.merge(
        "Caroline group", rankings, TEXTS)
    assert scoring.merge("Caroline group", {"p9": []}, TEXTS) == []


def test_without_words_the_providers_order_alone_ranks() -> None:
    """A filter-only recall has nothing to score by words: the prior decides and no uniform score is shown."""
    merged = scoring.merge(None, {"p1": [("m1", "b"), ("m1", "a")], "p2": [("m2", "d")]}, TEXTS)
    assert order(merged) == [("m1", "b"), ("m2", "d"), ("m1", "a")]
    assert all(parts.uniform is None for _, parts in merged)
    assert merged[0][1].fused == 1.0


def test_a_candidate_whose_text_is_unknown_scores_by_its_rank_only() -> None:
    """A record with no text (a file without extraction) gets uniform 0, never an error."""
    merged = scoring.merge("Caroline", {"p1": [("m1", "nothing")], "p2": [("m2", "c")]}, TEXTS)
    parts = dict(merged)
    assert parts[("m1", "nothing")].uniform == 0.0
    assert order(merged)[0] == ("m2", "c")


def test_depth_asks_more_than_the_limit_within_bounds() -> None:
    """At least 30 candidates, three times the limit, never fewer than the limit, capped at 200 otherwise."""
    assert scoring.depth(10) == 30
    assert scoring.depth(20) == 60
    assert scoring.depth(150) == 200
    assert scoring.depth(500) == 500


def test_terms_drop_stopwords_and_cut_common_endings() -> None:
    """So "groups" meets "group" and "the" never counts."""
    assert scoring.terms("The groups went painting") == ["group", "went", "paint"]


def test_terms_cut_the_first_ending_that_leaves_three_letters_and_never_after_ss() -> None:
    """ing, ed, es, s in that order, only when more than two letters stay; a word ending in ss keeps it;
    a word seen again in the same recall is cut the same way."""
    asked = "sing bring singing red bred wanted yes goes boxes gas bus runs glass classes dresses sss"
    want = ["sing", "bring", "sing", "red", "bred", "want", "yes", "goe", "box", "gas", "bus", "run", "glass",
            "class", "dress", "sss"]
    assert scoring.terms(asked) == want
    seen: dict[str, str | None] = {}
    assert scoring.terms(asked, seen) == want and scoring.terms(asked + " the", seen) == want


words = st.sampled_from(["caroline", "group", "support", "paint", "sunrise", "pottery", "the", "a", "went"])
documents = st.lists(st.lists(words, max_size=8).map(" ".join), min_size=0, max_size=6)


@settings(max_examples=150, deadline=None)
@given(st.lists(documents, min_size=1, max_size=4), st.lists(words, max_size=4).map(" ".join),
       st.randoms(use_true_random=False))
def test_the_fused_order_never_depends_on_the_order_providers_answered_in(
    lists: list[list[str]], question: str, rng: random.Random
) -> None:
    """Shuffle which provider answered first: the same keys, the same scores, the same order; all in [0, 1]."""
    texts = {(f"m{p}", f"r{i}"): text for p, docs in enumerate(lists) for i, text in enumerate(docs)}
    rankings = {f"p{p}": [(f"m{p}", f"r{i}") for i in range(len(docs))] for p, docs in enumerate(lists)}
    merged = scoring.merge(question, rankings, texts)
    names = list(rankings)
    rng.shuffle(names)
    assert scoring.merge(question, {n: rankings[n] for n in names}, texts) == merged
    assert len(merged) == len(texts)
    for _, parts in merged:
        assert 0.0 <= parts.fused <= 1.0
        assert parts.uniform is None or 0.0 <= parts.uniform <= 1.0
    fused = [parts.fused for _, parts in merged]
    assert fused == sorted(fused, reverse=True)


def test_words_cut_already_score_as_the_texts_would() -> None:
    """The fan-out cuts each provider's candidates into words as they arrive: the ranking is the same."""
    rankings = {"p1": [("m1", "a"), ("m1", "b")], "p2": [("m2", "c"), ("m2", "d")]}
    words = {key: scoring.terms(text) for key, text in TEXTS.items()}
    for question in ("When did Caroline go to the support group?", "Caroline", None):
        assert scoring.merge(question, rankings, {}, words=words) == scoring.merge(question, rankings, TEXTS)
